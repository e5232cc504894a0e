package cache

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
)

// seen is what a test checks of a representation.
type seen struct {
	Status      int
	Outcome     string
	CacheStatus string
	Version     string
}

func see(t *testing.T, rep *sources.Representation) seen {
	t.Helper()
	s := seen{Status: rep.Status, Outcome: rep.Outcome, CacheStatus: rep.CacheStatus}
	if rep.Status == 200 {
		s.Version = version(t, rep)
	}
	return s
}

func TestHitAndMiss(t *testing.T) {
	for _, redis := range []bool{true, false} {
		t.Run(fmt.Sprintf("redis=%t", redis), func(t *testing.T) {
			var opts []envOption
			if !redis {
				opts = append(opts, withoutRedis())
			}
			e := newEnv(t, opts...)
			q := list(t, "items")

			got := see(t, e.load(t, q))
			want := seen{200, OutcomeMiss, "prodapi; fwd=miss; fwd-status=200; stored; ttl=10", "1"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("first load (-want +got):\n%s", diff)
			}
			e.settle()
			e.be.setVersion(2)

			got = see(t, e.load(t, q))
			want = seen{200, OutcomeHit, "prodapi; hit; ttl=10", "1"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("second load (-want +got):\n%s", diff)
			}

			// Past the in-process lifetime: from Redis, or still from the
			// in-process tier when there is no Redis.
			e.advance(3 * time.Second)
			got = see(t, e.load(t, q))
			want = seen{200, OutcomeHit, "prodapi; hit; ttl=7", "1"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("after 3s (-want +got):\n%s", diff)
			}
			if got := e.be.count(q); got != 1 {
				t.Errorf("loads = %d, want 1", got)
			}
			if got := e.metrics.Counter("prodapi_cache_requests_total", "").Value("items", OutcomeHit); got != 2 {
				t.Errorf("hits counted = %d, want 2", got)
			}
		})
	}
}

func TestReplicasShareRedis(t *testing.T) {
	e := newEnv(t)
	q := detail(t, "items", "urn:1")
	e.load(t, q)
	e.settle()

	other := e.newCache()
	defer closeCache(t, other)
	rep, err := other.Load(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != OutcomeHit || e.be.count(q) != 1 {
		t.Errorf("second replica: outcome %s after %d loads, want a hit after 1", rep.Outcome, e.be.count(q))
	}
	// A 304 needs only metadata: a Redis hit is never decompressed.
	want := representation(body(q, 1, 2048))
	if rep.Body != nil || rep.Gzip == nil {
		t.Errorf("Redis hit: Body %d bytes, Gzip %d bytes; want only Gzip", len(rep.Body), len(rep.Gzip))
	}
	if rep.ETag != want.ETag || rep.Total != want.Total || !rep.LastModified.Equal(want.LastModified) || !rep.StoredAt.Equal(e.clock.Now()) {
		t.Errorf("Redis hit metadata = %s %d %v %v, want %s %d %v %v", rep.ETag, rep.Total, rep.LastModified, rep.StoredAt,
			want.ETag, want.Total, want.LastModified, e.clock.Now())
	}
	if diff := cmp.Diff(string(want.Body), string(plain(t, rep))); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}
}

