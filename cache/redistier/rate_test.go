package redistier

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// Charges on Redis's clock: a bucket of 10 a second gives all of a
// charge or none of it, or as much as it holds; two replicas share it;
// time refills it.
func TestChargeSharesABucket(t *testing.T) {
	e := newEnv(t)
	e.m.SetTime(time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC))
	other := e.tier(t)
	ctx := context.Background()
	r := Rate{Events: 10, Per: time.Second}
	steps := []struct {
		name   string
		tier   *Tier
		n      int
		atMost bool
		want   Charged
	}{
		{"all of 6", e.t, 6, false, Charged{Allowed: 6, Remaining: 4}},
		{"another replica: all of 6 is too many", other, 6, false, Charged{Allowed: 0, Remaining: 0, RetryAfter: 200 * time.Millisecond}},
		{"another replica: at most 6", other, 6, true, Charged{Allowed: 4, Remaining: 0}},
		{"empty", e.t, 1, true, Charged{RetryAfter: 100 * time.Millisecond}},
	}
	for _, s := range steps {
		got, ok := s.tier.Charge(ctx, "client:a", r, s.n, s.atMost)
		if !ok {
			t.Fatalf("%s: Redis could not be asked", s.name)
		}
		if diff := cmp.Diff(s.want, got, cmp.Comparer(near), cmp.Comparer(nearInt)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", s.name, diff)
		}
	}
	e.m.SetTime(time.Date(2026, 11, 20, 9, 0, 0, 500_000_000, time.UTC))
	if got, _ := e.t.Charge(ctx, "client:a", r, 5, false); got.Allowed != 5 {
		t.Errorf("half a second later, charging 5: %+v, want all 5", got)
	}
	if got, _ := e.t.Charge(ctx, "client:b", r, 10, false); got.Allowed != 10 {
		t.Errorf("another key: %+v, want a bucket of its own", got)
	}
	if keys := e.m.Keys(); !cmp.Equal(keys, []string{"rate:prodapi:v1:client:a", "rate:prodapi:v1:client:b"}) {
		t.Errorf("keys %q", keys)
	}
}

// near compares durations to the millisecond, and nearInt counts to one
// event: Redis's clock is in microseconds, and the script's arithmetic in
// floating point (3.9999994 events remaining read as 3).
func near(a, b time.Duration) bool { return (a - b).Abs() < time.Millisecond }
func nearInt(a, b int) bool        { return a-b <= 1 && b-a <= 1 }

// Without Redis, or with Redis gone, a charge is not made: ok is false,
// and the failure counts.
func TestChargeWithoutRedis(t *testing.T) {
	alone := New(nil, Options{})
	if _, ok := alone.Charge(context.Background(), "client:a", Rate{Events: 10, Per: time.Second}, 1, false); ok {
		t.Error("a tier without Redis charged")
	}
	e := newEnv(t, func(o *Options) { o.Timeout = 100 * time.Millisecond })
	e.m.Close()
	if _, ok := e.t.Charge(context.Background(), "client:a", Rate{Events: 10, Per: time.Second}, 1, false); ok {
		t.Error("a tier whose Redis is gone charged")
	}
	if got := e.errors("rate"); got != 1 {
		t.Errorf("rate errors %d, want 1", got)
	}
}
