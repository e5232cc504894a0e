package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/sources"
)

// fresh returns q as a request with min_position asks: with Freshness.
func fresh(q *sources.Query, storedAfter time.Time) *sources.Query {
	f := *q
	f.Fresh = &sources.Freshness{StoredAfter: storedAfter}
	return &f
}

// A query with Freshness is never answered from a stale entry, not even
// when the load fails: neither one invalidated since it was stored (it
// predates the position) nor one past its freshness. Without Freshness,
// both are served (stale-if-error).
func TestFreshNeverStale(t *testing.T) {
	for _, tc := range []struct {
		name string
		age  func(e *env, q *sources.Query)
	}{
		{"invalidated", func(e *env, q *sources.Query) {
			if err := e.c.Changed(context.Background(), q.Resource.Name, q.ID); err != nil {
				t.Fatal(err)
			}
		}},
		{"past its freshness", func(e *env, q *sources.Query) { e.advance(DefaultDetailTTL + time.Second) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			q := detail(t, "desks", "d1")
			e.load(t, q)
			e.settle()
			tc.age(e, q)
			e.be.setHook(func(context.Context, *sources.Query) (*sources.Representation, error) {
				return nil, fmt.Errorf("test: %w", sources.ErrUnavailable)
			})
			if rep := e.load(t, q); rep.Outcome != OutcomeStale {
				t.Errorf("without Freshness: %s, want the stale entry", rep.Outcome)
			}
			e.settle()
			rep, err := e.c.Load(context.Background(), fresh(q, time.Time{}))
			if !errors.Is(err, sources.ErrUnavailable) {
				t.Errorf("with Freshness: %v, %v; want the load's failure", rep, err)
			}
		})
	}
}