func TestSmallBodiesStayUncompressed(t *testing.T) {
	e := newEnv(t)
	e.be.size = 200
	q := detail(t, "desks", "d1")
	first := e.load(t, q)
	if first.Body == nil || first.Gzip != nil {
		t.Errorf("miss: Body %d bytes, Gzip %d bytes; want only Body", len(first.Body), len(first.Gzip))
	}
	e.settle()
	other := e.newCache()
	defer closeCache(t, other)
	rep, err := other.Load(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != OutcomeHit || string(rep.Body) != string(first.Body) || rep.Gzip != nil {
		t.Errorf("Redis hit: %s, Body %q, Gzip %d bytes", rep.Outcome, rep.Body, len(rep.Gzip))
	}
}

func TestFreshLoadHasBothBodies(t *testing.T) {
	e := newEnv(t)
	rep := e.load(t, list(t, "items"))
	if rep.Body == nil || rep.Gzip == nil {
		t.Fatalf("miss: Body %d bytes, Gzip %d bytes; want both", len(rep.Body), len(rep.Gzip))
	}
	rep.Body = nil
	if got, want := string(plain(t, rep)), string(body(list(t, "items"), 1, 2048)); got != want {
		t.Errorf("gzip body differs from the loaded one")
	}
}

func TestTTLPerResource(t *testing.T) {
	ttls := map[string]time.Duration{"items/list": 10 * time.Second, "items/detail": 60 * time.Second, "desks/list": 30 * time.Second}
	e := newEnv(t, withOptions(func(o *Options) {
		o.Stale = 0
		o.TTL = func(res string, detail bool) time.Duration {
			kind := "list"
			if detail {
				kind = "detail"
			}
			return ttls[res+"/"+kind]
		}
	}))
	itemsList, itemsDetail, desksList := list(t, "items"), detail(t, "items", "i1"), list(t, "desks")
	queries := []*sources.Query{itemsList, itemsDetail, desksList}
	for _, q := range queries {
		e.load(t, q)
	}
	e.settle()
	for _, step := range []struct {
		advance time.Duration
		loads   []int // of itemsList, itemsDetail, desksList after loading each again
	}{
		{5 * time.Second, []int{1, 1, 1}},
		{6 * time.Second, []int{2, 1, 1}},  // 11s: the items list expired (10s)
		{20 * time.Second, []int{3, 1, 2}}, // 31s: the items list again (reloaded at 11s), the desks list (30s)
		{30 * time.Second, []int{4, 2, 3}}, // 61s: all three: the detail (60s), the lists reloaded at 31s
	} {
		e.advance(step.advance)
		var got []int
		for _, q := range queries {
			e.load(t, q)
			got = append(got, e.be.count(q))
		}
		e.settle()
		if diff := cmp.Diff(step.loads, got); diff != "" {
			t.Errorf("loads after +%s (-want +got):\n%s", step.advance, diff)
		}
	}
	for _, q := range queries {
		if ttl := e.m.TTL(Key(q)); ttl <= 0 || ttl > ttls[q.Resource.Name+"/"+map[bool]string{true: "detail", false: "list"}[q.IsDetail()]] {
			t.Errorf("Redis TTL of %s = %s", Key(q), ttl)
		}
	}
}

func TestRedisTTLCoversStaleWindow(t *testing.T) {
	e := newEnv(t)
	q := list(t, "items")
	e.load(t, q)
	e.settle()
	if got, want := e.m.TTL(Key(q)), 10*time.Second+time.Minute; got != want {
		t.Errorf("Redis TTL = %s, want %s", got, want)
	}
}

func TestStaleWhileRevalidate(t *testing.T) {
	e := newEnv(t)
	q := list(t, "items")
	e.load(t, q)
	e.settle()
	e.advance(15 * time.Second) // 5s past freshness, within the 1m window

	entered, release := make(chan struct{}), make(chan struct{})
	e.be.setHook(func(ctx context.Context, q *sources.Query) (*sources.Representation, error) {
		close(entered)
		<-release
		return nil, nil
	})
	e.be.setVersion(2)

	got := see(t, e.load(t, q))
	want := seen{200, OutcomeStale, "prodapi; hit; ttl=-5", "1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stale load (-want +got):\n%s", diff)
	}
	<-entered // the refresh is running
	for range 3 {
		got = see(t, e.load(t, q))
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("stale load during the refresh (-want +got):\n%s", diff)
		}
	}
	e.be.setHook(nil)
	close(release)
	e.settle()

	got = see(t, e.load(t, q))
	want = seen{200, OutcomeHit, "prodapi; hit; ttl=10", "2"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after the refresh (-want +got):\n%s", diff)
	}
	if got := e.be.count(q); got != 2 {
		t.Errorf("loads = %d, want 2 (one background refresh)", got)
	}
	if got := e.metrics.Counter("prodapi_cache_refreshes_total", "").Value("ok"); got != 1 {
		t.Errorf("refreshes ok = %d, want 1", got)
	}
}

