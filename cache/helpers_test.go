package cache

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/realserver"
	"github.com/prodapi/prodapi/test/testkit"
)

func newClock() *testkit.Clock {
	return testkit.NewClock(time.Date(2024, 1, 15, 12, 0, 0, 0, time.UTC))
}

// A backend is a fake renderer: it answers every query with a body naming
// the query and a version, counts its loads per cache key, and can be
// told to fail, block or answer something else.
type backend struct {
	mu      sync.Mutex
	loads   map[string]int
	version int
	size    int // body size; 0: 2 KiB

	// hook, when set, runs before the answer is built; a non-nil
	// representation or error from it is the answer.
	hook func(ctx context.Context, q *sources.Query) (*sources.Representation, error)
}

func newBackend() *backend { return &backend{loads: map[string]int{}, version: 1} }

func (b *backend) Load(ctx context.Context, q *sources.Query) (*sources.Representation, error) {
	b.mu.Lock()
	b.loads[Key(q)]++
	hook, version, size := b.hook, b.version, b.size
	b.mu.Unlock()
	if hook != nil {
		if rep, err := hook(ctx, q); rep != nil || err != nil {
			return rep, err
		}
	}
	if q.ID == "missing" {
		return &sources.Representation{Status: 404, Body: []byte(`{"_status":"ERR"}`), Total: -1}, nil
	}
	return representation(body(q, version, cmpOr(size, 2048))), nil
}

func cmpOr(a, b int) int {
	if a != 0 {
		return a
	}
	return b
}

// setHook replaces the hook.
func (b *backend) setHook(h func(ctx context.Context, q *sources.Query) (*sources.Representation, error)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hook = h
}

func (b *backend) setVersion(v int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.version = v
}

// count returns the loads of q so far.
func (b *backend) count(q *sources.Query) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.loads[Key(q)]
}

func (b *backend) total() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, v := range b.loads {
		n += v
	}
	return n
}

func body(q *sources.Query, version, size int) []byte {
	b := fmt.Appendf(nil, `{"resource":%q,"id":%q,"page":%d,"v":%d,"pad":"`, q.Resource.Name, q.ID, q.Page, version)
	for len(b) < size-2 {
		b = append(b, "abcdefghij"[len(b)%10])
	}
	return append(b, `"}`...)
}

func representation(body []byte) *sources.Representation {
	sum := sha256.Sum256(body)
	return &sources.Representation{
		Status:       200,
		Body:         body,
		ETag:         `"` + hex.EncodeToString(sum[:8]) + `"`,
		Total:        3,
		LastModified: time.Date(2024, 1, 10, 9, 0, 0, 0, time.UTC),
	}
}

func resource(t testing.TB, name string) *sources.Resource {
	t.Helper()
	r, ok := sources.ResourceByName(name)
	if !ok {
		t.Fatalf("no resource %q", name)
	}
	return r
}

func list(t testing.TB, res string, params ...string) *sources.Query {
	q := &sources.Query{Resource: resource(t, res), Page: 1, MaxResults: 25}
	for i := 0; i+1 < len(params); i += 2 {
		q.Params = append(q.Params, sources.Param{Name: params[i], Value: params[i+1]})
	}
	return q
}

func detail(t testing.TB, res, id string) *sources.Query {
	return &sources.Query{Resource: resource(t, res), ID: id, Page: 1, MaxResults: 25}
}

// plain returns the uncompressed body of rep.
func plain(t testing.TB, rep *sources.Representation) []byte {
	t.Helper()
	if rep.Body != nil {
		return rep.Body
	}
	zr, err := gzip.NewReader(bytes.NewReader(rep.Gzip))
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gzip: %v", err)
	}
	return b
}

// version returns the "v" the body of rep was built with.
func version(t testing.TB, rep *sources.Representation) string {
	t.Helper()
	b := string(plain(t, rep))
	_, rest, ok := strings.Cut(b, `"v":`)
	if !ok {
		t.Fatalf("body without a version: %.60s", b)
	}
	v, _, _ := strings.Cut(rest, ",")
	return v
}

