package cache

import (
	"bytes"
	"compress/gzip"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var allFields = cmp.AllowUnexported(entry{})

func sampleEntry() *entry {
	return &entry{
		status:       200,
		gzip:         true,
		body:         []byte("\x1f\x8b compressed bytes"),
		etag:         `"abc123"`,
		total:        42,
		lastModified: time.Date(2024, 1, 10, 9, 0, 0, 0, time.UTC),
		storedAt:     time.Date(2024, 1, 15, 12, 0, 0, 123, time.UTC),
		fresh:        10 * time.Second,
		stale:        15 * time.Minute,
	}
}

func TestEncodeDecode(t *testing.T) {
	for _, tc := range []struct {
		name string
		e    *entry
	}{
		{"list", sampleEntry()},
		{"detail 404, no last modified", &entry{status: 404, body: []byte(`{}`), etag: `"x"`, total: -1,
			storedAt: time.Unix(1700000000, 0), fresh: 5 * time.Second}},
		{"empty body", &entry{status: 200, etag: `"e"`, storedAt: time.Unix(1, 0), fresh: time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decode("k", encode("k", tc.e))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			// Times come back in local time; compare instants.
			want := *tc.e
			want.storedAt, got.storedAt = want.storedAt.UTC(), got.storedAt.UTC()
			if !want.lastModified.IsZero() {
				want.lastModified, got.lastModified = want.lastModified.UTC(), got.lastModified.UTC()
			}
			if want.body == nil {
				want.body = []byte{}
			}
			got.held = 0 // the decoded entry is charged for the whole value
			if diff := cmp.Diff(&want, got, allFields); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeRefusesEveryCorruption(t *testing.T) {
	good := encode("k", sampleEntry())
	for i := range good {
		for _, bit := range []byte{1, 0x80} {
			b := bytes.Clone(good)
			b[i] ^= bit
			if _, err := decode("k", b); err == nil {
				t.Errorf("byte %d ^ %#x decoded", i, bit)
			}
		}
	}
	for n := range len(good) {
		if _, err := decode("k", good[:n]); err == nil {
			t.Errorf("%d of %d bytes decoded", n, len(good))
		}
	}
	if _, err := decode("k", append(bytes.Clone(good), 0)); err == nil {
		t.Error("a trailing byte decoded")
	}
	if _, err := decode("other", good); err == nil {
		t.Error("the value of another key decoded")
	}
}

// FuzzDecode: whatever Redis holds, decoding never panics, and what
// decodes re-encodes to the same bytes.
func FuzzDecode(f *testing.F) {
	f.Add(encode("k", sampleEntry()))
	f.Add([]byte("garbage"))
	f.Add([]byte(valueMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decode("k", b)
		if err != nil {
			return
		}
		if again := encode("k", e); !bytes.Equal(again, b) {
			t.Fatalf("re-encoding differs:\n%x\n%x", b, again)
		}
	})
}

func TestEntryTTLRoundsDown(t *testing.T) {
	stored := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	e := &entry{storedAt: stored, fresh: 10 * time.Second}
	for _, tc := range []struct {
		after time.Duration
		want  int64
	}{{0, 10}, {9500 * time.Millisecond, 0}, {10 * time.Second, 0}, {10300 * time.Millisecond, -1}, {11 * time.Second, -1}, {11100 * time.Millisecond, -2}} {
		if got := e.ttl(stored.Add(tc.after)); got != tc.want {
			t.Errorf("ttl %v after storing a 10s entry = %d, want %d", tc.after, got, tc.want)
		}
	}
}

// TestGzipWritersSurviveCollections checks that a compression after
// garbage collections reuses a writer, instead of allocating the
// megabyte of tables a new one takes on its first write, and that the
// result decompresses to the body.
func TestGzipWritersSurviveCollections(t *testing.T) {
	body := bytes.Repeat([]byte(`{"headline":"Council commissions review","n":12345},`), 200)
	var g gzipPool
	g.compress(body)
	runtime.GC()
	runtime.GC() // a sync.Pool is empty after two
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	z := g.compress(body)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 256<<10 {
		t.Errorf("a compression after two collections allocated %d bytes: a new writer", n)
	}
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(zr); err != nil || !bytes.Equal(got, body) {
		t.Fatalf("decompressed %d bytes, %v; want the body back", len(got), err)
	}
}
