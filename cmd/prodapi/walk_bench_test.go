package main

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8"
	kgzip "github.com/klauspost/compress/gzip"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/prodapi/prodapi/enrich"
	"github.com/prodapi/prodapi/server/query"
	"github.com/prodapi/prodapi/server/render"
	"github.com/prodapi/prodapi/sources"
	essrc "github.com/prodapi/prodapi/sources/elastic"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/test/realserver"
)

// walkBenchSmall is the newsroom the walk benchmarks walk first: just
// past the 10000 results offset paging reaches, as TestWalkPast10000Real
// in sources/elastic.
const walkBenchSmall = 12_000

// walkBenchPage is the page size of the walks: max_results' largest.
const walkBenchPage = 500

// walkBenchAheads are the read-aheads (PRODAPI_WALK_READ_AHEAD) the walk
// benchmark serves each newsroom with: PRODAPI_WALK_BENCH_READ_AHEAD,
// comma-separated, 2 (the default) when unset; "2,0" for an A/B in one run.
func walkBenchAheads(b *testing.B) []int {
	v := cmp.Or(os.Getenv("PRODAPI_WALK_BENCH_READ_AHEAD"), "2")
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 || n > 8 {
			b.Fatalf("PRODAPI_WALK_BENCH_READ_AHEAD=%q: want read-aheads from 0 to 8, comma-separated", v)
		}
		out = append(out, n)
	}
	return out
}

// walkBenchSizes are the newsrooms the walk benchmarks walk: 12,000
// items, and PRODAPI_WALK_BENCH_ITEMS (1,000,000 when unset).
func walkBenchSizes(b *testing.B) []int {
	large := 1_000_000
	if v := os.Getenv("PRODAPI_WALK_BENCH_ITEMS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < walkBenchPage {
			b.Fatalf("PRODAPI_WALK_BENCH_ITEMS=%q: want a number of items, at least %d", v, walkBenchPage)
		}
		large = n
	}
	return []int{walkBenchSmall, large}
}

