package cache

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/realserver"
	"github.com/prodapi/prodapi/test/testkit"
)

// withDocs makes the backend name the documents each answer was built
// from: a detail its own id and planning/p1; a list its resource's a and
// b, and planning/p1 for items.
func withDocs(e *env) {
	e.be.setHook(func(_ context.Context, q *sources.Query) (*sources.Representation, error) {
		e.be.mu.Lock()
		v := e.be.version
		e.be.mu.Unlock()
		rep := representation(body(q, v, 2048))
		if q.IsDetail() {
			rep.Docs = []string{q.Resource.Name + "/" + q.ID, "planning/p1"}
		} else {
			rep.Docs = []string{q.Resource.Name + "/a", q.Resource.Name + "/b"}
			if q.Resource.Name == "items" {
				rep.Docs = append(rep.Docs, "planning/p1")
			}
		}
		return rep, nil
	})
}

// subscribed waits until the replicas counting into e.metrics have
// subscribed n times.
func subscribed(t testing.TB, e *env, n uint64) {
	t.Helper()
	testkit.Eventually(t, "the replicas to subscribe", func() bool {
		return e.metrics.Counter("prodapi_cache_invalidation_subscriptions_total", "").Value() >= n
	})
}

// localHas reports whether c's in-process tier holds a record for q.
func localHas(c *Cache, q *sources.Query) bool {
	_, ok := c.local.items.Load(Key(q))
	return ok
}

func TestTaggedValueRoundTrip(t *testing.T) {
	e := sampleEntry()
	e.tags = []string{"all", "res:items", "doc:items/i1", "doc:planning/p1"}
	e.gens = []uint64{0, 7, genUnknown, 1 << 40}
	key := "prodapi:v1:items:detail:id=i1"
	b := encodeTagged(key, e)
	got, err := decodeTagged(key, b)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.tags, e.tags) || !slices.Equal(got.gens, e.gens) || got.etag != e.etag {
		t.Errorf("round trip: tags %q gens %v", got.tags, got.gens)
	}
	// A tag section cut short is corrupt, never a panic.
	for n := len(tagMagic); n < 60; n++ {
		if _, err := decodeTagged(key, b[:n]); err == nil {
			t.Errorf("a value cut at %d decoded", n)
		}
	}
	// An untagged value (an asset redirect) still decodes.
	e.tags, e.gens = nil, nil
	if got, err := decodeTagged(key, encodeTagged(key, e)); err != nil || got.tags != nil {
		t.Errorf("untagged: %v, tags %q", err, got.tags)
	}
}

// FuzzDecodeTagged: whatever Redis holds, decoding never panics, and a
// value that decodes has a generation per tag and re-encodes to a value
// that decodes to the same entry.
func FuzzDecodeTagged(f *testing.F) {
	e := sampleEntry()
	e.tags = []string{"all", "res:items", "doc:items/i1"}
	e.gens = []uint64{0, 7, genUnknown}
	f.Add(encodeTagged("k", e))
	f.Add([]byte(tagMagic + "\x01\x03all"))
	f.Add([]byte(tagMagic + "\xff\xff\xff\xff\x0f"))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := decodeTagged("k", b)
		if err != nil {
			return
		}
		if len(got.tags) != len(got.gens) {
			t.Fatalf("%d tags, %d generations", len(got.tags), len(got.gens))
		}
		again, err := decodeTagged("k", encodeTagged("k", got))
		if err != nil || !slices.Equal(again.tags, got.tags) || !slices.Equal(again.gens, got.gens) || !bytes.Equal(again.body, got.body) {
			t.Fatalf("re-encoding: %v, tags %q, want %q", err, again.tags, got.tags)
		}
	})
}

