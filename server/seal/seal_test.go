package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

var secret = []byte("a-secret-of-at-least-thirty-two-bytes!!")

func newBox(t *testing.T, secret []byte, label string, version byte) *Box {
	t.Helper()
	b, err := NewBox(secret, label, version, 20)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBox(t *testing.T) {
	b := newBox(t, secret, "test v1", 1)
	plain := []byte("twenty bytes exactly")
	s1, err := b.Seal(plain)
	if err != nil {
		t.Fatal(err)
	}
	s2, _ := b.Seal(plain)
	if s1 == s2 {
		t.Error("the same value sealed twice gives the same string")
	}
	other, _ := b.Seal([]byte("another value, same."))
	if len(s1) != b.Len() || len(s2) != b.Len() || len(other) != b.Len() {
		t.Errorf("lengths %d %d %d, want %d", len(s1), len(s2), len(other), b.Len())
	}
	for _, s := range []string{s1, s2} {
		got, err := b.Open(s)
		if err != nil || !bytes.Equal(got, plain) {
			t.Errorf("Open = %q, %v", got, err)
		}
	}
	// Another Box of the same secret and label (another replica, another
	// process: another key salt) opens it, and b opens its.
	b2 := newBox(t, secret, "test v1", 1)
	if got, err := b2.Open(s1); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("another box: %q, %v", got, err)
	}
	s3, _ := b2.Seal(plain)
	if got, err := b.Open(s3); err != nil || !bytes.Equal(got, plain) {
		t.Errorf("another box's value: %q, %v", got, err)
	}
	if _, err := b.Seal([]byte("short")); err == nil {
		t.Error("a value of the wrong size was sealed")
	}

	tampered := []byte(s1)
	if mid := len(tampered) / 2; tampered[mid] == 'A' {
		tampered[mid] = 'B'
	} else {
		tampered[mid] = 'A'
	}
	for name, tc := range map[string]struct {
		box  *Box
		s    string
		want error
	}{
		"another secret":  {newBox(t, []byte("another secret entirely, also long"), "test v1", 1), s1, ErrOpen},
		"another label":   {newBox(t, secret, "test v2", 1), s1, ErrOpen},
		"another version": {newBox(t, secret, "test v1", 2), s1, ErrOpen},
		"altered":         {b, string(tampered), ErrOpen},
		"too short":       {b, s1[1:], ErrShape},
		"too long":        {b, s1 + "A", ErrShape},
		"not base64url":   {b, strings.Repeat("+", b.Len()), ErrShape},
		"empty":           {b, "", ErrShape},
	} {
		if _, err := tc.box.Open(tc.s); !errors.Is(err, tc.want) {
			t.Errorf("%s: Open: %v, want %v", name, err, tc.want)
		}
	}
}

// A key seals at most maxSeals values; then the box derives another,
// and what the first sealed still opens.
func TestBoxRenews(t *testing.T) {
	b := newBox(t, secret, "test v1", 1)
	plain := []byte("twenty bytes exactly")
	before, _ := b.Seal(plain)
	first := b.cur.Load()
	first.seals.Store(maxSeals)
	after, _ := b.Seal(plain)
	if b.cur.Load() == first || b.cur.Load().salt == first.salt {
		t.Fatal("the key was not renewed")
	}
	for _, s := range []string{before, after} {
		if got, err := b.Open(s); err != nil || !bytes.Equal(got, plain) {
			t.Errorf("Open = %q, %v", got, err)
		}
	}
}

// Made-up salts are not kept: only keys that opened a value are.
func TestBoxKeepsOnlyKeysThatOpen(t *testing.T) {
	b := newBox(t, secret, "test v1", 1)
	other := newBox(t, []byte("another secret entirely, also long"), "test v1", 1)
	for range 2 * maxKeys {
		s, _ := other.Seal([]byte("twenty bytes exactly"))
		b.Open(s)
		other.cur.Load().seals.Store(maxSeals) // a new salt for the next
	}
	b.mu.Lock()
	n := len(b.keys)
	b.mu.Unlock()
	if n != 1 {
		t.Errorf("%d keys kept, want 1 (its own)", n)
	}
}

// A position is sealed per event per stream: what one costs.
func BenchmarkBox(b *testing.B) {
	box, err := NewBox(secret, "test v1", 1, 65)
	if err != nil {
		b.Fatal(err)
	}
	plain := make([]byte, 65)
	b.Run("Seal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			box.Seal(plain)
		}
	})
	s, _ := box.Seal(plain)
	b.Run("Open", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			box.Open(s)
		}
	})
}
