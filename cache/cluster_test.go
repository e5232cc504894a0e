package cache

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/realserver"
)

// Tests against a real Redis Cluster (three masters, one replica each)
// and a real Sentinel set (a master, two replicas, three sentinels),
// through the REDIS_URLs production uses. Each failover test kills a
// master by PID under a steady load and waits for the failover by asking
// the servers, never by sleeping.

// A replica is one prodapi replica: a Cache with its own Redis client,
// on the real clock (the servers expire keys on theirs), with the
// in-process tier off so that every request asks Redis.
type replica struct {
	c       *Cache
	rdb     redis.UniversalClient
	metrics *metrics.Metrics
}

// realTimeout bounds each Redis call of a replica: generous, because a
// call that times out on a busy machine makes a miss, which the tests
// would mistake for a broken shared tier.
const realTimeout = time.Second

func newReplica(t *testing.T, url string, be *backend) *replica {
	t.Helper()
	rdb, err := redistier.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	r := &replica{rdb: rdb, metrics: metrics.NewMetrics()}
	shared := redistier.New(rdb, redistier.Options{Timeout: realTimeout, Metrics: r.metrics})
	r.c = New(shared, be, Options{
		Stale:       time.Minute,
		NotFoundTTL: 5 * time.Second,
		LocalBytes:  -1,
		Metrics:     r.metrics,
	})
	// Registered after the client's cleanup, so it runs first: queued
	// writes drain before the client closes.
	t.Cleanup(func() { closeCache(t, r.c) })
	return r
}

// settle is env.settle for a replica: refreshes, writes, then the
// breaker's judgement of every read.
func (r *replica) settle() { settle(r.c) }

func (r *replica) counter(name string) uint64 { return r.metrics.Counter(name, "").Sum() }

// wantBody is what the backend answers for q.
func wantBody(q *sources.Query) []byte { return body(q, 1, 2048) }

// checkRep reports what is wrong with rep as the answer to q.
func checkRep(q *sources.Query, rep *sources.Representation, err error) error {
	if err != nil {
		return err
	}
	if rep.Status != 200 {
		return fmt.Errorf("%s: status %d", q.ID, rep.Status)
	}
	b := rep.Body
	if b == nil {
		zr, err := gzip.NewReader(bytes.NewReader(rep.Gzip))
		if err != nil {
			return fmt.Errorf("%s: %w", q.ID, err)
		}
		if b, err = io.ReadAll(zr); err != nil {
			return fmt.Errorf("%s: %w", q.ID, err)
		}
	}
	if !bytes.Equal(b, wantBody(q)) {
		return fmt.Errorf("%s: body %.60q, want %.60q", q.ID, b, wantBody(q))
	}
	if rep.ETag != representation(wantBody(q)).ETag {
		return fmt.Errorf("%s: ETag %s", q.ID, rep.ETag)
	}
	return nil
}

// keys returns n detail queries named prefix-0...: n of them spread over
// the whole slot space.
func keys(t testing.TB, prefix string, n int) []*sources.Query {
	qs := make([]*sources.Query, n)
	for i := range qs {
		qs[i] = detail(t, "items", fmt.Sprintf("%s-%d", prefix, i))
	}
	return qs
}

