package cache

import (
	"bytes"
	stdgzip "compress/gzip"
	"context"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prodapi/prodapi/cache/redistier"
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
	e, _ := benchRealEnvURL(b, localBytes, false)
	return e
}

// processCPU is this process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// redisCPU is redis-server's CPU time so far.
func redisCPU(b *testing.B, srv *realserver.Redis) time.Duration {
	d, err := srv.CPU(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// benchRealEnvURL is benchRealEnv, on RESP2 when resp2 is set, with its
// redis-server.
func benchRealEnvURL(b *testing.B, localBytes int64, resp2 bool) (*env, *realserver.Redis) {
	srv := realserver.StartRedis(b, 0)
	url := srv.URL()
	if resp2 {
		url += "?protocol=2"
	}
	rdb, err := redistier.NewClient(url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { rdb.Close() })
	e := &env{be: newBackend(), clock: newClock(), realRDB: rdb}
	e.be.size = benchBody
	e.opts = Options{Stale: time.Minute, LocalBytes: localBytes, Now: e.clock.Now}
	e.redisOpts = redistier.Options{Now: e.clock.Now}
	e.c = e.newCache()
	b.Cleanup(func() { closeCache(b, e.c) })
	return e, srv
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

	// Concurrent Redis hits on 64 keys, as a server sees them, on RESP3
	// (go-redis's default, a push-notification check on every reply) and
	// RESP2. (The Redis tier's own benchmark compares its auto-pipelined
	// reads with plain GETs.)
	for _, proto := range []string{"resp3", "resp2"} {
		b.Run("redis-hits/parallel/"+proto+"/auto-pipeline", func(b *testing.B) {
			e, srv := benchRealEnvURL(b, -1, proto == "resp2")
			// 64 keys: concurrent hits mostly on different keys, so
			// that they do not share one GET.
			var qs []*sources.Query
			for i := range 64 {
				q := list(b, "items", "q", "election"+strconv.Itoa(i))
				e.load(b, q)
				qs = append(qs, q)
			}
			e.settle()
			var worker atomic.Int64
			b.ReportAllocs()
			b.SetParallelism(16)
			cpu0, rcpu0 := processCPU(b), redisCPU(b, srv)
			// A GET that misses the 50 ms Redis timeout on a busy
			// machine becomes a load: counted, not a failure.
			var others atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				i := int(worker.Add(1)) * 7
				for pb.Next() {
					i++
					rep, err := e.c.Load(context.Background(), qs[i%len(qs)])
					if err != nil {
						b.Errorf("Load: %v", err)
						return
					}
					if rep.Outcome != OutcomeHit {
						others.Add(1)
					}
				}
			})
			b.ReportMetric(float64(others.Load())/float64(b.N), "non-hits/op")
			// CPU time holds steady on a busy machine where ns/op
			// does not.
			b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(redisCPU(b, srv)-rcpu0)/float64(b.N), "redis-cpu-ns/op")
		})
	}

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
	e.be.setHook(func(ctx context.Context, _ *sources.Query) (*sources.Representation, error) {
		close(entered)
		<-release
		return nil, nil
	})
	e.load(b, q) // starts the refresh
	<-entered
	b.Cleanup(func() { close(release) })
	loadLoop(b, e, q, OutcomeStale)
}

// BenchmarkCompress is the compression a miss pays before storing a
// list (a real 25-item page, testdata/items_list.json): the cache's
// compressor (klauspost/compress, level 5) beside the standard library's
// level 5 it replaced, with the size each gives.
func BenchmarkCompress(b *testing.B) {
	body, err := os.ReadFile("testdata/items_list.json")
	if err != nil {
		b.Fatal(err)
	}
	run := func(b *testing.B, compress func([]byte) []byte) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		cpu0 := processCPU(b)
		var out []byte
		for b.Loop() {
			out = compress(body)
		}
		b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
		b.ReportMetric(float64(len(out)), "gzip-bytes")
	}
	b.Run("cache", func(b *testing.B) {
		var g gzipPool
		run(b, g.compress)
	})
	b.Run("stdlib-level-5", func(b *testing.B) {
		zw, _ := stdgzip.NewWriterLevel(io.Discard, 5)
		run(b, func(body []byte) []byte {
			var out bytes.Buffer
			zw.Reset(&out)
			zw.Write(body)
			zw.Close()
			return out.Bytes()
		})
	})
}