// A query with Freshness joins no load begun before it: one that started
// before an invalidation may hold what it invalidated. It loads anew,
// while the earlier load goes on for those that waited for it.
func TestFreshJoinsNoEarlierLoad(t *testing.T) {
	e := newEnv(t)
	q := detail(t, "desks", "d1")
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	var once sync.Once
	e.be.setHook(func(ctx context.Context, _ *sources.Query) (*sources.Representation, error) {
		first := false
		once.Do(func() { first = true })
		if first {
			started <- struct{}{}
			<-release
			return representation(body(q, 1, 100)), nil
		}
		return nil, nil // the backend's version: 2 by then
	})
	old := make(chan *sources.Representation, 1)
	go func() { // ends once release is closed
		rep, err := e.c.Load(context.Background(), q)
		if err != nil {
			t.Error(err)
		}
		old <- rep
	}()
	<-started
	e.be.setVersion(2)
	if err := e.c.Changed(context.Background(), "desks", "d1"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := e.c.Load(ctx, fresh(q, time.Time{}))
	if err != nil {
		t.Fatalf("with Freshness, beside a load begun before the invalidation: %v", err)
	}
	if v := version(t, rep); v != "2" {
		t.Errorf("with Freshness: version %s, want 2", v)
	}
	close(release)
	if v := version(t, <-old); v != "1" {
		t.Errorf("the earlier load: version %s, want 1", v)
	}
}

// Freshness.StoredAfter keeps out entries stored before it, fresh and
// current as they are (a search list loaded before the index showed the
// change); later ones answer.
func TestFreshStoredAfter(t *testing.T) {
	e := newEnv(t)
	q := list(t, "items")
	stored := e.clock.Now()
	e.load(t, q)
	e.settle()
	e.advance(time.Second)
	if rep := e.load(t, fresh(q, stored)); rep.Outcome != OutcomeHit || e.be.count(q) != 1 {
		t.Errorf("stored at StoredAfter: %s after %d loads, want a hit", rep.Outcome, e.be.count(q))
	}
	rep := e.load(t, fresh(q, stored.Add(time.Millisecond)))
	if rep.Outcome != OutcomeMiss || e.be.count(q) != 2 {
		t.Errorf("stored before StoredAfter: %s after %d loads, want a load", rep.Outcome, e.be.count(q))
	}
	e.settle()
	if rep := e.load(t, q); rep.Outcome != OutcomeHit || e.be.count(q) != 2 {
		t.Errorf("then, without Freshness: %s after %d loads, want the new entry", rep.Outcome, e.be.count(q))
	}
}

// batchBackend is a backend that loads details in batches too, and
// remembers the batches.
type batchBackend struct {
	*backend
	mu      sync.Mutex
	batches [][]string
	fail    error
}

func (b *batchBackend) LoadMany(ctx context.Context, qs []*sources.Query) ([]*sources.Representation, error) {
	b.mu.Lock()
	var ids []string
	for _, q := range qs {
		ids = append(ids, q.Resource.Name+"/"+q.ID)
	}
	b.batches = append(b.batches, ids)
	fail := b.fail
	b.mu.Unlock()
	if fail != nil {
		return nil, fail
	}
	reps := make([]*sources.Representation, len(qs))
	for i, q := range qs {
		rep, err := b.Load(ctx, q)
		if err != nil {
			return nil, err
		}
		reps[i] = rep
	}
	return reps, nil
}

// LoadMany answers hits from the tiers (another replica's, through
// Redis) and loads the misses in one batch, stored under their keys as
// Load stores them; a failed batch fails the call, with no stale entry
// in its place.
func TestLoadMany(t *testing.T) {
	e := newEnv(t)
	bb := &batchBackend{backend: e.be}
	c := New(redistier.New(e.rdb, e.redisOpts), bb, e.opts) // another replica
	t.Cleanup(func() { closeCache(t, c) })
	a, b, gone, d := detail(t, "desks", "a"), detail(t, "users", "b"), detail(t, "desks", "missing"), detail(t, "desks", "d")
	e.load(t, a) // another replica's load, in Redis
	e.settle()
	reps, err := c.LoadMany(context.Background(), []*sources.Query{a, b, gone, d, b})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rep := range reps {
		got = append(got, fmt.Sprintf("%d %s", rep.Status, rep.Outcome))
	}
	if diff := cmp.Diff([]string{"200 hit", "200 miss", "404 miss", "200 miss", "200 miss"}, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([][]string{{"users/b", "desks/missing", "desks/d", "users/b"}}, bb.batches); diff != "" {
		t.Errorf("batches (-want +got):\n%s", diff)
	}
	settle(c)
	for _, q := range []*sources.Query{a, b, gone, d} {
		if rep := e.load(t, q); rep.Outcome != OutcomeHit {
			t.Errorf("%s after LoadMany: %s, want a hit", Key(q), rep.Outcome)
		}
	}

	// Invalidated, and the batch fails: an error, never the old entry.
	c.Changed(context.Background(), "desks", "a")
	bb.fail = fmt.Errorf("test: %w", sources.ErrUnavailable)
	if reps, err := c.LoadMany(context.Background(), []*sources.Query{a}); !errors.Is(err, sources.ErrUnavailable) {
		t.Errorf("a failed batch: %v, %v", reps, err)
	}

	// A loader that does not batch loads each.
	plainLoads := e.be.total()
	if _, err := e.c.LoadMany(context.Background(), []*sources.Query{detail(t, "desks", "x"), detail(t, "desks", "y")}); err != nil {
		t.Fatal(err)
	}
	if n := e.be.total() - plainLoads; n != 2 {
		t.Errorf("%d loads without batching, want 2", n)
	}
	if _, err := c.LoadMany(context.Background(), []*sources.Query{list(t, "desks")}); err == nil {
		t.Error("LoadMany took a list")
	}
	if !slices.Equal(bb.batches[len(bb.batches)-1], []string{"desks/a"}) {
		t.Errorf("last batch %v", bb.batches[len(bb.batches)-1])
	}
}