func TestStaleIfError(t *testing.T) {
	for _, tc := range []struct {
		name   string
		err    error
		status string
	}{
		{"unavailable", fmt.Errorf("mongo: %w", sources.ErrUnavailable), "503"},
		{"timeout", fmt.Errorf("elastic: %w", sources.ErrTimeout), "504"},
		{"partial", fmt.Errorf("elastic: %w", sources.ErrPartial), "503"},
		{"deadline", context.DeadlineExceeded, "504"},
		// A cancelled load reads as its request would have been answered:
		// 499, as everywhere (it read 503 here once).
		{"canceled", fmt.Errorf("elastic: search items: %w", context.Canceled), "499"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			q := list(t, "items")
			good := e.load(t, q)
			e.settle()
			stored, _ := e.m.Get(Key(q))

			e.advance(20 * time.Second)
			e.be.setHook(func(context.Context, *sources.Query) (*sources.Representation, error) { return nil, tc.err })

			// The first stale request starts the refresh, which fails.
			got := see(t, e.load(t, q))
			if diff := cmp.Diff(seen{200, OutcomeStale, "prodapi; hit; ttl=-10", "1"}, got); diff != "" {
				t.Errorf("first stale load (-want +got):\n%s", diff)
			}
			e.settle()

			// Later ones say why they are stale, and do not hammer the
			// backend while it fails.
			rep := e.load(t, q)
			got = see(t, rep)
			want := seen{200, OutcomeStale, "prodapi; fwd=stale; fwd-status=" + tc.status + "; ttl=-10", "1"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("stale after the failure (-want +got):\n%s", diff)
			}
			e.settle()
			if got := e.be.count(q); got != 2 {
				t.Errorf("loads = %d, want 2 (no refresh within the back-off)", got)
			}
			if rep.ETag != good.ETag {
				t.Errorf("ETag %s, want the good entry's %s", rep.ETag, good.ETag)
			}
			if now, _ := e.m.Get(Key(q)); now != stored {
				t.Error("the failure replaced the stored entry")
			}

			// After the back-off another refresh is tried, and succeeds.
			e.advance(time.Second)
			e.be.setHook(nil)
			e.be.setVersion(2)
			e.load(t, q)
			e.settle()
			got = see(t, e.load(t, q))
			if diff := cmp.Diff(seen{200, OutcomeHit, "prodapi; hit; ttl=10", "2"}, got); diff != "" {
				t.Errorf("after recovery (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStaleIfErrorOnTheRequestPath(t *testing.T) {
	// Redis lost the entry (flushed) while this replica still holds a
	// copy: the load runs on the request path, fails, and the copy is
	// served.
	e := newEnv(t)
	q := list(t, "items")
	e.load(t, q)
	e.settle()
	e.m.FlushAll()
	e.advance(3 * time.Second)
	e.be.setHook(func(context.Context, *sources.Query) (*sources.Representation, error) {
		return nil, fmt.Errorf("mongo: %w", sources.ErrUnavailable)
	})
	got := see(t, e.load(t, q))
	want := seen{200, OutcomeStale, "prodapi; fwd=stale; fwd-status=503; ttl=7", "1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// incompleteLoads makes every load of e's backend answer version v
// without what its planning and assignment links lookups would have
// given.
func incompleteLoads(e *env, v int) {
	e.be.setHook(func(_ context.Context, q *sources.Query) (*sources.Representation, error) {
		rep := representation(body(q, v, 2048))
		rep.Missing = []string{"planning", "assignment links"}
		return rep, nil
	})
}

// A response an optional lookup left incomplete is never stored. A
// complete entry within its stale window answers instead; without one,
// it goes out marked: the Cache-Status detail names what is missing
// (the server adds Cache-Control: no-store), and it is counted.
func TestIncompleteIsServedStaleOrMarked(t *testing.T) {
	const detail = `; detail="incomplete: planning, assignment links"`
	partial := func(e *env) uint64 {
		return e.metrics.Counter("prodapi_partial_responses_total", "").Value("items")
	}
	t.Run("no entry", func(t *testing.T) {
		e := newEnv(t)
		incompleteLoads(e, 1)
		q := list(t, "items")
		for i := range 2 {
			rep := e.load(t, q)
			got := see(t, rep)
			if diff := cmp.Diff(seen{200, OutcomeMiss, "prodapi; fwd=miss; fwd-status=200" + detail, "1"}, got); diff != "" {
				t.Errorf("load %d (-want +got):\n%s", i, diff)
			}
			if !slices.Equal(rep.Missing, []string{"planning", "assignment links"}) {
				t.Errorf("Missing = %q", rep.Missing)
			}
		}
		e.settle()
		if keys := e.m.Keys(); len(keys) != 0 || e.c.local.len() != 0 {
			t.Errorf("stored: Redis %q, %d in process", keys, e.c.local.len())
		}
		if got := partial(e); got != 2 {
			t.Errorf("partial responses = %d, want 2", got)
		}
	})
	t.Run("a complete entry on the request path", func(t *testing.T) {
		// Redis lost the entry while this replica still holds a copy:
		// the load runs on the request path and comes back incomplete.
		e := newEnv(t)
		q := list(t, "items")
		good := e.load(t, q)
		e.settle()
		e.m.FlushAll()
		e.advance(3 * time.Second)
		incompleteLoads(e, 2)
		rep := e.load(t, q)
		got := see(t, rep)
		if diff := cmp.Diff(seen{200, OutcomeStale, "prodapi; fwd=stale; fwd-status=200; ttl=7", "1"}, got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if rep.Missing != nil || rep.ETag != good.ETag {
			t.Errorf("Missing %q, ETag %s; want the complete entry's %s", rep.Missing, rep.ETag, good.ETag)
		}
		if got := partial(e); got != 0 {
			t.Errorf("partial responses = %d, want 0", got)
		}
	})
	t.Run("a stale entry refreshed", func(t *testing.T) {
		e := newEnv(t)
		q := list(t, "items")
		e.load(t, q)
		e.settle()
		stored, _ := e.m.Get(Key(q))
		e.advance(20 * time.Second)
		incompleteLoads(e, 2)
		e.load(t, q) // stale; starts the refresh, which comes back incomplete
		e.settle()
		got := see(t, e.load(t, q))
		if diff := cmp.Diff(seen{200, OutcomeStale, "prodapi; fwd=stale; fwd-status=200; ttl=-10", "1"}, got); diff != "" {
			t.Errorf("after the incomplete refresh (-want +got):\n%s", diff)
		}
		if now, _ := e.m.Get(Key(q)); now != stored {
			t.Error("the incomplete refresh replaced the stored entry")
		}
		if got := e.metrics.Counter("prodapi_cache_refreshes_total", "").Value("error"); got != 1 {
			t.Errorf("refreshes error = %d, want 1", got)
		}
	})
	t.Run("bypass", func(t *testing.T) {
		e := newEnv(t, withOptions(func(o *Options) { o.TTL = func(string, bool) time.Duration { return 0 } }))
		incompleteLoads(e, 1)
		if got := e.load(t, list(t, "items")).CacheStatus; got != "prodapi; fwd=bypass"+detail {
			t.Errorf("Cache-Status %q", got)
		}
		if got := partial(e); got != 1 {
			t.Errorf("partial responses = %d, want 1", got)
		}
	})
}

func TestErrorsWithoutAnEntry(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"unavailable", fmt.Errorf("mongo: %w", sources.ErrUnavailable)},
		{"invalid", fmt.Errorf("elastic: %w", sources.ErrInvalid)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.be.setHook(func(context.Context, *sources.Query) (*sources.Representation, error) { return nil, tc.err })
			q := list(t, "items")
			for range 2 {
				_, err := e.c.Load(context.Background(), q)
				if !errors.Is(err, tc.err) {
					t.Errorf("Load error = %v, want %v", err, tc.err)
				}
			}
			e.settle()
			if got := e.be.count(q); got != 2 {
				t.Errorf("loads = %d, want 2 (errors are never cached)", got)
			}
			if keys := e.m.Keys(); len(keys) != 0 {
				t.Errorf("Redis keys %q, want none", keys)
			}
			if got := e.metrics.Counter("prodapi_cache_requests_total", "").Value("items", OutcomeError); got != 2 {
				t.Errorf("errors counted = %d, want 2", got)
			}
		})
	}
}

func TestRefusedQueryIsNotServedStale(t *testing.T) {
	e := newEnv(t)
	q := list(t, "items")
	e.load(t, q)
	e.settle()
	e.m.FlushAll()
	e.advance(3 * time.Second)
	e.be.setHook(func(context.Context, *sources.Query) (*sources.Representation, error) {
		return nil, fmt.Errorf("elastic: %w", sources.ErrInvalid)
	})
	if _, err := e.c.Load(context.Background(), q); !errors.Is(err, sources.ErrInvalid) {
		t.Errorf("Load error = %v, want ErrInvalid", err)
	}
}

func TestNeverStored(t *testing.T) {
	for _, tc := range []struct {
		name string
		rep  *sources.Representation
	}{
		{"incomplete", &sources.Representation{Status: 200, Body: []byte(`{"incomplete":true}`), Missing: []string{"planning"}}},
		// A walk's page read ahead: the fill's fence began after it was read.
		{"read ahead", &sources.Representation{Status: 200, Body: []byte(`{"early":true}`), Early: true}},
		{"status 500", &sources.Representation{Status: 500, Body: []byte(`{}`)}},
		{"status 0", &sources.Representation{Body: []byte(`{}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.be.setHook(func(context.Context, *sources.Query) (*sources.Representation, error) { return tc.rep, nil })
			q := list(t, "items")
			for range 2 {
				rep := e.load(t, q)
				want := fmt.Sprintf("prodapi; fwd=miss; fwd-status=%d", tc.rep.Status)
				if tc.rep.Missing != nil {
					want += `; detail="incomplete: planning"`
				}
				if rep.CacheStatus != want || rep.Outcome != OutcomeMiss {
					t.Errorf("Cache-Status %q, outcome %s; want %q, miss", rep.CacheStatus, rep.Outcome, want)
				}
				if string(rep.Body) != string(tc.rep.Body) {
					t.Errorf("body %q, want %q", rep.Body, tc.rep.Body)
				}
			}
			e.settle()
			if got := e.be.count(q); got != 2 {
				t.Errorf("loads = %d, want 2", got)
			}
			if keys := e.m.Keys(); len(keys) != 0 || e.c.local.len() != 0 {
				t.Errorf("stored: Redis %q, %d in process", keys, e.c.local.len())
			}
		})
	}
}

// A walk's page read ahead is served gzipped when it is large enough to
// be stored so, though it is stored nowhere.
func TestEarlyServedCompressed(t *testing.T) {
	e := newEnv(t)
	body := []byte(`{"_items":[` + strings.Repeat(`{"_id":"a page read ahead"},`, 100) + `{}]}`)
	e.be.setHook(func(context.Context, *sources.Query) (*sources.Representation, error) {
		return &sources.Representation{Status: 200, Body: body, Early: true}, nil
	})
	rep := e.load(t, list(t, "items"))
	if rep.Gzip == nil || string(plain(t, &sources.Representation{Gzip: rep.Gzip})) != string(body) || string(rep.Body) != string(body) {
		t.Errorf("body %d bytes, gzip %d bytes: want both, the same JSON", len(rep.Body), len(rep.Gzip))
	}
	e.settle()
	if keys := e.m.Keys(); len(keys) != 0 || e.c.local.len() != 0 {
		t.Errorf("stored: Redis %q, %d in process", keys, e.c.local.len())
	}
}

func TestNotFoundIsCachedBriefly(t *testing.T) {
	e := newEnv(t)
	q := detail(t, "items", "missing")
	want := []seen{
		{404, OutcomeMiss, "prodapi; fwd=miss; fwd-status=404; stored; ttl=5", ""},
		{404, OutcomeHit, "prodapi; hit; ttl=5", ""},
		{404, OutcomeHit, "prodapi; hit; ttl=1", ""},
		// No stale window for 404s: reloaded at once.
		{404, OutcomeMiss, "prodapi; fwd=miss; fwd-status=404; stored; ttl=5", ""},
	}
	var got []seen
	for _, step := range []time.Duration{0, 0, 4 * time.Second, 2 * time.Second} {
		e.advance(step)
		got = append(got, see(t, e.load(t, q)))
		e.settle()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if got := e.be.count(q); got != 2 {
		t.Errorf("loads = %d, want 2", got)
	}
}

func TestNotFoundWithoutTTLIsNotStored(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.NotFoundTTL = 0 }))
	q := detail(t, "items", "missing")
	e.load(t, q)
	e.load(t, q)
	if got := e.be.count(q); got != 2 {
		t.Errorf("loads = %d, want 2", got)
	}
}

func TestEquivalentQueriesShareAnEntry(t *testing.T) {
	e := newEnv(t)
	a := list(t, "items", "q", "election", "sort", `[["_updated",-1]]`)
	b := list(t, "items", "sort", `[["_updated",-1]]`, "q", "election")
	e.load(t, a)
	if rep := e.load(t, b); rep.Outcome != OutcomeHit {
		t.Errorf("reordered parameters: %s, want hit", rep.Outcome)
	}
	// The same query on another resource is another entry.
	c := list(t, "planning", "q", "election", "sort", `[["_updated",-1]]`)
	if rep := e.load(t, c); rep.Outcome != OutcomeMiss {
		t.Errorf("another resource: %s, want miss", rep.Outcome)
	}
	e.settle()
	if keys := e.m.Keys(); len(keys) != 2 {
		t.Errorf("Redis keys %q, want 2", keys)
	}
	if got := e.be.total(); got != 2 {
		t.Errorf("loads = %d, want 2", got)
	}
}

func TestBypass(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) {
		o.TTL = func(res string, detail bool) time.Duration {
			if res == "users" {
				return 0
			}
			return time.Minute
		}
	}))
	q := list(t, "users")
	for range 2 {
		rep := e.load(t, q)
		if rep.Outcome != OutcomeBypass || rep.CacheStatus != "prodapi; fwd=bypass" {
			t.Errorf("outcome %s, Cache-Status %q", rep.Outcome, rep.CacheStatus)
		}
	}
	if got := e.be.count(q); got != 2 {
		t.Errorf("loads = %d, want 2", got)
	}
}

func TestCacheStatusNeverCarriesTheKey(t *testing.T) {
	e := newEnv(t)
	q := list(t, "items", "q", "secret-ish")
	var statuses []string
	statuses = append(statuses, e.load(t, q).CacheStatus, e.load(t, q).CacheStatus)
	e.advance(15 * time.Second)
	statuses = append(statuses, e.load(t, q).CacheStatus)
	e.settle()
	for _, s := range statuses {
		if strings.Contains(s, "key") || strings.Contains(s, "prodapi:") || strings.Contains(s, "secret") {
			t.Errorf("Cache-Status %q reveals the key", s)
		}
	}
}

func TestPanicInALoadIsAnError(t *testing.T) {
	e := newEnv(t)
	e.be.setHook(func(context.Context, *sources.Query) (*sources.Representation, error) { panic("renderer bug") })
	q := list(t, "items")
	if _, err := e.c.Load(context.Background(), q); !errors.Is(err, errPanic) {
		t.Errorf("Load error = %v, want errPanic", err)
	}
	e.be.setHook(nil)
	if rep := e.load(t, q); rep.Outcome != OutcomeMiss {
		t.Errorf("after the panic: %s, want miss", rep.Outcome)
	}
}

func TestPanicInARefreshIsContained(t *testing.T) {
	e := newEnv(t)
	q := list(t, "items")
	e.load(t, q)
	e.settle()
	e.advance(15 * time.Second)
	e.be.setHook(func(context.Context, *sources.Query) (*sources.Representation, error) { panic("renderer bug") })
	if rep := e.load(t, q); rep.Outcome != OutcomeStale {
		t.Errorf("outcome %s, want stale", rep.Outcome)
	}
	e.settle()
	if got := e.load(t, q).CacheStatus; got != "prodapi; fwd=stale; fwd-status=500; ttl=-5" {
		t.Errorf("Cache-Status %q", got)
	}
}

func TestLoadTimeout(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.LoadTimeout = 10 * time.Millisecond }))
	e.be.setHook(func(ctx context.Context, _ *sources.Query) (*sources.Representation, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	_, err := e.c.Load(context.Background(), list(t, "items"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Load error = %v, want a deadline", err)
	}
}

// joinCtx reports, once, that a request is waiting on it: Load selects
// on Done only once it has joined a flight.
type joinCtx struct {
	context.Context
	once   sync.Once
	joined chan struct{}
}

func (c *joinCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.joined) })
	return c.Context.Done()
}

func TestWaitersHonourTheirOwnContext(t *testing.T) {
	e := newEnv(t)
	q := list(t, "items")
	entered, release := make(chan struct{}), make(chan struct{})
	e.be.setHook(func(ctx context.Context, _ *sources.Query) (*sources.Representation, error) {
		close(entered)
		select {
		case <-release:
		case <-ctx.Done():
			t.Error("the load was cancelled with its first caller")
		}
		return nil, nil
	})

	// The first caller starts the load, then gives up.
	ctxA, cancelA := context.WithCancel(context.Background())
	errA := make(chan error)
	go func() {
		_, err := e.c.Load(ctxA, q)
		errA <- err
	}()
	<-entered
	cancelA()
	if err := <-errA; !errors.Is(err, context.Canceled) {
		t.Errorf("first caller: %v, want canceled", err)
	}

	// A second caller joins the same load, which goes on.
	ctxB := &joinCtx{Context: context.Background(), joined: make(chan struct{})}
	type result struct {
		rep *sources.Representation
		err error
	}
	resB := make(chan result)
	go func() {
		rep, err := e.c.Load(ctxB, q)
		resB <- result{rep, err}
	}()
	<-ctxB.joined
	// A third caller with a deadline that passes gives up alone.
	ctxC, cancelC := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancelC()
	if _, err := e.c.Load(ctxC, q); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("third caller: %v, want a deadline", err)
	}
	close(release)
	r := <-resB
	if r.err != nil {
		t.Fatalf("second caller: %v", r.err)
	}
	if r.rep.Outcome != OutcomeCollapsed || !strings.Contains(r.rep.CacheStatus, "; collapsed") {
		t.Errorf("second caller: %s, %q; want collapsed", r.rep.Outcome, r.rep.CacheStatus)
	}
	if got := e.be.count(q); got != 1 {
		t.Errorf("loads = %d, want 1", got)
	}
}

func TestStampede(t *testing.T) {
	for _, tc := range []struct {
		name        string
		keys, per   int
		opts        []envOption
		wantPerKey  int
		wantOutcome []string
	}{
		{name: "one cold key, redis", keys: 1, per: 500},
		{name: "one cold key, in process", keys: 1, per: 500, opts: []envOption{withoutRedis()}},
		{name: "10 keys x 100, redis", keys: 10, per: 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts...)
			release := make(chan struct{})
			e.be.setHook(func(ctx context.Context, _ *sources.Query) (*sources.Representation, error) {
				<-release // a slow backend
				return nil, nil
			})
			var queries []*sources.Query
			for k := range tc.keys {
				queries = append(queries, detail(t, "items", fmt.Sprintf("item-%d", k)))
			}
			var started, done sync.WaitGroup
			outcomes := make(chan string, tc.keys*tc.per)
			for _, q := range queries {
				for range tc.per {
					started.Add(1)
					done.Add(1)
					go func() {
						defer done.Done()
						started.Done()
						rep, err := e.c.Load(context.Background(), q)
						if err != nil {
							t.Errorf("Load: %v", err)
							return
						}
						outcomes <- rep.Outcome
					}()
				}
			}
			started.Wait()
			close(release)
			done.Wait()
			close(outcomes)

			for _, q := range queries {
				if got := e.be.count(q); got != 1 {
					t.Errorf("loads of %s = %d, want 1", q.ID, got)
				}
			}
			counts := map[string]int{}
			for o := range outcomes {
				counts[o]++
			}
			if counts[OutcomeMiss] != tc.keys || counts[OutcomeMiss]+counts[OutcomeCollapsed]+counts[OutcomeHit] != tc.keys*tc.per {
				t.Errorf("outcomes %v, want %d misses and the rest collapsed or hits", counts, tc.keys)
			}
		})
	}
}

func TestCorruptValuesAreMisses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		spoil func(t *testing.T, e *env, key string)
	}{
		{"garbage", func(t *testing.T, e *env, key string) { e.m.Set(key, "garbage") }},
		{"truncated", func(t *testing.T, e *env, key string) {
			v := mustGet(t, e, key)
			e.m.Set(key, v[:len(v)-1])
		}},
		{"bit flip", func(t *testing.T, e *env, key string) {
			v := []byte(mustGet(t, e, key))
			v[len(v)/2] ^= 1
			e.m.Set(key, string(v))
		}},
		{"another key's value", func(t *testing.T, e *env, key string) {
			other := Key(detail(t, "items", "other"))
			e.m.Set(key, mustGet(t, e, other))
		}},
		{"a list", func(t *testing.T, e *env, key string) {
			e.m.Del(key)
			e.m.Lpush(key, "x")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			q := detail(t, "items", "i1")
			e.load(t, q)
			e.load(t, detail(t, "items", "other"))
			e.settle()
			tc.spoil(t, e, Key(q))

			other := e.newCache() // a replica without the in-process copy
			defer closeCache(t, other)
			rep, err := other.Load(context.Background(), q)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if rep.Outcome != OutcomeMiss {
				t.Errorf("outcome %s, want miss", rep.Outcome)
			}
			settle(other)
			if got := e.metrics.Counter("prodapi_cache_corrupt_values_total", "").Value(); got != 1 {
				t.Errorf("corrupt values counted = %d, want 1", got)
			}
			// Deleted, then replaced by the reload, in that order.
			if _, err := decodeTagged(Key(q), []byte(mustGet(t, e, Key(q)))); err != nil {
				t.Errorf("value after the reload: %v", err)
			}
		})
	}
}

// mustGet returns the value of key in miniredis, failing the test when
// there is none (a write that did not arrive).
func mustGet(t *testing.T, e *env, key string) string {
	t.Helper()
	v, err := e.m.Get(key)
	if err != nil || v == "" {
		t.Fatalf("Redis value of %s: %q, %v", key, v, err)
	}
	return v
}

func TestRedisDown(t *testing.T) {
	e := newEnv(t)
	warm := list(t, "items")
	e.load(t, warm)
	e.settle()
	e.m.Close()

	// Past the in-process lifetime, still fresh: the copy here answers.
	e.advance(3 * time.Second)
	var wg sync.WaitGroup
	for i := range 50 {
		for _, q := range []*sources.Query{warm, detail(t, "items", fmt.Sprintf("cold-%d", i%5))} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := e.c.Load(context.Background(), q); err != nil {
					t.Errorf("Load while Redis is down: %v", err)
				}
			}()
		}
	}
	wg.Wait()
	e.settle()
	if got := e.be.count(warm); got != 1 {
		t.Errorf("loads of the warm key = %d, want 1", got)
	}
	for i := range 5 {
		if got := e.be.count(detail(t, "items", fmt.Sprintf("cold-%d", i))); got != 1 {
			t.Errorf("loads of cold-%d = %d, want 1", i, got)
		}
	}
	if got := e.breaker(); got != 1 {
		t.Errorf("breaker %v, want open (1)", got)
	}
	if got := e.metrics.Counter("prodapi_cache_redis_errors_total", "").Sum(); got == 0 {
		t.Error("no Redis errors counted")
	}

	// Redis comes back: after the cool-down a probe closes the breaker
	// and writes resume.
	if err := e.m.Restart(); err != nil {
		t.Fatal(err)
	}
	untilBreakerCloses(t, e)
	untilWritten(t, e, e.m.Exists)
}

func TestRedisWriteErrorsDoNotStopReads(t *testing.T) {
	e := newEnv(t)
	q := list(t, "items")
	e.load(t, q)
	e.settle()
	// Writes fail with a reply error (as with maxmemory and noeviction);
	// the breaker stays closed.
	e.m.SetError("OOM command not allowed when used memory > 'maxmemory'")
	for i := range 2 * breakerMinCalls {
		e.load(t, detail(t, "items", fmt.Sprintf("i%d", i)))
	}
	e.settle()
	e.m.SetError("")
	if got := e.breaker(); got != 0 {
		t.Errorf("breaker %v, want closed (0)", got)
	}
	if got := e.metrics.Counter("prodapi_cache_redis_errors_total", "").Value("set"); got == 0 {
		t.Error("no write errors counted")
	}
}

func TestCloseDrainsWritesAndStopsRefreshes(t *testing.T) {
	e := newEnv(t)
	stale := list(t, "items")
	e.load(t, stale)
	e.settle()
	e.advance(15 * time.Second)

	// A refresh that would run until its context ends.
	entered := make(chan struct{})
	e.be.setHook(func(ctx context.Context, q *sources.Query) (*sources.Representation, error) {
		if q.ID == "" {
			close(entered)
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return nil, nil
	})
	e.load(t, stale)
	<-entered
	var queries []*sources.Query
	for i := range 100 {
		q := detail(t, "items", fmt.Sprintf("i%d", i))
		queries = append(queries, q)
		e.load(t, q)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The cache, then its Redis tier, as cmd/prodapi closes them: the
	// refresh is cancelled, then the writes drain.
	if err := e.c.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := e.c.redis.Close(ctx); err != nil {
		t.Fatalf("closing the Redis tier: %v", err)
	}
	for _, q := range queries {
		if !e.m.Exists(Key(q)) {
			t.Errorf("%s not written before Close returned", Key(q))
		}
	}
	// Loads after Close still answer, on a live context.
	e.be.setHook(func(ctx context.Context, _ *sources.Query) (*sources.Representation, error) {
		return nil, ctx.Err()
	})
	if rep := e.load(t, detail(t, "items", "late")); rep.Outcome != OutcomeMiss {
		t.Errorf("after Close: %s", rep.Outcome)
	}
}

func TestInProcessTierIsBounded(t *testing.T) {
	e := newEnv(t, withoutRedis(), withOptions(func(o *Options) { o.LocalBytes = 16 << 10 }))
	for i := range 50 {
		e.load(t, detail(t, "items", fmt.Sprintf("i%d", i)))
	}
	if got := e.metrics.Gauge("prodapi_cache_local_bytes", "").Value(); got > 16<<10 || got == 0 {
		t.Errorf("local bytes %v, want within (0, 16 KiB]", got)
	}
	if got := e.metrics.Counter("prodapi_cache_local_evictions_total", "").Value(); got == 0 {
		t.Error("no evictions counted")
	}
}

// Every cache and Redis series whose label values are known at start is
// there at 0 before its first event, so rate() over it has data.
func TestMetricsDeclaredAtZero(t *testing.T) {
	e := newEnv(t)
	var b strings.Builder
	if err := e.metrics.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`prodapi_cache_requests_total{outcome="error",resource="events"} 0`,
		`prodapi_cache_requests_total{outcome="hit",resource="assets"} 0`,
		`prodapi_cache_hits_total{resource="items",tier="local"} 0`,
		`prodapi_cache_hits_total{resource="planning",tier="redis"} 0`,
		`prodapi_cache_refreshes_total{result="error"} 0`,
		`prodapi_cache_changes_total{op="delete"} 0`,
		`prodapi_cache_changes_total{op="flush"} 0`,
		`prodapi_cache_fleet_leases_total{result="timeout"} 0`,
		`prodapi_cache_redis_errors_total{op="get"} 0`,
		`prodapi_cache_redis_errors_total{op="invalidate"} 0`,
		`prodapi_cache_writes_dropped_total{reason="breaker_open"} 0`,
		`prodapi_cache_writes_dropped_total{reason="queue_full"} 0`,
		`prodapi_cache_corrupt_values_total 0`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestMetricsExposition(t *testing.T) {
	e := newEnv(t)
	e.load(t, list(t, "items"))
	e.load(t, list(t, "items"))
	e.settle()
	// A second replica finds the entry in Redis.
	other := e.newCache()
	defer closeCache(t, other)
	if rep, err := other.Load(context.Background(), list(t, "items")); err != nil || rep.Outcome != OutcomeHit {
		t.Fatalf("the second replica's load: %v, %v", rep, err)
	}
	var b strings.Builder
	if err := e.metrics.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`prodapi_cache_requests_total{outcome="miss",resource="items"} 1`,
		`prodapi_cache_requests_total{outcome="hit",resource="items"} 2`,
		`prodapi_cache_hits_total{resource="items",tier="local"} 1`,
		`prodapi_cache_hits_total{resource="items",tier="redis"} 1`,
		`prodapi_cache_redis_breaker_state 0`,
		`# TYPE prodapi_cache_local_bytes gauge`,
		`# TYPE prodapi_cache_local_evictions_total counter`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestCloseGivesUpWithItsContext(t *testing.T) {
	e := newEnv(t)
	q := list(t, "items")
	e.load(t, q)
	e.settle()
	e.advance(15 * time.Second)
	// A refresh stuck in a loader that ignores its context.
	entered, release := make(chan struct{}), make(chan struct{})
	e.be.setHook(func(context.Context, *sources.Query) (*sources.Representation, error) {
		close(entered)
		<-release
		return nil, nil
	})
	e.load(t, q)
	<-entered

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := e.c.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close with a done context = %v, want canceled", err)
	}
	close(release)
	// A second Close waits for the rest and succeeds.
	closeCache(t, e.c)
}

// A Redis hit is read in the request's goroutine, not inside the key's
// flight: while this replica's load of a key hangs, a value another
// replica stored in Redis meanwhile answers at once.
func TestRedisHitDoesNotWaitForAFlight(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.LocalBytes = -1 }))
	q := detail(t, "items", "urn:slow")
	started, release := make(chan struct{}), make(chan struct{})
	var first sync.Once
	e.be.setHook(func(ctx context.Context, _ *sources.Query) (*sources.Representation, error) {
		hang := false
		first.Do(func() { hang = true })
		if hang {
			close(started)
			<-release
		}
		return nil, nil
	})
	done := make(chan error, 1)
	go func() { // ends once release is closed
		_, err := e.c.Load(context.Background(), q)
		done <- err
	}()
	<-started

	// The hung load holds the fleet's lease on the key, so another replica
	// would wait for it: let the lease lapse, as when its holder is too
	// slow, and another replica loads and writes the value to Redis.
	e.m.Del(leaseKey(Key(q)))
	other := e.newCache()
	defer closeCache(t, other)
	if _, err := other.Load(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	settle(other) // its write reached Redis

	rep, err := e.c.Load(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != OutcomeHit {
		t.Errorf("outcome %s, want a Redis hit", rep.Outcome)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// Every kind of Redis call is timed by op: the miss's GET, lease and SET,
// and another replica's GET and generation check of the entry it found.
func TestRedisDurations(t *testing.T) {
	e := newEnv(t)
	q := detail(t, "items", "a")
	e.load(t, q)
	e.settle()
	other := e.newCache()
	defer closeCache(t, other)
	if rep, err := other.Load(context.Background(), q); err != nil || rep.Outcome != OutcomeHit {
		t.Fatalf("the other replica: %v, %v; want a hit from Redis", rep, err)
	}
	h := e.metrics.Histogram("prodapi_cache_redis_duration_seconds", "", nil, "op")
	for op, least := range map[string]uint64{"get": 2, "set": 1, "lease": 1, "gens": 1} {
		if got := h.Count(op); got < least {
			t.Errorf("%s: %d calls timed, want at least %d", op, got, least)
		}
	}
}