// An env is a cache over a fake backend, with Redis (miniredis) or
// without, and a clock both follow.
type env struct {
	c         *Cache
	be        *backend
	clock     *testkit.Clock
	m         *miniredis.Miniredis // nil without Redis
	rdb       *redis.Client
	realRDB   redis.UniversalClient // on a real redis-server
	metrics   *metrics.Metrics
	opts      Options
	redisOpts redistier.Options
}

type envOption func(*env)

func withoutRedis() envOption { return func(e *env) { e.m = nil } }

func withOptions(f func(*Options)) envOption { return func(e *env) { f(&e.opts) } }

// baseEnv is an env's backend, clock, metrics and options, with opts
// applied, before it has a Redis or a cache.
func baseEnv(opts []envOption) *env {
	e := &env{be: newBackend(), clock: newClock(), metrics: metrics.NewMetrics()}
	e.opts = Options{
		Stale:       time.Minute,
		NotFoundTTL: 5 * time.Second,
		Metrics:     e.metrics,
		Now:         e.clock.Now,
	}
	e.redisOpts = redistier.Options{
		// Generous: on a busy machine a healthy Redis must not look
		// like a miss. (miniredis never hangs; a closed one refuses at
		// once.) Tests of a dead or hung Redis shorten it.
		Timeout: 5 * time.Second,
		Metrics: e.metrics,
		Now:     e.clock.Now,
	}
	for _, o := range opts {
		o(e)
	}
	return e
}

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	m := miniredis.RunT(t)
	e := baseEnv(append([]envOption{func(e *env) { e.m = m }}, opts...))
	if e.m != nil {
		e.rdb = realserver.RedisClient(e.m.Addr())
		t.Cleanup(func() { e.rdb.Close() })
	}
	e.c = e.newCache()
	t.Cleanup(func() { closeCache(t, e.c) })
	return e
}

// newCache returns another cache on the same backend, Redis and clock: a
// second replica, with a Redis tier of its own. The caller closes it
// (closeCache).
func (e *env) newCache() *Cache {
	var rdb redis.UniversalClient
	switch {
	case e.realRDB != nil:
		rdb = e.realRDB
	case e.rdb != nil:
		rdb = e.rdb
	}
	return New(redistier.New(rdb, e.redisOpts), e.be, e.opts)
}

// leaseKey is the key of the load lease of key, as the Redis tier names
// it.
func leaseKey(key string) string { return redistier.Prefix + "lease:" + key }

// breaker is the state of the Redis tier's breaker, as its gauge shows
// it: 0 closed, 0.5 half-open, 1 open.
func (e *env) breaker() float64 {
	return e.metrics.Gauge("prodapi_cache_redis_breaker_state", "").Value()
}

// advance moves the clock and Redis' TTLs on together.
func (e *env) advance(d time.Duration) {
	e.clock.Advance(d)
	if e.m != nil {
		e.m.FastForward(d)
	}
}

// settle waits for background refreshes, then for queued writes, then
// for the breaker to have judged every read.
func (e *env) settle() { settle(e.c) }

// settle is env.settle for any replica.
func settle(c *Cache) {
	c.bg.running.Wait()
	if c.redis != nil {
		c.redis.Settle()
	}
}

func (e *env) load(t testing.TB, q *sources.Query) *sources.Representation {
	t.Helper()
	rep, err := e.c.Load(context.Background(), q)
	if err != nil {
		t.Fatalf("Load(%s): %v", Key(q), err)
	}
	return rep
}

// closeCache closes c, then its Redis tier, as cmd/prodapi does.
func closeCache(t testing.TB, c *Cache) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
	if c.redis == nil {
		return
	}
	if err := c.redis.Close(ctx); err != nil {
		t.Errorf("closing the Redis tier: %v", err)
	}
}