// walkNewsroom is the platform of a newsroom of n items made by
// prodapi-seed -scale n (copies of the sample's items, full size, and
// their planning, events and assignments) in the real Elasticsearch
// 7.10.2 node under the index prefix walk<n>, loaded once per process
// whichever benchmark asks first; MongoDB is a real FerretDB database of
// that name, empty (item lists come from Elasticsearch). It returns the
// variables prodapi reads for it, as pairs. The log has the seed's rate
// for each index, and the load average around it.
func walkNewsroom(b *testing.B, n int) []string {
	b.Helper()
	ferret := servers.FerretDB(b)
	es := servers.Elastic(b)
	index := fmt.Sprintf("walk%d", n)
	env := []string{"MONGO_URI", strings.TrimSuffix(ferret.URI, "/") + "/" + index, "ELASTICSEARCH_URL", es.URL, "ELASTICSEARCH_INDEX", index}
	bin := seedBinary(b)
	return realserver.Shared(b, &servers, "walk-newsroom-"+index, func() ([]string, error) {
		before := loadAverage()
		start := time.Now()
		out, err := runSeed(bin, "elastic", env, "-scale", strconv.Itoa(n), "-progress", "1m")
		if err != nil {
			return nil, fmt.Errorf("prodapi-seed -scale %d: %v\n%s", n, err, out)
		}
		// One line: a benchmark's log keeps its first ten.
		var rates []string
		for line := range strings.Lines(string(out)) {
			var l struct {
				Msg, Index, Duration string
				Documents            int
				DocsPerS             int `json:"docs_per_s"`
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "elastic: index loaded" {
				rates = append(rates, fmt.Sprintf("%s %d in %s (%d/s)", strings.TrimPrefix(l.Index, index+"_"), l.Documents, l.Duration, l.DocsPerS))
			}
		}
		b.Logf("seeded %d items in %s (load average before %s, after %s): %s", n, time.Since(start).Round(time.Millisecond),
			before, loadAverage(), strings.Join(rates, ", "))
		return env, nil
	})
}

// BenchmarkWalkReal measures a client mirroring a whole newsroom through
// prodapi on a real Elasticsearch 7.10.2 node (test/realserver): GET
// /prodapi/v1/items?max_results=500&cursor= and then each page's next
// link until the last, over loopback HTTP with keep-alive, a token and
// gzip, every page a cache miss answered by a search_after query. Two
// newsrooms made by prodapi-seed -scale (walkNewsroom): 12,000 items,
// and PRODAPI_WALK_BENCH_ITEMS (1,000,000 when unset).
//
//	go test -run '^$' -bench BenchmarkWalkReal -benchtime 2x -timeout 4h ./cmd/prodapi
//
// Loading a million items takes minutes and gigabytes of disk, so this
// is a benchmark: make test and CI do not run it.
//
// Each walk must return every item exactly once in ⌈N/500⌉ pages, or the
// benchmark fails. Metrics: docs/s over the walk, pages, the median and
// the slowest page (request, answer and decoding), and the mean page
// over the walk's first and its last tenth, ms/page-first and
// ms/page-last: a keyset page costs no more however deep it is (those of
// the last walk). go test runs a benchmark once before it runs it
// -benchtime times, so 2x walks each newsroom three times, the first on
// a cold node. Every page is a miss (PRODAPI_CACHE_TTL=1ns, no stale
// window), checked by its Cache-Status. es-cpu-ms/page and
// go-cpu-ms/page are the CPU time a page costs the node and this
// process (prodapi and the client), which a busy machine changes less
// than the times. The log has a line a walk (go test keeps a
// benchmark's first ten): its rate, median and slowest page (and which
// it was), CPU and tenths, and the load average before and after it.
func BenchmarkWalkReal(b *testing.B) {
	tok := benchToken(b)
	esPID := servers.Elastic(b).PID
	// A newsroom is served once per benchmark and read-ahead, however
	// often its sub-benchmark runs.
	type server struct{ n, ahead int }
	served := map[server]*benchServer{}
	walks := map[server]int{} // walks of each so far
	serve := func(sb *testing.B, at server) *benchServer {
		if s := served[at]; s != nil {
			return s
		}
		env := walkNewsroom(sb, at.n)
		// Every page a miss, however often the newsroom is walked: stored,
		// and stale at once.
		vars := map[string]string{"PRODAPI_SANDBOX": "", "PRODAPI_CACHE_TTL": "1ns", "PRODAPI_CACHE_STALE": "0s",
			"PRODAPI_WALK_READ_AHEAD": strconv.Itoa(at.ahead)}
		for i := 0; i+1 < len(env); i += 2 {
			vars[env[i]] = env[i+1]
		}
		s := startBenchServe(sb, b, vars)
		served[at] = s
		return s
	}
	for _, n := range walkBenchSizes(b) {
		for _, ahead := range walkBenchAheads(b) {
			b.Run(fmt.Sprintf("%d/ahead=%d", n, ahead), func(b *testing.B) {
				at := server{n, ahead}
				benchWalk(b, serve(b, at), tok, esPID, n, func() int { walks[at]++; return walks[at] })
			})
		}
	}
}

// benchWalk walks the newsroom of n items s serves b.N times, and
// reports BenchmarkWalkReal's metrics; nextWalk numbers the walks.
func benchWalk(b *testing.B, s *benchServer, tok string, esPID, n int, nextWalk func() int) {
	b.ResetTimer()
	var times []time.Duration
	var esCPU, goCPU time.Duration
	for range b.N {
		es0, go0, before := pidCPU(b, esPID), selfCPU(b), loadAverage()
		started := time.Now()
		times = walkAll(b, s, tok, n)
		walk := nextWalk()
		elapsed := time.Since(started)
		esCPU, goCPU = esCPU+pidCPU(b, esPID)-es0, goCPU+selfCPU(b)-go0
		pages := float64(len(times))
		slowest := slices.Index(times, slices.Max(times))
		b.Logf("walk %d: %d items in %d pages of %d in %s, %.0f docs/s; page median %.1f ms, slowest %.1f ms (page %d); "+
			"CPU per page: node %.1f ms, this process (prodapi and the client) %.1f ms; mean ms/page by tenth of the walk %.1f; "+
			"load average before %s, after %s",
			walk, n, len(times), walkBenchPage, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds(),
			ms(median(times)), ms(times[slowest]), slowest+1, ms(pidCPU(b, esPID)-es0)/pages, ms(selfCPU(b)-go0)/pages,
			tenthMeans(times), before, loadAverage())
	}
	b.StopTimer()
	b.ReportMetric(ms(esCPU)/float64(len(times)*b.N), "es-cpu-ms/page")
	b.ReportMetric(ms(goCPU)/float64(len(times)*b.N), "go-cpu-ms/page")
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "docs/s")
	b.ReportMetric(float64(len(times)), "pages")
	b.ReportMetric(ms(median(times)), "ms/page-median")
	b.ReportMetric(ms(slices.Max(times)), "ms/page-max")
	tenths := tenthMeans(times)
	b.ReportMetric(tenths[0], "ms/page-first")
	b.ReportMetric(tenths[len(tenths)-1], "ms/page-last")
}

