package cache

import (
	"fmt"
	"testing"
	"time"

	"github.com/prodapi/prodapi/server/metrics"
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
