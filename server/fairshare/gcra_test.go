package fairshare

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A view in GCRA's terms is a token bucket: it holds its limit's events
// at first, gives one an interval back, never holds more than a full
// bucket, and owes no more than maxDebt buckets.
func TestView(t *testing.T) {
	g := newGCRA(Rate{4, time.Second}) // an event every 250ms, four at once
	if want := (gcra{interval: 250 * int64(time.Millisecond), tau: int64(time.Second)}); g != want {
		t.Fatalf("newGCRA(4/s) = %+v, want %+v", g, want)
	}
	const now = int64(1_000_000_000_000)
	ms := int64(time.Millisecond)
	type step struct {
		Op     string
		At, N  int64 // ms after now; events
		OK     bool
		Tokens int64 // after the step, at At
	}
	var got []step
	var v view
	do := func(op string, at, n int64) {
		s := step{Op: op, At: at, N: n, OK: true}
		t := now + at*ms
		switch op {
		case "take":
			_, s.OK = v.take(g, t, n)
		case "force":
			v.force(g, t, n)
		case "set":
			v.set(g, t, n)
		}
		s.Tokens = g.tokens(v.tat.Load(), t)
		got = append(got, s)
	}
	do("take", 0, 3)
	do("take", 0, 2)    // holds 1
	do("take", 0, 1)    // empty
	do("take", 249, 1)  // not yet
	do("take", 250, 1)  // one back
	do("take", 5000, 5) // more than a bucket, however long it waited
	do("take", 5000, 4) // full again, not fuller
	do("force", 5000, 3)
	do("force", 5000, 100) // down to two buckets of debt
	do("set", 6000, 2)
	do("set", 6000, 9)
	do("set", 6000, -50)
	want := []step{
		{"take", 0, 3, true, 1},
		{"take", 0, 2, false, 1},
		{"take", 0, 1, true, 0},
		{"take", 249, 1, false, 0},
		{"take", 250, 1, true, 0},
		{"take", 5000, 5, false, 4},
		{"take", 5000, 4, true, 0},
		{"force", 5000, 3, true, -3},
		{"force", 5000, 100, true, -8},
		{"set", 6000, 2, true, 2},
		{"set", 6000, 9, true, 4},
		{"set", 6000, -50, true, -8},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	// Two events owed past empty: the third comes back after 750ms.
	v.set(g, now, -2)
	if w := g.wait(v.tat.Load(), now, 1); w != 750*time.Millisecond {
		t.Errorf("wait for one event, two owed: %v, want 750ms", w)
	}
}

// A rate that does not divide into whole nanoseconds is rounded to a
// longer interval: a limit never lets more through than it says, and
// holds its events at once.
func TestGCRARoundsDown(t *testing.T) {
	for _, r := range []Rate{{600, time.Second}, {7, time.Hour}, {3, time.Nanosecond}} {
		g := newGCRA(r)
		if g.interval*int64(r.Events) < r.Per.Nanoseconds() || g.tau != g.interval*int64(r.Events) {
			t.Errorf("%v: %+v: an event every %dns, %d at once", r, g, g.interval, g.tau/g.interval)
		}
		// Spent, the bucket is full again after Per, not a second more.
		if got, want := g.full(1+g.tau, 1), seconds(r.Per.Nanoseconds()); got != want {
			t.Errorf("%v: a spent bucket is full in %ds, want %ds", r, got, want)
		}
	}
}

// However many goroutines take from one view at once, it gives out its
// bucket and no more.
func TestViewConcurrent(t *testing.T) {
	g := newGCRA(Rate{1000, time.Hour})
	var v view
	var taken atomic.Int64
	var wg sync.WaitGroup
	const now = int64(1_000_000_000)
	for range 8 {
		wg.Go(func() {
			for range 500 {
				if _, ok := v.take(g, now, 1); ok {
					taken.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if taken.Load() != 1000 {
		t.Errorf("8 goroutines took %d from a bucket of 1000", taken.Load())
	}
}