// BenchmarkWalkSplitReal walks the newsrooms of BenchmarkWalkReal
// (walkNewsroom: the same node, indexes and page size) through prodapi's
// parts called one after the other, as the renderer calls them on a
// miss, and times each, to tell where a page's time goes:
//
//   - backend: the Elasticsearch adapter's Find, the search_after query
//     (sent, answered by the node, read and decoded into documents);
//   - enrich: enrich.Enricher's Enrich over the page, its lookups
//     (Elasticsearch and the empty FerretDB) and its shaping;
//   - render: the renderer given that page and those links: projection,
//     _links, the next cursor sealed, the JSON encoded and its ETag;
//   - gzip: the body compressed as the cache compresses it
//     (klauspost/compress, level 5).
//
// What BenchmarkWalkReal's pages take beyond the sum is the HTTP server
// and client, the cache, parsing the request and opening its cursor, and
// the client's decoding.
//
//	go test -run '^$' -bench BenchmarkWalkSplitReal -benchtime 2x -timeout 4h ./cmd/prodapi
//
// Metrics: ms per page of each part (the mean over the walk), docs/s
// over their sum, and the CPU a page costs the node and this process
// (the log splits them by part).
func BenchmarkWalkSplitReal(b *testing.B) {
	for _, n := range walkBenchSizes(b) {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			env := walkNewsroom(b, n)
			w := newSplitWalker(b, env)
			b.ResetTimer()
			var split walkSplit
			for i := range b.N {
				before := loadAverage()
				split = w.walk(b, n)
				pages := float64(len(split.backend))
				slowest := slices.Index(split.backend, slices.Max(split.backend))
				b.Logf("split walk %d of %d items, ms per page: backend %.1f, enrich %.1f, render %.1f, gzip %.1f (of %.1f); "+
					"backend page median %.1f, slowest %.1f (page %d); CPU ms per page: backend %.1f here and %.1f in the node, "+
					"enrich %.1f here and %.1f in the node, render %.1f, gzip %.1f; load average before %s, after %s",
					i+1, n, split.mean(split.backend), split.mean(split.enrich), split.mean(split.render), split.mean(split.gzip),
					split.mean(split.sum()), ms(median(split.backend)), ms(split.backend[slowest]), slowest+1,
					ms(split.backendGo)/pages, ms(split.backendES)/pages, ms(split.enrichGo)/pages, ms(split.enrichES)/pages,
					ms(split.renderGo)/pages, ms(split.gzipGo)/pages, before, loadAverage())
			}
			b.StopTimer()
			b.ReportMetric(split.mean(split.backend), "ms/page-backend")
			b.ReportMetric(split.mean(split.enrich), "ms/page-enrich")
			b.ReportMetric(split.mean(split.render), "ms/page-render")
			b.ReportMetric(split.mean(split.gzip), "ms/page-gzip")
			b.ReportMetric(float64(n)/(split.mean(split.sum())*float64(len(split.backend))/1000), "docs/s")
			pages := float64(len(split.backend))
			b.ReportMetric(ms(split.backendES+split.enrichES)/pages, "es-cpu-ms/page")
			b.ReportMetric(ms(split.backendGo+split.enrichGo+split.renderGo+split.gzipGo)/pages, "go-cpu-ms/page")
		})
	}
}

// A splitWalker walks items through prodapi's parts, wired as run wires
// them on the platform.
type splitWalker struct {
	esPID   int
	store   sources.Split
	enrich  *enrich.Enricher
	cursors *query.Cursors
}

func newSplitWalker(b *testing.B, env []string) *splitWalker {
	b.Helper()
	vars := map[string]string{}
	for i := 0; i+1 < len(env); i += 2 {
		vars[env[i]] = env[i+1]
	}
	const timeout = 30 * time.Second
	mc, err := mongo.Connect(mongosrc.ClientOptions(vars["MONGO_URI"], 16, timeout))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { mc.Disconnect(context.Background()) })
	ec, err := elasticsearch.NewClient(essrc.Config(vars["ELASTICSEARCH_URL"], timeout))
	if err != nil {
		b.Fatal(err)
	}
	store := sources.Split{
		Docs:   mongosrc.New(mc.Database(mongosrc.DatabaseName(vars["MONGO_URI"])), mongosrc.Options{Timeout: timeout}),
		Search: essrc.New(ec, essrc.Options{Index: vars["ELASTICSEARCH_INDEX"], Timeout: timeout}),
	}
	cursors, err := query.NewCursors([]byte(devSecret), nil)
	if err != nil {
		b.Fatal(err)
	}
	return &splitWalker{esPID: servers.Elastic(b).PID, store: store, cursors: cursors,
		enrich: enrich.New(store, enrich.Options{MediaPrefix: "http://localhost:5500/prodapi/v1/assets", Timeout: timeout})}
}

// walkSplit holds each part's time, page by page, and the CPU time each
// took, summed over the walk: this process's (go) and, for the parts
// that ask it, the node's (es).
type walkSplit struct {
	backend, enrich, render, gzip            []time.Duration
	backendGo, backendES, enrichGo, enrichES time.Duration
	renderGo, gzipGo                         time.Duration
}

