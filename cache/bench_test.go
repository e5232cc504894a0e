package cache

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prodapi/prodapi/server/render"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/realserver"
)

// Benchmarks of Load's paths, with a 4 KiB JSON body (stored gzipped):
//
//	go test -run '^$' -bench . -benchmem ./cache
//
// hit/local: the in-process tier. hit/redis/*: every request reads Redis
// (the in-process tier off), through miniredis or a real redis-server on
// loopback. miss/*: a new key each time: the fake backend, gzip, the
// entry, the in-process tier and a queued write. stale/*: an expired
// entry while its refresh is under way.

const benchBody = 4 << 10

func benchEnv(b *testing.B, opts ...envOption) *env {
	e := newEnv(b, append(opts, withOptions(func(o *Options) { o.Metrics = nil }))...)
	e.be.size = benchBody
	return e
}

func benchRealEnv(b *testing.B, localBytes int64) *env {
	srv := realserver.StartRedis(b, 0)
	rdb, err := NewRedis(srv.URL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rdb.Close() })
	e := &env{be: newBackend(), clock: newClock()}
	e.be.size = benchBody
	e.opts = Options{Stale: time.Minute, LocalBytes: localBytes, Now: e.clock.Now}
	e.c = New(rdb, e.be, e.opts)
	b.Cleanup(func() { closeCache(b, e.c) })
	return e
}

func loadLoop(b *testing.B, e *env, q *sources.Query, want string) {
	b.Helper()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		rep, err := e.c.Load(ctx, q)
		if err != nil || rep.Outcome != want {
			b.Fatalf("Load: %v, outcome %v; want %s", err, rep, want)
		}
	}
}

func BenchmarkLoad(b *testing.B) {
	b.Run("hit/local", func(b *testing.B) {
		e := benchEnv(b)
		q := list(b, "items", "q", "election")
		e.load(b, q)
		loadLoop(b, e, q, OutcomeHit)
	})

	b.Run("hit/local/parallel", func(b *testing.B) {
		e := benchEnv(b)
		q := list(b, "items", "q", "election")
		e.load(b, q)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if rep, err := e.c.Load(context.Background(), q); err != nil || rep.Outcome != OutcomeHit {
					b.Errorf("Load: %v", err)
					return
				}
			}
		})
	})

	b.Run("hit/redis/miniredis", func(b *testing.B) {
		e := benchEnv(b, withOptions(func(o *Options) { o.LocalBytes = -1 }))
		q := list(b, "items", "q", "election")
		e.load(b, q)
		e.settle()
		loadLoop(b, e, q, OutcomeHit)
	})

	b.Run("hit/redis/real", func(b *testing.B) {
		e := benchRealEnv(b, -1)
		q := list(b, "items", "q", "election")
		e.load(b, q)
		e.settle()
		loadLoop(b, e, q, OutcomeHit)
	})

	b.Run("miss/local", func(b *testing.B) {
		e := benchEnv(b, withoutRedis(), withOptions(func(o *Options) { o.LocalBytes = 8 << 20 }))
		missLoop(b, e)
	})

	b.Run("miss/redis/real", func(b *testing.B) {
		e := benchRealEnv(b, 8<<20)
		missLoop(b, e)
	})

	b.Run("stale/local", func(b *testing.B) {
		e := benchEnv(b)
		q := list(b, "items", "q", "election")
		staleLoop(b, e, q)
	})

	b.Run("stale/redis/miniredis", func(b *testing.B) {
		e := benchEnv(b, withOptions(func(o *Options) { o.LocalBytes = -1 }))
		q := list(b, "items", "q", "election")
		staleLoop(b, e, q)
	})
}

// missLoop loads a new detail each time.
func missLoop(b *testing.B, e *env) {
	ctx := context.Background()
	res := resource(b, "items")
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		q := &sources.Query{Resource: res, ID: "item-" + strconv.Itoa(i), Page: 1, MaxResults: 25}
		rep, err := e.c.Load(ctx, q)
		if err != nil || rep.Outcome != OutcomeMiss {
			b.Fatalf("Load: %v", err)
		}
	}
}

// staleLoop serves an expired entry while its refresh hangs.
func staleLoop(b *testing.B, e *env, q *sources.Query) {
	e.load(b, q)
	e.settle()
	e.advance(15 * time.Second)
	entered, release := make(chan struct{}), make(chan struct{})
	e.be.setHook(func(ctx context.Context, _ *sources.Query) (*render.Representation, error) {
		close(entered)
		<-release
		return nil, nil
	})
	e.load(b, q) // starts the refresh
	<-entered
	b.Cleanup(func() { close(release) })
	loadLoop(b, e, q, OutcomeStale)
}
