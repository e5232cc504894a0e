package main

import (
	"context"
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prodapi/prodapi/test/realserver"
)

// neverLimited turns the fair share on with limits a benchmark never
// reaches: a billion requests a second per client, a million loads in
// flight. Every check, count, header and flush to the fleet is made;
// nothing is refused.
var neverLimited = map[string]string{"PRODAPI_RATE_LIMIT": "1000000000/s", "PRODAPI_CLIENT_MAX_LOADS": "1048576"}

// limitsOff turns the fair share off.
var limitsOff = map[string]string{"PRODAPI_RATE_LIMIT": "off", "PRODAPI_RATE_LIMIT_ADDR": "off", "PRODAPI_CLIENT_MAX_LOADS": "0"}

// BenchmarkLimiterCPU measures what the fair-share limiter adds to the
// CPU of a cache hit, in process and from Redis: the service as run
// builds it (configuration, the limiter counting through the Redis tier,
// the cache's gate, the server), its handler called directly, with the
// limiter on (neverLimited: one client, whose every request is checked,
// counted, given the headers and flushed to Redis every 100ms) and off,
// each with its own redis-server. Without a network the limiter's share
// is larger than over HTTP. b.N requests go to each, in 20 rounds that
// alternate the two, from 8 goroutines; reported is the process's CPU
// (user and system; redis-server's apart) per request of each, and the
// limiter's cost in percent of the hit: the median of the rounds'.
//
//	go test -run '^$' -bench LimiterCPU -benchtime 200000x -count 5 ./cmd/prodapi
func BenchmarkLimiterCPU(b *testing.B) {
	for _, tc := range []struct {
		name, target string
		vars         map[string]string
	}{
		{"local-item", "", nil},
		{"local-list25", "/prodapi/v1/items?max_results=25", nil},
		{"redis-item", "", map[string]string{"PRODAPI_CACHE_LOCAL_BYTES": "-1"}},
		{"redis-list25", "/prodapi/v1/items?max_results=25", map[string]string{"PRODAPI_CACHE_LOCAL_BYTES": "-1"}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			tok := benchToken(b)
			on, off := maps.Clone(neverLimited), maps.Clone(limitsOff)
			maps.Copy(on, tc.vars)
			maps.Copy(off, tc.vars)
			hOn, hOff := benchHandler(b, on), benchHandler(b, off)
			target := tc.target
			if target == "" {
				target = firstItem(b, hOn, tok)
			}
			for _, h := range []http.Handler{hOn, hOff} { // the misses that fill the caches
				if status := serveOnce(h, target, tok); status != http.StatusOK {
					b.Fatalf("GET %s: %d", target, status)
				}
			}
			// Rounds alternate which goes first; the figure is the median
			// of the rounds' differences, which a burst of the machine's
			// other work in one round does not move.
			const rounds = 20
			var cpuOn, cpuOff time.Duration
			var diffs []float64
			b.ResetTimer()
			for i := range rounds {
				n := b.N/rounds + btoi(i < b.N%rounds)
				if n == 0 {
					continue
				}
				var on, off time.Duration
				if i%2 == 0 {
					on, off = hits(b, hOn, target, tok, n), hits(b, hOff, target, tok, n)
				} else {
					off, on = hits(b, hOff, target, tok, n), hits(b, hOn, target, tok, n)
				}
				cpuOn, cpuOff = cpuOn+on, cpuOff+off
				diffs = append(diffs, 100*float64(on-off)/float64(off))
			}
			slices.Sort(diffs)
			perOn, perOff := float64(cpuOn.Nanoseconds())/float64(b.N), float64(cpuOff.Nanoseconds())/float64(b.N)
			b.ReportMetric(perOn, "on-cpu-ns/op")
			b.ReportMetric(perOff, "off-cpu-ns/op")
			b.ReportMetric(diffs[len(diffs)/2], "limiter-%")
		})
	}
}

// benchHandler is the handler of the service vars configure (on a
// sandbox, with a redis-server of its own), built as run builds it.
func benchHandler(b *testing.B, vars map[string]string) http.Handler {
	b.Helper()
	rs := realserver.StartRedis(b, 0)
	all := map[string]string{"PRODAPI_SANDBOX": "sample", "AUTH_SERVER_SHARED_SECRET": devSecret, "PRODAPI_CACHE_TTL": "1h",
		"PRODAPI_ACCESS_LOG_HITS": "0", "REDIS_URL": rs.URL()}
	maps.Copy(all, vars)
	s := &service{e: env{getenv: func(k string) string { return all[k] }, stdout: io.Discard, stderr: io.Discard}}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if s.cache != nil {
			s.cache.Close(ctx)
			s.changes.Close(ctx)
			s.tier.Close(ctx)
		}
		s.close()
	})
	if err := s.open(context.Background(), []string{"-addr", "127.0.0.1:0"}); err != nil {
		b.Fatal(err)
	}
	return s.srv.Handler()
}

// firstItem is the path of the first item of the newsroom.
func firstItem(b *testing.B, h http.Handler, tok string) string {
	b.Helper()
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, "/prodapi/v1/items?max_results=1", nil)
	r.Header.Set("Authorization", tok)
	h.ServeHTTP(w, r)
	var page struct {
		Items []struct {
			ID string `json:"_id"`
		} `json:"_items"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil || len(page.Items) == 0 {
		b.Fatalf("no item: %v %s", err, w.Body)
	}
	return "/prodapi/v1/items/" + page.Items[0].ID
}

// A sink is a ResponseWriter that keeps the status and nothing else.
type sink struct {
	h      http.Header
	status int
}

func (s *sink) Header() http.Header         { return s.h }
func (s *sink) Write(b []byte) (int, error) { return len(b), nil }
func (s *sink) WriteHeader(status int)      { s.status = status }

func benchRequest(target, tok string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	r.Header.Set("Authorization", tok)
	r.Header.Set("Accept-Encoding", "gzip")
	return r
}

func serveOnce(h http.Handler, target, tok string) int {
	w := &sink{h: http.Header{}}
	h.ServeHTTP(w, benchRequest(target, tok))
	return w.status
}

// hits serves n requests for target from 8 goroutines and returns the
// process's CPU time meanwhile; a status but 200 fails b.
func hits(b *testing.B, h http.Handler, target, tok string, n int) time.Duration {
	const workers = 8
	c0 := processCPU(b)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			r := benchRequest(target, tok)
			out := &sink{h: http.Header{}}
			for range n/workers + btoi(w < n%workers) {
				clear(out.h)
				out.status = 0
				h.ServeHTTP(out, r)
				if out.status != http.StatusOK {
					b.Errorf("GET %s: %d", target, out.status)
					return
				}
			}
		})
	}
	wg.Wait()
	return processCPU(b) - c0
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
