package redistier

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A client's waiters are counted across the replicas: a join beyond its
// cap is refused whichever replica asks, a waiter that leaves frees its
// place, and another client's count is its own.
func TestWaitersCap(t *testing.T) {
	e := newEnv(t)
	a, b := e.t, e.tier(t) // two replicas
	ctx := context.Background()
	const lease = 30 * time.Second
	join := func(tr *Tier, client, id string) bool {
		t.Helper()
		ok, err := tr.JoinWaiter(ctx, client, id, 2, lease)
		if err != nil {
			t.Fatalf("JoinWaiter(%s, %s): %v", client, id, err)
		}
		return ok
	}
	got := []bool{
		join(a, "c", "a-1"),
		join(b, "c", "b-1"),
		join(a, "c", "a-2"), // the cap: 2 across both
		join(b, "c", "b-1"), // one there already: renewed, not refused
		join(b, "other", "b-2"),
	}
	if diff := cmp.Diff([]bool{true, true, false, true, true}, got); diff != "" {
		t.Errorf("joined (-want +got):\n%s", diff)
	}
	if err := a.LeaveWaiter(ctx, "c", "a-1"); err != nil {
		t.Fatal(err)
	}
	if !join(b, "c", "b-3") {
		t.Error("a place freed by a waiter that left was not taken")
	}
	if ttl := e.m.TTL(waitersKey("c")); ttl <= 0 || ttl > lease {
		t.Errorf("the set's TTL %s, want at most the lease", ttl)
	}
}

// The waiters of a replica that died leave the count once their leases
// end; the live replica's, renewed, stay. A lease that lapsed is not
// renewed back.
func TestWaitersLeases(t *testing.T) {
	e := newEnv(t)
	live, dead := e.t, e.tier(t)
	ctx := context.Background()
	const lease = 30 * time.Second
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	e.m.SetTime(start) // Redis's clock, which the scripts read
	for _, w := range []struct {
		tr *Tier
		id string
	}{{live, "live-1"}, {dead, "dead-1"}, {dead, "dead-2"}} {
		if ok, err := w.tr.JoinWaiter(ctx, "c", w.id, 3, lease); !ok || err != nil {
			t.Fatalf("JoinWaiter(%s): %v %v", w.id, ok, err)
		}
	}
	if ok, _ := live.JoinWaiter(ctx, "c", "live-2", 3, lease); ok {
		t.Fatal("joined beyond the cap")
	}
	// The live replica renews every third of a lease; the dead one never
	// does.
	for i := 1; i <= 4; i++ {
		e.m.SetTime(start.Add(time.Duration(i) * lease / 3))
		if err := live.RenewWaiters(ctx, map[string][]string{"c": {"live-1"}}, lease); err != nil {
			t.Fatal(err)
		}
	}
	// 40 s on: the dead replica's leases ended, the live one's did not.
	if ok, err := live.JoinWaiter(ctx, "c", "live-2", 3, lease); !ok || err != nil {
		t.Fatalf("the dead replica's waiters still count: %v %v", ok, err)
	}
	members, err := e.rdb.ZRange(ctx, waitersKey("c"), 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"live-1", "live-2"}, members); diff != "" {
		t.Errorf("waiters (-want +got):\n%s", diff)
	}
	// A waiter its replica could not renew in time is not counted again.
	e.m.SetTime(start.Add(2 * time.Minute))
	live.JoinWaiter(ctx, "c", "live-3", 3, lease) // drops the lapsed ones
	if err := live.RenewWaiters(ctx, map[string][]string{"c": {"live-1", "live-2", "live-3"}}, lease); err != nil {
		t.Fatal(err)
	}
	if members, _ = e.rdb.ZRange(ctx, waitersKey("c"), 0, -1).Result(); !cmp.Equal(members, []string{"live-3"}) {
		t.Errorf("after the leases lapsed and a renewal: %v, want [live-3]", members)
	}
}

// Without Redis, or with it down, the calls say so (the feed counts on
// its replica alone), and the failures are counted.
func TestWaitersWithoutRedis(t *testing.T) {
	ctx := context.Background()
	alone := New(nil, Options{})
	if _, err := alone.JoinWaiter(ctx, "c", "1", 1, time.Second); !errors.Is(err, errNoRedis) {
		t.Errorf("JoinWaiter without Redis: %v", err)
	}
	e := newEnv(t)
	e.m.Close()
	if _, err := e.t.JoinWaiter(ctx, "c", "1", 1, time.Second); err == nil {
		t.Error("JoinWaiter with Redis down: no error")
	}
	if err := e.t.RenewWaiters(ctx, map[string][]string{"c": {"1"}}, time.Second); err == nil {
		t.Error("RenewWaiters with Redis down: no error")
	}
	if err := e.t.LeaveWaiter(ctx, "c", "1"); err == nil {
		t.Error("LeaveWaiter with Redis down: no error")
	}
	if got := e.errors("waiters"); got != 3 {
		t.Errorf("errors{waiters} = %d, want 3", got)
	}
}