func logVersion(t *testing.T, r *realserver.Redis) {
	t.Helper()
	v, err := r.Version(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("against redis-server %s", v)
}

func TestRealRedisCluster(t *testing.T) {
	cl := realserver.StartRedisCluster(t, 3, 1)
	logVersion(t, cl.Nodes[0])
	ctx := context.Background()
	be := newBackend()
	a, b := newReplica(t, cl.URL(), be), newReplica(t, cl.URL(), be)

	// Keys of every master's slots.
	qs := append(keys(t, "slot", 30), list(t, "items", "q", "election"), list(t, "events"))
	served := map[*realserver.Redis]int{}
	for _, q := range qs {
		m, err := cl.MasterOf(ctx, Key(q))
		if err != nil {
			t.Fatal(err)
		}
		served[m]++
	}
	if len(served) != 3 {
		t.Fatalf("the keys fall on %d masters, want 3", len(served))
	}

	since := time.Now()
	for _, q := range qs {
		rep, err := a.c.Load(ctx, q)
		if err := checkRep(q, rep, err); err != nil {
			t.Fatal(err)
		}
		if rep.Outcome != OutcomeMiss {
			t.Errorf("%s on the first replica: %s, want miss", Key(q), rep.Outcome)
		}
	}
	a.settle()
	checkStored(t, cl.URL(), qs, since)

	// The second replica finds every entry in the cluster.
	for _, q := range qs {
		rep, err := b.c.Load(ctx, q)
		if err := checkRep(q, rep, err); err != nil {
			t.Fatal(err)
		}
		if rep.Outcome != OutcomeHit {
			t.Errorf("%s on the second replica: %s, want a hit from Redis", Key(q), rep.Outcome)
		}
		if n := be.count(q); n != 1 {
			t.Errorf("%s loaded %d times, want 1", Key(q), n)
		}
	}
	for _, r := range []*replica{a, b} {
		if n := r.counter("prodapi_cache_redis_errors_total"); n != 0 {
			t.Errorf("%d Redis errors on a healthy cluster", n)
		}
	}
}

// checkStored reads each entry of qs through a client of its own and
// checks the value (it decodes, under its key, to the backend's answer)
// and its TTL: freshness plus the stale window, less what has passed
// since the write, which was made after since.
func checkStored(t *testing.T, url string, qs []*sources.Query, since time.Time) {
	t.Helper()
	rdb, err := redistier.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), realserver.RedisTimeout)
	defer cancel()
	for _, q := range qs {
		key := Key(q)
		v, err := rdb.Get(ctx, key).Bytes()
		if err != nil {
			t.Errorf("GET %s: %v", key, err)
			continue
		}
		e, err := decodeTagged(key, v)
		if err != nil {
			t.Errorf("%s: %v", key, err)
			continue
		}
		rep := &sources.Representation{Status: e.status, ETag: e.etag}
		if e.gzip {
			rep.Gzip = e.body
		} else {
			rep.Body = e.body
		}
		if err := checkRep(q, rep, nil); err != nil {
			t.Errorf("stored: %v", err)
		}
		want := defaultTTL("items", q.IsDetail()) + time.Minute
		ttl, err := rdb.PTTL(ctx, key).Result()
		if err != nil {
			t.Errorf("PTTL %s: %v", key, err)
			continue
		}
		// PTTL counts whole milliseconds, rounded down.
		if low := want - time.Since(since) - time.Millisecond; ttl > want || ttl <= low {
			t.Errorf("%s: PTTL %s, want within (%s, %s]", key, ttl, low, want)
		}
		if e.fresh != defaultTTL("items", q.IsDetail()) || e.stale != time.Minute {
			t.Errorf("%s: stored freshness %s and stale window %s", key, e.fresh, e.stale)
		}
	}
}

// A load drives one replica from several goroutines over a set of keys,
// checking every answer. Once stopped (the failover is done) it goes on
// until loadAfter of its requests have been hits, which with the
// in-process tier off come from Redis: a load measured in requests, not
// in time, that only ends once the replica uses Redis again.
type load struct {
	requests  atomic.Int64
	hitsAfter atomic.Int64 // hits after stop
	mu        sync.Mutex
	failures  []string
	wg        sync.WaitGroup
	started   chan struct{} // closed once loadWarm requests have been made
	stop      chan struct{}
	deadline  atomic.Pointer[time.Time] // set at stop: a bound, not a measurement
}

const (
	loadWorkers = 4
	loadWarm    = 200  // requests before the kill
	loadAfter   = 1000 // hits from Redis after the failover
)

