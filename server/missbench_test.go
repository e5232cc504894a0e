package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prodapi/prodapi/cache"
	"github.com/prodapi/prodapi/enrich"
	"github.com/prodapi/prodapi/server/render"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// BenchmarkListMiss is a 25-item items list miss (BENCHMARKS.md, "A
// list miss") through the real handler (router, token, parameters), the real
// cache (in-process tier) and the real renderer and enricher, over a
// backend that answers at once with documents already decoded: fresh
// copies of the sample newsroom's page and of its enrichment lookups,
// built outside the timed region, as decoding is the backend's cost.
// Every iteration is a miss of the same URL (the clock moves past the
// entry's freshness between iterations), so the body is the same each
// time.
//
//	go test -run '^$' -bench ListMiss -benchmem ./server
//
// cpu-ns/op is the process's CPU time (getrusage, every thread, GC
// included) for the whole request; after-backend-cpu-ns/op is the part
// after the backend returned the page: enrichment shaping and lookups
// (which answer at once), render, JSON, ETag, gzip, the entry, headers,
// the write and the access log. B/op and allocs/op cover the request
// only. gzip-bytes is the body sent to a client that takes gzip.
func BenchmarkListMiss(b *testing.B) {
	sample, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		b.Fatal(err)
	}
	st := &missStore{sample: sample, lookups: map[lookupKey][]*sources.Doc{}}
	e := enrich.New(st, enrich.Options{MediaPrefix: "http://localhost:5500/prodapi/v1/assets"})
	var mu sync.Mutex
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := cache.New(nil, render.New(st, e.Enrich), cache.Options{Now: clock})
	b.Cleanup(func() { c.Close(context.Background()) })
	tok, err := MintToken(testSecret, "bench", sources.AllScopes, 1<<20*time.Hour, now) // the clock moves an hour a request
	if err != nil {
		b.Fatal(err)
	}
	s := New(c, Options{Auth: AuthOptions{Enabled: true, Secret: testSecret}, Now: clock,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), AccessLog: io.Discard})
	h := s.Handler()
	r := httptest.NewRequest(http.MethodGet, "/prodapi/v1/items?max_results=25", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	r.Header.Set("Accept-Encoding", "gzip")
	w := &missWriter{h: http.Header{}}

	// The first request records what the backend answers; later ones
	// replay fresh copies of it.
	st.record = true
	st.next()
	serveMiss(b, h, w, r)
	st.record = false
	body := gunzipBody(b, w.body)
	if n := bytes.Count(body, []byte(`"_links":{"self":{"title":"Item","href":"items/`)); n != 25 {
		b.Fatalf("%d items with links, want 25", n)
	}
	b.Logf("body %d bytes, gzip %d bytes, sha256 %x, etag %s", len(body), len(w.body), sha256.Sum256(body), w.h.Get("Etag"))

	var cpu, after time.Duration
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		st.next()
		mu.Lock()
		now = now.Add(time.Hour) // past the entry's freshness and stale window
		mu.Unlock()
		clear(w.h)
		b.StartTimer()
		c0 := processCPU(b)
		serveMiss(b, h, w, r)
		c1 := processCPU(b)
		cpu += c1 - c0
		after += c1 - st.found
	}
	if got := gunzipBody(b, w.body); !bytes.Equal(got, body) {
		b.Fatal("the body changed between iterations")
	}
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(after)/float64(b.N), "after-backend-cpu-ns/op")
	b.ReportMetric(float64(len(w.body)), "gzip-bytes")
	b.ReportMetric(float64(len(body)), "body-bytes")
}

func serveMiss(b *testing.B, h http.Handler, w *missWriter, r *http.Request) {
	w.status, w.body = 0, nil
	h.ServeHTTP(w, r)
	if w.status != http.StatusOK || w.h.Get("Content-Encoding") != "gzip" || !strings.Contains(w.h.Get("Cache-Status"), "fwd=miss") {
		b.Fatalf("status %d, headers %v: want a gzipped 200 miss", w.status, w.h)
	}
}

func gunzipBody(b *testing.B, z []byte) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		b.Fatal(err)
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	return body
}

// processCPU is this process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	d, err := cpuSoFar()
	if err != nil {
		b.Fatal(err)
	}
	return d
}

func cpuSoFar() (time.Duration, error) {
	var ru syscall.Rusage
	err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), err
}

// missWriter keeps the status, headers and body of one response (the
// body slice as written, not a copy).
type missWriter struct {
	h      http.Header
	status int
	body   []byte
}

func (w *missWriter) Header() http.Header { return w.h }
func (w *missWriter) WriteHeader(s int)   { w.status = s }
func (w *missWriter) Write(p []byte) (int, error) {
	w.body = append(w.body, p...)
	return len(p), nil
}

// missStore is a backend that answers at once: while recording, it asks
// the sample store and keeps its answers; afterwards it returns the
// copies next made of them. found is the process CPU time when Find
// answered.
type missStore struct {
	sample *sandbox.Store
	record bool

	mu      sync.Mutex
	page    *sources.Result
	lookups map[lookupKey][]*sources.Doc
	docs    []*sources.Doc               // this request's page
	answers map[lookupKey][]*sources.Doc // this request's lookups
	found   time.Duration
}

// A lookupKey names a lookup cheaply (the backend answers at once: no
// formatting on the timed path). A page's lookups differ in these.
type lookupKey struct {
	collection, field string
	search            bool
}

func keyOf(l sources.Lookup) lookupKey { return lookupKey{l.Collection, l.Field, l.Search} }

func cloneDocs(docs []*sources.Doc) []*sources.Doc {
	out := make([]*sources.Doc, len(docs))
	for i, d := range docs {
		out[i] = d.Clone()
	}
	return out
}

// next makes the copies the next request gets.
func (s *missStore) next() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.page != nil {
		s.docs = cloneDocs(s.page.Docs)
	}
	s.answers = make(map[lookupKey][]*sources.Doc, len(s.lookups))
	for k, v := range s.lookups {
		s.answers[k] = cloneDocs(v)
	}
}

func (s *missStore) Get(ctx context.Context, res *sources.Resource, id string) (*sources.Doc, error) {
	return nil, fmt.Errorf("missStore: no details: %w", sources.ErrNotFound)
}

func (s *missStore) Find(ctx context.Context, q *sources.Query) (*sources.Result, error) {
	if s.record {
		res, err := s.sample.Find(ctx, q)
		if err != nil {
			return nil, err
		}
		s.page = &sources.Result{Docs: cloneDocs(res.Docs), Total: res.Total, Aggregations: res.Aggregations}
		return res, nil
	}
	s.found, _ = cpuSoFar() // a failure shows as an impossible after-backend time
	return &sources.Result{Docs: s.docs, Total: s.page.Total, Aggregations: s.page.Aggregations}, nil
}

func (s *missStore) Lookup(ctx context.Context, l sources.Lookup) ([]*sources.Doc, error) {
	k := keyOf(l)
	if s.record {
		docs, err := s.sample.Lookup(ctx, l)
		if err != nil {
			return nil, err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, dup := s.lookups[k]; dup {
			return nil, fmt.Errorf("missStore: two lookups %+v on one page", k)
		}
		s.lookups[k] = cloneDocs(docs)
		return docs, nil
	}
	s.mu.Lock()
	docs, ok := s.answers[k]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("missStore: lookup %+v not recorded", k)
	}
	return docs, nil
}
