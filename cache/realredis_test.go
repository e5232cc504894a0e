package cache

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/realserver"
	"github.com/prodapi/prodapi/test/testkit"
)

// The real-Redis tests start their own redis-server processes through
// realserver, on free loopback ports, stopped by PID at each test's
// cleanup. Without redis-server they skip loudly; under
// PRODAPI_REQUIRE_REAL (CI) they fail.

func signal(t testing.TB, srv *realserver.Redis, sig syscall.Signal) {
	t.Helper()
	if err := srv.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

// realEnv is an env on a real Redis.
func realEnv(t *testing.T, srv *realserver.Redis, opts ...envOption) *env {
	t.Helper()
	rdb, err := redistier.NewClient(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	e := baseEnv(opts)
	e.realRDB = rdb
	e.c = e.newCache()
	t.Cleanup(func() { closeCache(t, e.c) })
	return e
}

func TestRealRedis(t *testing.T) {
	srv := realserver.StartRedis(t, 0)
	e := realEnv(t, srv)
	ctx := context.Background()
	q := list(t, "items", "q", "election")
	if rep := e.load(t, q); rep.Outcome != OutcomeMiss {
		t.Errorf("first load: %s", rep.Outcome)
	}
	e.settle()

	ttl, err := e.realRDB.PTTL(ctx, Key(q)).Result()
	if err != nil || ttl <= 0 || ttl > 10*time.Second+time.Minute {
		t.Errorf("PTTL = %s, %v; want within (0, 70s]", ttl, err)
	}

	// Another replica: a hit from Redis, gzip and metadata only.
	replica := e.newCache()
	defer closeCache(t, replica)
	rep, err := replica.Load(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Outcome != OutcomeHit || rep.Body != nil || rep.ETag != representation(body(q, 1, 2048)).ETag {
		t.Errorf("replica: %s, Body %d bytes, ETag %s", rep.Outcome, len(rep.Body), rep.ETag)
	}
	if e.be.count(q) != 1 {
		t.Errorf("loads = %d, want 1", e.be.count(q))
	}

	// A foreign value is a miss, deleted and replaced.
	other := list(t, "items", "q", "sport")
	if err := e.realRDB.Set(ctx, Key(other), "not ours", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	if rep := e.load(t, other); rep.Outcome != OutcomeMiss {
		t.Errorf("foreign value: %s, want miss", rep.Outcome)
	}
	e.settle()
	v, err := e.realRDB.Get(ctx, Key(other)).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decodeTagged(Key(other), v); err != nil {
		t.Errorf("value after the reload: %v", err)
	}
}

func TestRealRedisKilled(t *testing.T) {
	srv := realserver.StartRedis(t, 0)
	e := realEnv(t, srv, withShortRedisTimeout())
	var warm []*sources.Query
	for i := range 5 {
		q := detail(t, "items", fmt.Sprintf("warm-%d", i))
		warm = append(warm, q)
		e.load(t, q)
	}
	e.settle()

	srv.Kill()
	e.advance(3 * time.Second) // past the in-process lifetime: every request asks Redis
	loadAll := func(prefix string) {
		t.Helper()
		var wg sync.WaitGroup
		failed := 0
		var mu sync.Mutex
		for i := range 200 {
			q := warm[i%len(warm)]
			if i%2 == 1 {
				q = detail(t, "items", fmt.Sprintf("%s-%d", prefix, i%10))
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := e.c.Load(context.Background(), q); err != nil {
					mu.Lock()
					failed++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if failed != 0 {
			t.Errorf("%d of 200 loads failed with Redis down", failed)
		}
	}
	loadAll("cold")
	e.settle()
	for _, q := range warm {
		if got := e.be.count(q); got != 1 {
			t.Errorf("loads of %s = %d, want 1 (served from the in-process copy)", q.ID, got)
		}
	}
	for i := 1; i < 10; i += 2 {
		if got := e.be.count(detail(t, "items", fmt.Sprintf("cold-%d", i))); got != 1 {
			t.Errorf("loads of cold-%d = %d, want 1", i, got)
		}
	}
	// The breaker judges by the share of failed calls over its window,
	// and some calls made while Redis died are undecided (out of time
	// rather than refused): more loads bring it to open.
	untilBreakerOpens(t, e)

	// Redis comes back empty on the same port: a probe after a cool-down
	// finds it, and the cache uses it again.
	realserver.StartRedis(t, srv.Port)
	untilBreakerCloses(t, e)
	untilWritten(t, e, func(key string) bool { return e.realRDB.Exists(context.Background(), key).Val() == 1 })
}

// withShortRedisTimeout is for tests of a dead or hung Redis, which pay
// the timeout on every request.
func withShortRedisTimeout() envOption {
	return func(e *env) { e.redisOpts.Timeout = 20 * time.Millisecond }
}

// untilWritten loads fresh keys until one's write reaches Redis: after
// Redis came back, go-redis may still refuse to dial for a moment, and a
// write that fails then is dropped, as it should be.
func untilWritten(t *testing.T, e *env, exists func(key string) bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; ; i++ {
		q := detail(t, "items", fmt.Sprintf("after-%d", i))
		e.load(t, q)
		e.settle()
		if exists(Key(q)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write reached Redis after it came back (%d tries)", i+1)
		}
		// The failed writes may have opened the breaker again: let its
		// cool-down pass.
		e.advance(breakerCooldown)
	}
}

// breakerCooldown and breakerMinCalls are the Redis tier's breaker's: how
// long it stays open, and the calls it needs to judge.
const (
	breakerCooldown = 2 * time.Second
	breakerMinCalls = 10
)

// untilBreakerOpens loads new keys, Redis being down, until the breaker
// opens; every load must still answer (from the backend).
func untilBreakerOpens(t *testing.T, e *env) {
	t.Helper()
	for i := 0; e.breaker() != 1; i++ {
		if i == 1000 {
			t.Fatalf("breaker %v after 1000 more loads with Redis down, want open (1)", e.breaker())
		}
		if _, err := e.c.Load(context.Background(), detail(t, "items", fmt.Sprintf("more-%d", i))); err != nil {
			t.Fatalf("a load failed with Redis down: %v", err)
		}
		e.settle()
	}
}

// untilBreakerCloses lets cool-downs pass until a probe closes the
// breaker. go-redis keeps refusing to dial for up to a second after a
// run of dial errors, so the first probes may fail; each costs one
// RedisTimeout at most.
func untilBreakerCloses(t *testing.T, e *env) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; e.breaker() != 0; i++ {
		if time.Now().After(deadline) {
			t.Fatalf("breaker still %v after %d probes", e.breaker(), i)
		}
		e.advance(breakerCooldown)
		e.load(t, detail(t, "items", fmt.Sprintf("probe-%d", i)))
	}
}

func TestRealRedisHung(t *testing.T) {
	srv := realserver.StartRedis(t, 0)
	e := realEnv(t, srv, withShortRedisTimeout())
	q := list(t, "items")
	e.load(t, q)
	e.settle()

	signal(t, srv, syscall.SIGSTOP)
	e.advance(3 * time.Second)
	for i := range 20 {
		rep, err := e.c.Load(context.Background(), detail(t, "items", fmt.Sprintf("i%d", i)))
		if err != nil || rep.Outcome != OutcomeMiss {
			t.Fatalf("load %d with Redis hung: %v", i, err)
		}
		if rep, err := e.c.Load(context.Background(), q); err != nil || rep.Outcome != OutcomeHit {
			t.Fatalf("warm load with Redis hung: %v", err)
		}
	}
	// The timeouts count against Redis once no reply came within
	// sickAfter.
	e.settle()
	// The breaker judges by the share of failed calls over its window,
	// and some calls made while Redis died are undecided (out of time
	// rather than refused): more loads bring it to open.
	untilBreakerOpens(t, e)
	if got := e.metrics.Counter("prodapi_cache_redis_errors_total", "").Sum(); got < breakerMinCalls {
		t.Errorf("Redis errors counted = %d, want at least %d", got, breakerMinCalls)
	}

	signal(t, srv, syscall.SIGCONT)
	untilBreakerCloses(t, e)
	untilWritten(t, e, func(key string) bool { return e.realRDB.Exists(context.Background(), key).Val() == 1 })
}

// A miss on a hung Redis waits one budget: its first call (the GET) takes
// it all, and the calls after it (the load lease, the generations of the
// fence and of the entry's tags) are not made.
func TestRealRedisHungMissWaitsOneBudget(t *testing.T) {
	srv := realserver.StartRedis(t, 0)
	e := realEnv(t, srv, withShortRedisTimeout())
	// Misses on the healthy Redis until one made every kind of call: on a
	// busy machine a first call may spend the short budget on its own.
	calls := e.metrics.Histogram("prodapi_cache_redis_duration_seconds", "", nil, "op")
	warm := 0
	testkit.Eventually(t, "a miss on a healthy Redis making lease and generations calls", func() bool {
		warm++
		e.load(t, detail(t, "items", fmt.Sprintf("warm%d", warm)))
		e.settle()
		return calls.Count("lease") > 0 && calls.Count("gens") > 0
	})
	lease, gens := calls.Count("lease"), calls.Count("gens")

	signal(t, srv, syscall.SIGSTOP)
	t.Cleanup(func() { srv.Signal(syscall.SIGCONT) }) // so that it stops
	if rep := e.load(t, detail(t, "items", "cold")); rep.Outcome != OutcomeMiss {
		t.Errorf("cold key with Redis hung: %s, want miss", rep.Outcome)
	}
	if l, g := calls.Count("lease")-lease, calls.Count("gens")-gens; l != 0 || g != 0 {
		t.Errorf("after the GET spent the budget the miss made %d lease and %d generations calls, want none", l, g)
	}
}