func startLoad(r *replica, qs []*sources.Query) *load {
	l := &load{started: make(chan struct{}), stop: make(chan struct{})}
	var once sync.Once
	for w := range loadWorkers {
		l.wg.Add(1)
		// Ends once stopped and loadAfter hits have been counted, or
		// RedisTimeout after the stop.
		go func() {
			defer l.wg.Done()
			stopped := false
			for i := w; ; i++ {
				if !stopped {
					select {
					case <-l.stop:
						stopped = true
					default:
					}
				}
				if stopped && (l.hitsAfter.Load() >= loadAfter || time.Now().After(*l.deadline.Load())) {
					return
				}
				q := qs[i%len(qs)]
				rep, err := r.c.Load(context.Background(), q)
				if err := checkRep(q, rep, err); err != nil {
					l.mu.Lock()
					l.failures = append(l.failures, err.Error())
					l.mu.Unlock()
				} else if stopped && rep.Outcome == OutcomeHit {
					l.hitsAfter.Add(1)
				}
				if l.requests.Add(1) == loadWarm {
					once.Do(func() { close(l.started) })
				}
			}
		}()
	}
	return l
}

// finish stops the load, waits for its last requests and reports
// failures.
func (l *load) finish(t *testing.T) {
	t.Helper()
	stopAt := time.Now()
	deadline := stopAt.Add(realserver.RedisTimeout)
	l.deadline.Store(&deadline)
	close(l.stop)
	l.wg.Wait()
	t.Logf("%d requests under load, %d failed, %d hits from Redis after the failover", l.requests.Load(), len(l.failures), l.hitsAfter.Load())
	if len(l.failures) > 0 {
		t.Errorf("%d failed requests, the first: %s", len(l.failures), l.failures[0])
	}
	if n := l.hitsAfter.Load(); n < loadAfter {
		t.Errorf("%d hits from Redis in %s after the failover, want %d: the loaded replica does not use Redis again", n, realserver.RedisTimeout, loadAfter)
	}
}

// untilShared loads rounds of new keys (spread over every slot range)
// through a until b finds every one of a round in Redis: the shared tier
// works for all keys. It returns how many rounds that took.
func untilShared(t *testing.T, a, b *replica, be *backend) int {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(realserver.RedisTimeout)
	delay := 10 * time.Millisecond
	for round := 1; ; round++ {
		qs := keys(t, "probe-"+strconv.Itoa(round), 16)
		for _, q := range qs {
			rep, err := a.c.Load(ctx, q)
			if err := checkRep(q, rep, err); err != nil {
				t.Fatal(err)
			}
		}
		a.settle()
		shared := 0
		for _, q := range qs {
			rep, err := b.c.Load(ctx, q)
			if err := checkRep(q, rep, err); err != nil {
				t.Fatal(err)
			}
			if rep.Outcome == OutcomeHit && be.count(q) == 1 {
				shared++
			}
		}
		if shared == len(qs) {
			return round
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %d rounds in %s, only %d of %d writes of one replica are hits of the other", round, realserver.RedisTimeout, shared, len(qs))
		}
		// Polling a condition: a breaker open in either replica waits
		// out its cool-down, a client learns the new topology.
		time.Sleep(delay)
		delay = min(2*delay, 200*time.Millisecond)
	}
}

