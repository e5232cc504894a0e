package cache

import (
	"fmt"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources/metrics"
)

func localEntry(n int, now time.Time) *entry {
	return &entry{status: 200, body: make([]byte, n), storedAt: now, fresh: time.Minute, stale: time.Minute}
}

func TestLocalEvictsLeastRecentlyUsed(t *testing.T) {
	m := newMetrics(metrics.NewMetrics())
	now := time.Unix(1000, 0)
	one := localEntry(1000, now)
	size := one.size() + int64(len("k0")) + 100
	l := newLocal(4*size, time.Second, true, m) // room for four
	for i := range 4 {
		l.put(fmt.Sprintf("k%d", i), localEntry(1000, now), now)
	}
	// k0 is read, so k1 is the first without a second chance.
	if l.get("k0", now) == nil {
		t.Fatal("k0 missing")
	}
	l.put("k4", localEntry(1000, now), now)
	for key, want := range map[string]bool{"k0": true, "k1": false, "k2": true, "k3": true, "k4": true} {
		if got := l.get(key, now) != nil; got != want {
			t.Errorf("%s kept = %t, want %t", key, got, want)
		}
	}
	if got := m.localEvictions.Value(); got != 1 {
		t.Errorf("evictions = %d, want 1", got)
	}
	if got := m.localBytes.Value(); got != float64(4*size) {
		t.Errorf("bytes = %v, want %d", got, 4*size)
	}
}

func TestLocalRefusesWhatCannotFit(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLocal(2048, time.Second, true, nil)
	l.put("small", localEntry(10, now), now)
	l.put("huge", localEntry(4096, now), now)
	if l.get("huge", now) != nil || l.get("small", now) == nil {
		t.Error("a too large entry was kept, or pushed out what fitted")
	}
}

func TestLocalDropsEntriesPastTheirStaleWindow(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLocal(1<<20, time.Second, true, nil)
	l.put("k", localEntry(10, now), now)
	if l.get("k", now.Add(119*time.Second)) == nil {
		t.Error("entry gone within its stale window")
	}
	if l.get("k", now.Add(120*time.Second)) != nil {
		t.Error("entry served past its stale window")
	}
}

func TestLocalOff(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newLocal(-1, time.Second, true, nil)
	l.put("k", localEntry(10, now), now)
	if l.get("k", now) != nil {
		t.Error("a disabled tier kept an entry")
	}
}

func TestBreaker(t *testing.T) {
	clk := newClock()
	g := newMetrics(metrics.NewMetrics()).breakerState
	b := breaker{now: clk.Now, gauge: g}
	b.set(closed)
	calls := func(n int, ok bool) {
		for range n {
			if b.allow() {
				b.done(ok)
			}
		}
	}
	type state struct {
		s     breakerState
		gauge float64
		allow bool
	}
	check := func(step string, want state) {
		t.Helper()
		got := state{b.current(), g.Value(), false}
		got.allow = b.allow()
		if got != want {
			t.Errorf("%s: got %+v, want %+v", step, got, want)
		}
	}

	// A busy process: a run of timeouts among many good calls is not a
	// sick Redis (five in a row used to open the breaker).
	calls(40, true)
	calls(15, false)
	check("15 failures after 40 successes", state{closed, 0, true})
	b.done(true) // the check's allowed call

	// Failures age out of the window.
	clk.Advance(breakerWindow + bucketWidth)
	calls(breakerMinCalls-1, false)
	check("too few calls to judge", state{closed, 0, true})
	b.done(true)
	clk.Advance(breakerWindow + bucketWidth)
	calls(breakerMinCalls-1, false)
	check("old failures forgotten", state{closed, 0, true})
	b.done(true)

	// Half the calls of the window failing opens it.
	clk.Advance(breakerWindow + bucketWidth)
	calls(breakerMinCalls/2, true)
	calls(breakerMinCalls/2-1, false)
	check("just under half failed", state{closed, 0, true})
	b.done(false)
	check("half failed", state{open, 1, false})

	// A call allowed before it opened says nothing once it is open.
	b.done(true)
	check("a late success while open", state{open, 1, false})

	clk.Advance(breakerCooldown)
	check("after the cool-down", state{open, 1, true}) // this allow is the probe
	if b.allow() {
		t.Error("a second call allowed while the probe is out")
	}
	b.done(false)
	check("failed probe", state{open, 1, false})

	clk.Advance(breakerCooldown)
	if !b.allow() {
		t.Fatal("no probe after the second cool-down")
	}
	if g.Value() != 0.5 {
		t.Errorf("gauge %v while probing, want 0.5", g.Value())
	}
	b.done(true)
	check("successful probe", state{closed, 0, true})
	b.done(true)
	// The window starts again: the failures before it opened are gone.
	calls(4, false)
	check("fresh window after closing", state{closed, 0, true})
}

// With Redis a record is a hit for LocalTTL at most, never past its
// entry's freshness; without Redis, for the whole freshness.
func TestLocalServesForLocalTTL(t *testing.T) {
	now := time.Unix(1000, 0)
	short := localEntry(10, now)
	short.fresh = time.Second
	for _, tc := range []struct {
		name   string
		shared bool
		e      *entry
		want   time.Time
	}{
		{"with Redis", true, localEntry(10, now), now.Add(2 * time.Second)},
		{"with Redis, fresh for less", true, short, now.Add(time.Second)},
		{"without Redis", false, localEntry(10, now), now.Add(time.Minute)},
	} {
		l := newLocal(1<<20, 2*time.Second, tc.shared, nil)
		l.put("k", tc.e, now)
		if got := l.get("k", now).localUntil; !got.Equal(tc.want) {
			t.Errorf("%s: served until %v, want %v", tc.name, got, tc.want)
		}
	}
}
