package redistier

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/test/testkit"
)

// On a hung Redis, the first call of a request waits the whole budget;
// every later call of the request is not made at all (so the request
// waits one Timeout, not one per call). Its write is still queued: it
// is made off the request path.
func TestBudgetBoundsARequestsCalls(t *testing.T) {
	rdb, h := silentRedis(t)
	// A timeout long enough for the GET to be written on a busy machine:
	// a call whose deadline passes before it is sent never reaches Redis.
	tr := New(rdb, Options{Timeout: 300 * time.Millisecond, Now: newClock().Now})
	defer closeTier(t, tr)
	ctx := tr.WithBudget(context.Background())
	// The calls of a miss, in the order the cache makes them.
	if _, ok := tr.Get(ctx, "k"); ok {
		t.Fatal("a hung Redis answered")
	}
	if left := tr.Left(ctx); left != 0 {
		t.Errorf("budget left after a call that waited for it all: %s", left)
	}
	if token, ok := tr.TryLoadLease(ctx, "k", time.Second); ok || token != "" {
		t.Errorf("TryLoadLease with the budget spent = %q, %v", token, ok)
	}
	if _, ok := tr.Gens(ctx, []string{"all", "res:items"}); ok {
		t.Error("Gens with the budget spent answered")
	}
	if _, ok := tr.Get(ctx, "k"); ok {
		t.Error("a poll with the budget spent answered")
	}
	tr.SetAndWait(ctx, "k", []byte("v"), time.Minute)

	testkit.Eventually(t, "the GET and the queued SET to reach Redis", func() bool { return len(h.heard()) >= 2 })
	tr.Settle()
	var names []string
	for _, c := range h.heard() {
		names = append(names, c[0])
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"GET", "SET"}) {
		t.Errorf("Redis heard %q, want one GET (the only call made) and the queued write", h.heard())
	}
}

// Without a budget (background work) every call waits up to Timeout; a
// request's context stripped of its budget is such work.
func TestWithoutBudgetEveryCallIsMade(t *testing.T) {
	rdb, h := silentRedis(t)
	// Each call waits its whole Timeout: long enough for it to be written
	// on a busy machine (a call whose deadline passes before it is sent
	// never reaches Redis), and the three are made at once.
	tr := New(rdb, Options{Timeout: 2 * time.Second, Now: newClock().Now})
	defer closeTier(t, tr)
	ctx := WithoutBudget(tr.WithBudget(context.Background()))
	if left := tr.Left(ctx); left != tr.timeout {
		t.Errorf("Left without a budget = %s, want Timeout", left)
	}
	var wg sync.WaitGroup
	wg.Go(func() { tr.Get(ctx, "k") })
	wg.Go(func() { tr.Gens(ctx, []string{"all"}) })
	wg.Go(func() { tr.TryLoadLease(ctx, "k", time.Second) })
	wg.Wait()
	testkit.Eventually(t, "three calls to reach Redis", func() bool { return len(h.heard()) == 3 })
}

// A call takes from the budget what it waited, no more than its share:
// a healthy Redis leaves most of it for the request's other calls, and
// Spend takes a wait the tier did not time.
func TestBudgetTakesWhatACallWaited(t *testing.T) {
	e := newEnv(t)
	ctx := e.t.WithBudget(context.Background())
	if _, ok := e.t.Get(ctx, "k"); !ok {
		t.Fatal("Get on a healthy Redis failed")
	}
	if left := e.t.Left(ctx); left <= 0 || left >= e.t.timeout {
		t.Errorf("left after one call = %s, want some of %s", left, e.t.timeout)
	}
	Spend(ctx, time.Hour)
	if left := e.t.Left(ctx); left != 0 {
		t.Errorf("left after Spend of more than it had = %s, want 0", left)
	}
	if _, ok := e.t.Get(ctx, "k"); ok {
		t.Error("Get answered with the budget spent")
	}
	Spend(context.Background(), time.Hour) // no budget: nothing to take
}