// failover runs the scenario both topologies share: entries warm in
// Redis, a steady load on replica a, kill (which kills a master and
// waits for the failover to complete), the load going on for a while,
// then checks that nothing failed, that the shared tier works again and
// that entries written after the failover are right in Redis and through
// a new replica.
func failover(t *testing.T, url string, kill func() error) (after []*sources.Query) {
	t.Helper()
	ctx := context.Background()
	be := newBackend()
	a, b := newReplica(t, url, be), newReplica(t, url, be)

	qs := keys(t, "load", 64)
	for _, q := range qs {
		rep, err := a.c.Load(ctx, q)
		if err := checkRep(q, rep, err); err != nil {
			t.Fatal(err)
		}
	}
	a.settle()
	untilShared(t, a, b, be)

	l := startLoad(a, qs)
	<-l.started
	if err := kill(); err != nil {
		l.finish(t)
		t.Fatal(err)
	}
	l.finish(t)
	errs := a.counter("prodapi_cache_redis_errors_total")
	t.Logf("Redis errors seen by the loaded replica: %d; loads: %d", errs, be.total())
	if errs == 0 {
		t.Errorf("no Redis error under load across the failover: the load never reached the killed master")
	}

	n := untilShared(t, a, b, be)
	t.Logf("the shared tier worked again after %d rounds of probes", n)

	after = keys(t, "after", 48)
	since := time.Now()
	for _, q := range after {
		rep, err := a.c.Load(ctx, q)
		if err := checkRep(q, rep, err); err != nil {
			t.Fatal(err)
		}
		if rep.Outcome != OutcomeMiss {
			t.Errorf("%s: %s, want miss", Key(q), rep.Outcome)
		}
	}
	a.settle()
	checkStored(t, url, after, since)

	// A replica started after the failover reads them from Redis.
	c := newReplica(t, url, be)
	for _, q := range after {
		rep, err := c.c.Load(ctx, q)
		if err := checkRep(q, rep, err); err != nil {
			t.Fatal(err)
		}
		if rep.Outcome != OutcomeHit || be.count(q) != 1 {
			t.Errorf("%s on a new replica: %s after %d loads, want a hit from Redis", Key(q), rep.Outcome, be.count(q))
		}
		want := int64(DefaultDetailTTL / time.Second)
		ttl := cacheStatusTTL(t, rep.CacheStatus)
		if low := want - int64(time.Since(since)/time.Second) - 1; ttl > want || ttl < low {
			t.Errorf("%s: Cache-Status %q, want a ttl within [%d, %d]", Key(q), rep.CacheStatus, low, want)
		}
	}
	if n := c.counter("prodapi_cache_redis_errors_total"); n != 0 {
		t.Errorf("the new replica saw %d Redis errors", n)
	}
	return after
}

func cacheStatusTTL(t *testing.T, s string) int64 {
	t.Helper()
	_, v, ok := strings.Cut(s, "ttl=")
	if !ok {
		t.Fatalf("Cache-Status %q without a ttl", s)
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("Cache-Status %q: %v", s, err)
	}
	return n
}

func TestRealRedisClusterFailover(t *testing.T) {
	cl := realserver.StartRedisCluster(t, 3, 1)
	logVersion(t, cl.Nodes[0])
	ctx := context.Background()
	var dead, promoted *realserver.Redis
	after := failover(t, cl.URL(), func() error {
		var err error
		if dead, err = cl.MasterOf(ctx, Key(detail(t, "items", "load-0"))); err != nil {
			return err
		}
		t.Logf("killing master %s (pid %d)", dead.Addr(), dead.PID())
		dead.Kill()
		if err := cl.WaitFailover(dead); err != nil {
			return err
		}
		promoted, err = cl.MasterOf(ctx, Key(detail(t, "items", "load-0")))
		return err
	})
	// Some entries written after the failover live on the promoted replica.
	on := 0
	for _, q := range after {
		m, err := cl.MasterOf(ctx, Key(q))
		if err != nil {
			t.Fatal(err)
		}
		if m == dead {
			t.Fatalf("%s is served by the dead master", Key(q))
		}
		if m == promoted {
			on++
		}
	}
	if on == 0 {
		t.Errorf("no entry written after the failover is on the promoted replica %s", promoted.Addr())
	}
}

func TestRealRedisSentinelFailover(t *testing.T) {
	s := realserver.StartRedisSentinel(t, 2)
	logVersion(t, s.Servers[0])
	ctx := context.Background()
	failover(t, s.URL(), func() error {
		m, err := s.Master(ctx)
		if err != nil {
			return err
		}
		t.Logf("killing master %s (pid %d)", m.Addr(), m.PID())
		m.Kill()
		next, err := s.WaitFailover(m)
		if err != nil {
			return err
		}
		t.Logf("the sentinels promoted %s", next.Addr())
		return nil
	})
}