func (s walkSplit) sum() []time.Duration {
	out := make([]time.Duration, len(s.backend))
	for i := range out {
		out[i] = s.backend[i] + s.enrich[i] + s.render[i] + s.gzip[i]
	}
	return out
}

func (walkSplit) mean(d []time.Duration) float64 {
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return ms(sum) / float64(max(len(d), 1))
}

// walk walks the n items, each exactly once, and times the parts.
func (w *splitWalker) walk(b *testing.B, n int) walkSplit {
	b.Helper()
	ctx := b.Context()
	items, _ := sources.ResourceByName("items")
	var split walkSplit
	seen := make(map[string]int, n)
	zw, _ := kgzip.NewWriterLevel(io.Discard, 5)
	for raw := fmt.Sprintf("max_results=%d&cursor=", walkBenchPage); raw != ""; {
		q, err := w.cursors.Parse(items, "", raw)
		if err != nil {
			b.Fatal(err)
		}
		c0, e0, t0 := selfCPU(b), pidCPU(b, w.esPID), time.Now()
		result, err := w.store.Find(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		c1, e1, t1 := selfCPU(b), pidCPU(b, w.esPID), time.Now()
		links, missing, err := w.enrich.Enrich(ctx, items, result.Docs, false)
		if err != nil || len(missing) > 0 {
			b.Fatalf("enrich: %v, missing %v", err, missing)
		}
		c2, e2, t2 := selfCPU(b), pidCPU(b, w.esPID), time.Now()
		rd := render.New(pageReader{result}, func(context.Context, *sources.Resource, []*sources.Doc, bool) ([]*sources.Doc, []string, error) {
			return links, nil, nil
		})
		rep, err := rd.Load(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		c3, t3 := selfCPU(b), time.Now()
		var zipped bytes.Buffer
		zw.Reset(&zipped)
		zw.Write(rep.Body)
		zw.Close()
		c4, t4 := selfCPU(b), time.Now()
		split.backendGo, split.backendES = split.backendGo+c1-c0, split.backendES+e1-e0
		split.enrichGo, split.enrichES = split.enrichGo+c2-c1, split.enrichES+e2-e1
		split.renderGo, split.gzipGo = split.renderGo+c3-c2, split.gzipGo+c4-c3
		split.backend = append(split.backend, t1.Sub(t0))
		split.enrich = append(split.enrich, t2.Sub(t1))
		split.render = append(split.render, t3.Sub(t2))
		split.gzip = append(split.gzip, t4.Sub(t3))

		ids, next, err := walkPage(rep.Body)
		if err != nil {
			b.Fatal(err)
		}
		for _, id := range ids {
			seen[id]++
		}
		if len(split.backend) > n/walkBenchPage+1 {
			b.Fatalf("%d pages and no end", len(split.backend))
		}
		_, raw, _ = strings.Cut(next, "?")
	}
	checkWalked(b, seen, n, len(split.backend))
	return split
}

// pageReader answers a list with the page it holds.
type pageReader struct{ page *sources.Result }

func (r pageReader) Get(context.Context, *sources.Resource, string) (*sources.Doc, error) {
	return nil, sources.ErrNotFound
}

func (r pageReader) Find(context.Context, *sources.Query) (*sources.Result, error) {
	return r.page, nil
}

// walkAll walks the items of s by cursor, checks that it saw each of the
// n items exactly once, and returns the time of each page.
func walkAll(b *testing.B, s *benchServer, tok string, n int) []time.Duration {
	b.Helper()
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
	checkWalked(b, seen, n, len(times))
	return times
}

// checkWalked fails the benchmark unless the walk saw each of the n
// items exactly once, in ⌈n/500⌉ pages.
func checkWalked(b *testing.B, seen map[string]int, n, pages int) {
	b.Helper()
	twice := 0
	for _, c := range seen {
		if c > 1 {
			twice++
		}
	}
	if want := (n + walkBenchPage - 1) / walkBenchPage; len(seen) != n || twice > 0 || pages != want {
		b.Fatalf("%d items in %d pages, %d more than once; want %d in %d", len(seen), pages, twice, n, want)
	}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// median is the middle of times (the upper of the two middles).
func median(times []time.Duration) time.Duration {
	s := slices.Sorted(slices.Values(times))
	return s[len(s)/2]
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

// selfCPU is this process's user and system CPU time so far.
func selfCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// pidCPU is process pid's user and system CPU time so far, from
// /proc/PID/stat (in clock ticks of 10 ms).
func pidCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// The command name, in parentheses, may hold spaces: count fields
	// after it. utime and stime are fields 14 and 15.
	_, rest, _ := bytes.Cut(raw, []byte(") "))
	f := strings.Fields(string(rest))
	if len(f) < 13 {
		b.Fatalf("/proc/%d/stat: %q", pid, raw)
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
