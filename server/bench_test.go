package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/prodapi/prodapi/cache"
	"github.com/prodapi/prodapi/sources"
)

// discardWriter is a ResponseWriter that keeps nothing and allocates
// nothing itself: what a handler costs, without a network. Reused, its
// header map is cleared between requests, not replaced.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}

// BenchmarkHandler measures the server's own cost of a cache hit (routing,
// request id, access log formatted as in production, auth with a real
// token, parameters, headers) beside a handler that writes the same
// headers and body.
func BenchmarkHandler(b *testing.B) {
	body := []byte(`{"_id":"x"}`)
	rep := &sources.Representation{Status: 200, Body: body, Gzip: body, ETag: `"0123456789abcdef0123456789abcdef"`, Total: -1,
		LastModified: time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC), StoredAt: time.Now(), CacheStatus: "prodapi; hit; ttl=42", Outcome: "hit"}
	tok, _ := MintToken(testSecret, "bench", sources.AllScopes, time.Hour, time.Now())
	target := "/prodapi/v1/items/urn:newsml:riverton.example:2026-11-19T18:05:20.436314:a3a0921f-4393-462e-b5ba-04ffb1315805"
	newReq := func() *http.Request {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		r.Header.Set("Accept-Encoding", "gzip")
		return r
	}
	run := func(b *testing.B, h http.Handler) {
		b.ReportAllocs()
		b.SetParallelism(16) // as many requests in flight as a busy edge has
		b.RunParallel(func(pb *testing.PB) {
			r := newReq()
			for pb.Next() {
				h.ServeHTTP(&discardWriter{h: http.Header{}}, r)
			}
		})
	}
	b.Run("bare", func(b *testing.B) {
		headers := map[string][]string{"Content-Type": {"application/json"}, "Cache-Control": {"private"}, "Vary": {"Accept-Encoding"},
			"Etag": {rep.ETag + "-gzip"}, "Last-Modified": {"Fri, 20 Nov 2026 09:00:00 GMT"}, "Content-Encoding": {"gzip"}, "Age": {"0"},
			"Cache-Status": {rep.CacheStatus}, "X-Request-Id": {"abc"}, "Content-Length": {"11"}}
		run(b, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			for k, v := range headers {
				h[k] = v
			}
			w.WriteHeader(200)
			w.Write(body)
		}))
	})
	// chi alone, routing to a handler that does nothing: the floor of the
	// hit path with the router this service uses.
	b.Run("chi", func(b *testing.B) {
		r := chi.NewRouter()
		r.Use(func(n http.Handler) http.Handler { return n })
		for _, res := range resources() {
			r.Get("/prodapi/v1/"+res.Name+"/{id}", func(w http.ResponseWriter, r *http.Request) { _ = chi.URLParam(r, "id") })
		}
		run(b, r)
	})
	b.Run("hit", func(b *testing.B) {
		logger := slog.New(slog.NewJSONHandler(io.Discard, nil))
		s := New(LoaderFunc(func(context.Context, *sources.Query) (*sources.Representation, error) { return rep, nil }),
			Options{Auth: AuthOptions{Enabled: true, Secret: testSecret}, Logger: logger, AccessLog: io.Discard})
		run(b, s.Handler())
	})
}

// BenchmarkHitAllocs is an in-process cache hit (the real cache's local
// tier) through the whole handler, router included, with a writer and a
// request reused as a server's connection would: allocs/op is the hit
// path's own. Run it with -benchmem.
func BenchmarkHitAllocs(b *testing.B) {
	h, tok := hitHandler(b)
	for _, tc := range []struct{ name, target string }{
		{"item", "/prodapi/v1/items/urn:newsml:riverton.example:2026-11-19T18:05:20.436314:a3a0921f-4393-462e-b5ba-04ffb1315805"},
		{"list25", "/prodapi/v1/items?max_results=25"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, tc.target, nil)
			r.Header.Set("Authorization", tok)
			r.Header.Set("Accept-Encoding", "gzip")
			r.Header.Set("User-Agent", benchUserAgent) // the access line carries it
			w := &discardWriter{h: http.Header{}}
			h.ServeHTTP(w, r) // the miss that fills the cache
			if got := w.h.Get("Cache-Status"); got == "" {
				b.Fatalf("no Cache-Status: %v", w.h)
			}
			b.ReportAllocs()
			for b.Loop() {
				clear(w.h)
				h.ServeHTTP(w, r)
			}
			if got := w.h.Get("Cache-Status"); !strings.Contains(got, "hit") {
				b.Fatalf("Cache-Status %q, want a hit", got)
			}
		})
	}
}

// benchUserAgent is a client's User-Agent of a usual length.
const benchUserAgent = "superdesk-publisher/2.7 (+https://publisher.example/bot) python-requests/2.32.3"

// hitHandler is the server's handler over the real cache (in-process
// tier only, an hour's TTL) and a loader answering a 1.4 KB body, with a
// token that has every scope; edits change the options.
func hitHandler(tb testing.TB, edit ...func(*Options)) (http.Handler, string) {
	body := bytes.Repeat([]byte(`{"_id":"x","headline":"a headline"},`), 40)
	tok, err := MintToken(testSecret, "bench", sources.AllScopes, time.Hour, time.Now())
	if err != nil {
		tb.Fatal(err)
	}
	loader := LoaderFunc(func(_ context.Context, q *sources.Query) (*sources.Representation, error) {
		total := -1
		if !q.IsDetail() {
			total = 25
		}
		return &sources.Representation{Status: 200, Body: body, ETag: `"0123456789abcdef0123456789abcdef"`, Total: total,
			LastModified: time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)}, nil
	})
	c := cache.New(nil, loader, cache.Options{TTL: func(string, bool) time.Duration { return time.Hour }})
	tb.Cleanup(func() { c.Close(context.Background()) })
	opts := Options{Auth: AuthOptions{Enabled: true, Secret: testSecret}, Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), AccessLog: io.Discard}
	for _, e := range edit {
		e(&opts)
	}
	return New(c, opts).Handler(), "Bearer " + tok
}

// BenchmarkForgedAuthorization is what a forged Authorization header
// costs the server to refuse (401), through the whole handler, of each
// shape forgedAuthorization makes: at 64 KiB (refused for its length,
// before any decoding) and just under 8 KiB, the most that is read (its
// payload decoded twice, its signature computed). cpu-ns/op is the
// process's CPU time (getrusage, GC included) per refusal; each must stay
// under a millisecond.
//
//	go test -run '^$' -bench ForgedAuthorization ./server
func BenchmarkForgedAuthorization(b *testing.B) {
	h, _ := hitHandler(b)
	for _, size := range []int{maxAuthorization - 64, 64 << 10} {
		for _, shape := range []string{"junk", "claims", "scope"} {
			b.Run(fmt.Sprintf("%s/%dB", shape, size), func(b *testing.B) {
				r := httptest.NewRequest(http.MethodGet, "/prodapi/v1/items?max_results=25", nil)
				r.Header.Set("Authorization", forgedAuthorization(shape, size))
				w := &missWriter{h: http.Header{}}
				b.ReportAllocs()
				cpu := processCPU(b)
				for b.Loop() {
					clear(w.h)
					w.status, w.body = 0, w.body[:0]
					h.ServeHTTP(w, r)
				}
				b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
				if w.status != http.StatusUnauthorized {
					b.Fatalf("status %d, want 401", w.status)
				}
			})
		}
	}
}
