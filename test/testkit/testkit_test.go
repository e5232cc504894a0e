package testkit

import (
	"fmt"
	"testing"
	"time"
)

func TestClock(t *testing.T) {
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	c := NewClock(t0)
	c.Advance(90 * time.Second)
	c.Advance(-30 * time.Second)
	if got, want := c.Now(), t0.Add(time.Minute); !got.Equal(want) {
		t.Errorf("Now = %v, want %v", got, want)
	}
	c.Set(t0)
	if got := c.Now(); !got.Equal(t0) {
		t.Errorf("Now after Set = %v, want %v", got, t0)
	}
}

func TestEventuallyWaitsForTheCondition(t *testing.T) {
	calls := 0
	Eventually(t, "the third call", func() bool { calls++; return calls == 3 })
	if calls != 3 {
		t.Errorf("cond called %d times, want 3", calls)
	}
}

func TestBuffer(t *testing.T) {
	var b Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		fmt.Fprint(&b, "one ")
	}()
	<-done
	fmt.Fprint(&b, "two")
	if got := b.String(); got != "one two" {
		t.Errorf("String = %q, want %q", got, "one two")
	}
}
