package main

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// walkBenchSmall is the newsroom BenchmarkWalkReal walks first: just past
// the 10000 results offset paging reaches, as TestWalkPast10000Real in
// sources/elastic.
const walkBenchSmall = 12_000

// walkBenchPage is the page size of the walks: max_results' largest.
const walkBenchPage = 500

// BenchmarkWalkReal measures a client mirroring a whole newsroom through
// prodapi on a real Elasticsearch 7.10.2 node (test/realserver): GET
// /prodapi/v1/items?max_results=500&cursor= and then each page's next
// link until the last, over loopback HTTP with keep-alive, a token and
// gzip, every page a cache miss answered by a search_after query. Two
// newsrooms, one after the other: 12,000 items, and
// PRODAPI_WALK_BENCH_ITEMS (300,000 when unset).
//
//	go test -run '^$' -bench BenchmarkWalkReal -benchtime 2x -timeout 2h ./cmd/prodapi
//
// The items are as small as TestWalkPast10000Real's (guid, type, state,
// headline and _updated, ten items a second so that the guid breaks
// ties), written as a directory and loaded by prodapi-seed -data into
// the node; MongoDB is a real FerretDB, empty (item lists come from
// Elasticsearch). Loading 300,000 of them takes minutes, so this is a
// benchmark: make test and CI do not run it.
//
// Each walk must return every item exactly once in ⌈N/500⌉ pages, or the
// benchmark fails. Metrics: docs/s over the walk, pages, and the mean
// time of a page (request, answer and decoding) over the walk's first
// and its last tenth, ms/page-first and ms/page-last: a keyset page
// costs no more however deep it is (those of the last walk). go test
// runs a benchmark once before it runs it -benchtime times, so 2x walks
// each newsroom three times, the first on a cold node. Every page is a
// miss (PRODAPI_CACHE_TTL=1ns, no stale window), checked by its
// Cache-Status. The log has each walk's rate and tenths and the load
// average before and after it.
func BenchmarkWalkReal(b *testing.B) {
	large := 300_000
	if v := os.Getenv("PRODAPI_WALK_BENCH_ITEMS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < walkBenchPage {
			b.Fatalf("PRODAPI_WALK_BENCH_ITEMS=%q: want a number of items, at least %d", v, walkBenchPage)
		}
		large = n
	}
	ferret := servers.FerretDB(b)
	es := servers.Elastic(b)
	tok := benchToken(b)
	// A newsroom is loaded and served once per benchmark, however often
	// its sub-benchmark runs.
	served := map[int]*benchServer{}
	walks := map[int]int{} // walks of each newsroom so far
	serve := func(sb *testing.B, n int) *benchServer {
		if s := served[n]; s != nil {
			return s
		}
		index := fmt.Sprintf("walk%d", n)
		env := []string{"MONGO_URI", strings.TrimSuffix(ferret.URI, "/") + "/" + index, "ELASTICSEARCH_URL", es.URL, "ELASTICSEARCH_INDEX", index}
		dir := filepath.Join(b.TempDir(), index)
		writeWalkNewsroom(sb, dir, n)
		seedPlatform(sb, "elastic", env, "-data", dir) // logs the time it took
		// Every page a miss, however often the newsroom is walked: stored,
		// and stale at once.
		vars := map[string]string{"PRODAPI_SANDBOX": "", "PRODAPI_CACHE_TTL": "1ns", "PRODAPI_CACHE_STALE": "0s"}
		for i := 0; i+1 < len(env); i += 2 {
			vars[env[i]] = env[i+1]
		}
		s := startBenchServe(sb, b, vars)
		served[n] = s
		return s
	}
	for _, n := range []int{walkBenchSmall, large} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			s := serve(b, n)
			b.ResetTimer()
			var times []time.Duration
			for range b.N {
				started := time.Now()
				times = walkAll(b, s, tok, n)
				walks[n]++
				b.Logf("walk %d: %d items in %d pages of %d in %s, %.0f docs/s; mean ms/page by tenth of the walk %.1f",
					walks[n], n, len(times), walkBenchPage, time.Since(started).Round(time.Millisecond),
					float64(n)/time.Since(started).Seconds(), tenthMeans(times))
			}
			b.StopTimer()
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "docs/s")
			b.ReportMetric(float64(len(times)), "pages")
			tenths := tenthMeans(times)
			b.ReportMetric(tenths[0], "ms/page-first")
			b.ReportMetric(tenths[len(tenths)-1], "ms/page-last")
		})
	}
}

// writeWalkNewsroom writes a newsroom of n minimal items as a directory
// prodapi-seed -data loads: archive.json alone.
func writeWalkNewsroom(b *testing.B, dir string, n int) {
	b.Helper()
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	items := make([]*sources.Doc, n)
	for i := range items {
		id := fmt.Sprintf("urn:walk:%07d", i)
		items[i] = sources.D("_id", id, "guid", id, "type", "text", "state", "published", "headline", "item "+strconv.Itoa(i),
			"_updated", base.Add(time.Duration(i/10)*time.Second))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "archive.json"), codec.AppendJSON(nil, extendedJSON(items)), 0o644); err != nil {
		b.Fatal(err)
	}
}

// walkAll walks the items of s by cursor, checks that it saw each of the
// n items exactly once, and returns the time of each page.
func walkAll(b *testing.B, s *benchServer, tok string, n int) []time.Duration {
	b.Helper()
	b.Logf("load average before the walk of %d: %s", n, loadAverage())
	seen := make(map[string]int, n)
	var times []time.Duration
	for next := fmt.Sprintf("/prodapi/v1/items?max_results=%d&cursor=", walkBenchPage); next != ""; {
		started := time.Now()
		res := s.get(b, next, tok)
		if res.status != 200 {
			b.Fatalf("%s: %d %.300s", next, res.status, res.body)
		}
		if cs := res.header.Get("Cache-Status"); !strings.Contains(cs, "fwd=miss") {
			b.Fatalf("%s: Cache-Status %q, want a miss", next, cs)
		}
		body := res.body
		if res.header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			if body, err = io.ReadAll(zr); err != nil {
				b.Fatal(err)
			}
		}
		ids, after, err := walkPage(body)
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(started))
		for _, id := range ids {
			seen[id]++
		}
		if len(times) > n/walkBenchPage+1 {
			b.Fatalf("%d pages and no end", len(times))
		}
		next = after
	}
	b.Logf("load average after the walk of %d: %s", n, loadAverage())
	twice := 0
	for _, c := range seen {
		if c > 1 {
			twice++
		}
	}
	if pages := (n + walkBenchPage - 1) / walkBenchPage; len(seen) != n || twice > 0 || len(times) != pages {
		b.Fatalf("%d items in %d pages, %d more than once; want %d in %d", len(seen), len(times), twice, n, pages)
	}
	return times
}

// tenthMeans cuts times into ten runs of pages in walk order (fewer when
// there are fewer than ten pages) and returns the mean of each, in
// milliseconds.
func tenthMeans(times []time.Duration) []float64 {
	parts := min(10, len(times))
	means := make([]float64, parts)
	for p := range parts {
		run := times[p*len(times)/parts : (p+1)*len(times)/parts]
		var sum time.Duration
		for _, d := range run {
			sum += d
		}
		means[p] = float64(sum.Microseconds()) / 1000 / float64(len(run))
	}
	return means
}

// loadAverage is the machine's 1, 5 and 15 minute load averages, or why
// they are unknown.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	f := strings.Fields(string(raw))
	return strings.Join(f[:min(3, len(f))], " ")
}