func TestChangedObsoletesEveryReplica(t *testing.T) {
	e := newEnv(t, withDocs)
	ctx := context.Background()
	b := e.newCache()
	defer closeCache(t, b)
	i1, i2, items := detail(t, "items", "i1"), detail(t, "items", "i2"), list(t, "items")
	events := list(t, "events")
	for _, c := range []*Cache{e.c, b} {
		for _, q := range []*sources.Query{i1, i2, items, events} {
			if _, err := c.Load(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.settle()
	settle(b)
	subscribed(t, e, 2)
	if !localHas(b, i1) || !localHas(b, items) {
		t.Fatal("replica b holds nothing in process")
	}

	e.be.setVersion(2)
	if err := e.c.Changed(ctx, "items", "i1"); err != nil {
		t.Fatal(err)
	}
	// This replica is fresh when Changed returns; b once the message
	// arrives.
	if v := version(t, e.load(t, i1)); v != "2" {
		t.Errorf("a: i1 v%s after Changed, want 2", v)
	}
	testkit.Eventually(t, "b to drop i1", func() bool { return !localHas(b, i1) })
	testkit.Eventually(t, "b to drop the items list", func() bool { return !localHas(b, items) })
	for _, q := range []*sources.Query{i1, items} {
		rep, err := b.Load(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if v := version(t, rep); v != "2" {
			t.Errorf("b: %s v%s after Changed, want 2", Key(q), v)
		}
	}
	// Other details, and other resources' lists, stay.
	for _, q := range []*sources.Query{i2, events} {
		if rep, _ := b.Load(ctx, q); rep.Outcome != OutcomeHit || version(t, rep) != "1" {
			t.Errorf("b: %s %s v%s, want an untouched hit", Key(q), rep.Outcome, version(t, rep))
		}
	}
	if got := e.metrics.Counter("prodapi_cache_invalidations_applied_total", "").Value(); got < 2 {
		t.Errorf("invalidations applied = %d, want at least 2 (one per replica)", got)
	}
}

func TestPurgeByLinkedDocResourceAndAll(t *testing.T) {
	e := newEnv(t, withDocs)
	ctx := context.Background()
	i1, items, events := detail(t, "items", "i1"), list(t, "items"), list(t, "events")
	load := func() {
		for _, q := range []*sources.Query{i1, items, events} {
			e.load(t, q)
		}
		e.settle()
	}
	// outcomes loads every query through a replica with nothing in
	// process, so that Redis and its generations decide.
	outcomes := func() []string {
		c := e.newCache()
		defer closeCache(t, c)
		var out []string
		for _, q := range []*sources.Query{i1, items, events} {
			rep, err := c.Load(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, rep.Outcome)
			settle(c)
		}
		return out
	}
	load()

	// planning/p1 is linked from i1 and from the items list; the events
	// list does not include it.
	if err := e.c.PurgeDocs(ctx, "planning", "p1"); err != nil {
		t.Fatal(err)
	}
	if localHas(e.c, i1) || localHas(e.c, items) || !localHas(e.c, events) {
		t.Error("PurgeDocs(planning/p1) left the wrong in-process entries")
	}
	if got, want := outcomes(), []string{"miss", "miss", "hit"}; !slices.Equal(got, want) {
		t.Errorf("after PurgeDocs: %v, want %v", got, want)
	}

	load()
	if err := e.c.PurgeResource(ctx, "events"); err != nil {
		t.Fatal(err)
	}
	if got, want := outcomes(), []string{"hit", "hit", "miss"}; !slices.Equal(got, want) {
		t.Errorf("after PurgeResource(events): %v, want %v", got, want)
	}

	load()
	if err := e.c.PurgeAll(ctx); err != nil {
		t.Fatal(err)
	}
	if e.c.local.len() != 0 {
		t.Errorf("PurgeAll left %d in-process entries", e.c.local.len())
	}
	if got, want := outcomes(), []string{"miss", "miss", "miss"}; !slices.Equal(got, want) {
		t.Errorf("after PurgeAll: %v, want %v", got, want)
	}
}

func TestObsoleteEntryServedOnlyWhenTheLoadFails(t *testing.T) {
	e := newEnv(t, withDocs)
	ctx := context.Background()
	q := detail(t, "items", "i1")
	e.load(t, q)
	e.settle()
	if err := e.c.Changed(ctx, "items", "i1"); err != nil {
		t.Fatal(err)
	}
	e.be.setHook(func(context.Context, *sources.Query) (*sources.Representation, error) {
		return nil, sources.ErrUnavailable
	})
	rep := e.load(t, q)
	if rep.Outcome != OutcomeStale || version(t, rep) != "1" {
		t.Errorf("backend down after an invalidation: %s, want the obsolete entry as stale", rep.Outcome)
	}
}

func TestFillFencedByAnInvalidationDuringItsLoad(t *testing.T) {
	for _, redis := range []bool{true, false} {
		opts := []envOption{withDocs}
		if !redis {
			opts = append(opts, withoutRedis())
		}
		e := newEnv(t, opts...)
		ctx := context.Background()
		q := detail(t, "items", "i1")
		entered, release := make(chan struct{}), make(chan struct{})
		e.be.setHook(func(context.Context, *sources.Query) (*sources.Representation, error) {
			close(entered)
			<-release
			rep := representation(body(q, 1, 2048))
			rep.Docs = []string{"items/i1", "planning/p1"}
			return rep, nil
		})
		done := make(chan *sources.Representation)
		go func() {
			rep, err := e.c.Load(ctx, q)
			if err != nil {
				t.Error(err)
			}
			done <- rep
		}()
		<-entered
		// A linked document changes while the load runs: its result is
		// served to the request, and stored nowhere.
		if err := e.c.PurgeDocs(ctx, "planning", "p1"); err != nil {
			t.Fatal(err)
		}
		close(release)
		if rep := <-done; rep.Outcome != OutcomeMiss {
			t.Errorf("redis=%v: outcome %s", redis, rep.Outcome)
		}
		e.settle()
		if localHas(e.c, q) {
			t.Errorf("redis=%v: the fenced load was kept in process", redis)
		}
		if redis && e.m.Exists(Key(q)) {
			t.Errorf("the fenced load was written to Redis")
		}
		if got := e.metrics.Counter("prodapi_cache_fenced_fills_total", "").Value(); got != 1 {
			t.Errorf("redis=%v: fenced fills = %d, want 1", redis, got)
		}
	}
}

func TestInvalidationWithoutRedis(t *testing.T) {
	e := newEnv(t, withDocs, withoutRedis())
	ctx := context.Background()
	q := detail(t, "items", "i1")
	e.load(t, q)
	e.be.setVersion(2)
	if err := e.c.Changed(ctx, "items", "i1"); err != nil {
		t.Fatal(err)
	}
	if v := version(t, e.load(t, q)); v != "2" {
		t.Errorf("v%s after Changed, want 2", v)
	}
}

func TestInvalidationRedisDown(t *testing.T) {
	e := newEnv(t, withDocs)
	q := detail(t, "items", "i1")
	e.load(t, q)
	e.settle()
	e.m.Close()
	err := e.c.Changed(context.Background(), "items", "i1")
	if !errors.Is(err, ErrNotPropagated) {
		t.Errorf("Changed with Redis down: %v, want ErrNotPropagated", err)
	}
	if localHas(e.c, q) {
		t.Error("the local entry survived an invalidation Redis did not take")
	}
}

// Two replicas on one real redis-server: an invalidation reaches the
// other's in-process tier; after a Redis restart each replica subscribes
// again and empties its tier, since it may have missed messages.
func TestRealRedisInvalidationAndRestart(t *testing.T) {
	srv := realserver.StartRedis(t, 0)
	e := realEnv(t, srv, withDocs)
	ctx := context.Background()
	b := e.newCache()
	defer closeCache(t, b)
	q, other := detail(t, "items", "i1"), detail(t, "items", "i2")
	for _, c := range []*Cache{e.c, b} {
		for _, q := range []*sources.Query{q, other} {
			if _, err := c.Load(ctx, q); err != nil {
				t.Fatal(err)
			}
		}
	}
	subscribed(t, e, 2)
	if err := e.c.Changed(ctx, "items", "i1"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "b to drop i1", func() bool { return !localHas(b, q) })
	if !localHas(b, other) {
		t.Error("b dropped i2 too")
	}

	// Restart Redis on the same port: both replicas lose their
	// subscription, and empty their tier when they have it back.
	subs := e.metrics.Counter("prodapi_cache_invalidation_subscriptions_total", "").Value()
	srv.Stop(10 * time.Second)
	realserver.StartRedis(t, srv.Port)
	testkit.Eventually(t, "both replicas to subscribe again", func() bool {
		return e.metrics.Counter("prodapi_cache_invalidation_subscriptions_total", "").Value() >= subs+2
	})
	if localHas(b, other) || localHas(e.c, other) {
		t.Error("an in-process entry survived a lost subscription")
	}
}
