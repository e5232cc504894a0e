package mongo_test

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/mongo/internal/bsondoc"
	"github.com/prodapi/prodapi/sources/sourcestest"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// walkBenchPage is the page size of the walk: max_results' largest.
const walkBenchPage = 500

// BenchmarkFerretDBWalk measures a cursor walk of a large collection on
// a real FerretDB (test/realserver), through the adapter:
// PRODAPI_MONGO_WALK_BENCH_ITEMS items (100,000 when unset) in archive,
// copies of the sample newsroom's items at full size, each with an _id
// of its own and an _updated ten to a second, walked by _updated
// descending then _id (the items' sort) in pages of 500. It times the
// walk's first PRODAPI_MONGO_WALK_BENCH_PAGES pages (10 when unset) and
// as many last ones (from the position before them, which the data makes
// known), and checks that each page holds the items it should.
//
//	go test -run '^$' -bench BenchmarkFerretDBWalk -benchtime 1x -timeout 2h ./sources/mongo
//
// Metrics: the mean time of a page (a Find: the find, and on the walk's
// first page the count of the list, which the cursor then carries) over
// the first pages and the last, ms/page-first and ms/page-last, and the
// time of the count alone, ms/count. FerretDB on SQLite uses no index for a walk's ranges
// (nor the old filter), so this is no target: it says what a page costs
// there, and that it costs no more deep in a walk. Loading the items
// takes minutes, and at 100,000 a query minutes more on a busy 2-core
// machine (each gets 30), so this is a benchmark: make test and CI do
// not run it.
func BenchmarkFerretDBWalk(b *testing.B) {
	pages := benchEnvInt(b, "PRODAPI_MONGO_WALK_BENCH_PAGES", 10, 1)
	n := benchEnvInt(b, "PRODAPI_MONGO_WALK_BENCH_ITEMS", 100_000, 2*pages*walkBenchPage)
	client, _ := ferretDB(b)
	db := scratchDatabase(b, client, "prodapi_walk")
	coll := db.Collection("archive")
	loadWalkItems(b, coll, n)
	store := mongosrc.New(db, mongosrc.Options{Timeout: 30 * time.Minute})
	items := res("items")
	var first, last []time.Duration
	var count time.Duration
	for b.Loop() {
		first = walkBenchPages(b, store, items, 0, pages, n)
		last = walkBenchPages(b, store, items, n-pages*walkBenchPage, pages, n)
		started := time.Now()
		if got, err := coll.CountDocuments(b.Context(), bson.D{}); err != nil || got != int64(n) {
			b.Fatalf("count: %d, %v; want %d", got, err, n)
		}
		count = time.Since(started)
	}
	b.ReportMetric(meanMs(first), "ms/page-first")
	b.ReportMetric(meanMs(last), "ms/page-last")
	b.ReportMetric(float64(count.Microseconds())/1000, "ms/count")
	b.Logf("%d items: ms per page, first %d %.0f, last %d %.0f; the count alone %s",
		n, pages, meanMs(first), pages, meanMs(last), count.Round(time.Millisecond))
}

// benchEnvInt reads a whole number of at least least from the variable,
// def when unset.
func benchEnvInt(b *testing.B, name string, def, least int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		b.Fatalf("%s=%q: want a whole number, at least %d", name, v, least)
	}
	return n
}

// The i-th walk item is the sample item i mod their number, with the
// _id walkItemID(i) and the _updated walkItemUpdated(i): the walk's
// order is i's.
func walkItemID(i int) string { return fmt.Sprintf("urn:walk:%07d", i) }

func walkItemUpdated(i int) time.Time {
	return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(-time.Duration(i/10) * time.Second)
}

// loadWalkItems inserts the n walk items, a thousand a request, unordered.
func loadWalkItems(b *testing.B, coll *mongodriver.Collection, n int) {
	b.Helper()
	fixtures, err := sourcestest.Fixtures(sampleDir)
	if err != nil {
		b.Fatal(err)
	}
	sample := fixtures["archive"]
	started := time.Now()
	for from := 0; from < n; from += 1000 {
		var batch []any
		for i := from; i < min(from+1000, n); i++ {
			d := sample[i%len(sample)].Clone()
			d.Set("_id", walkItemID(i))
			d.Set("_updated", walkItemUpdated(i))
			raw, err := bsondoc.FromDoc(d)
			if err != nil {
				b.Fatal(err)
			}
			batch = append(batch, bson.Raw(raw))
		}
		if _, err := coll.InsertMany(b.Context(), batch, options.InsertMany().SetOrdered(false)); err != nil {
			b.Fatalf("inserting items %d to %d: %v", from, from+len(batch), err)
		}
	}
	b.Logf("loaded %d items in %s", n, time.Since(started).Round(time.Second))
}

// walkBenchPages walks pages of the n items from just before the item at
// from, and returns their times.
func walkBenchPages(b *testing.B, store *mongosrc.Store, items *sources.Resource, from, pages, n int) []time.Duration {
	b.Helper()
	q := &sources.Query{Resource: items, Page: 1, MaxResults: walkBenchPage,
		Sort: []sources.SortKey{{Field: "_updated", Desc: true}}, Cursor: &sources.Cursor{}}
	if from > 0 {
		// As the walk's cursor has it: the total its first page counted.
		q.Cursor.After = &sources.Position{Values: []any{walkItemUpdated(from - 1), walkItemID(from - 1)}, Total: n}
	}
	var times []time.Duration
	for page := range pages {
		started := time.Now()
		r, err := store.Find(b.Context(), q)
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(started))
		at := from + page*walkBenchPage
		if len(r.Docs) != walkBenchPage {
			b.Fatalf("page at %d: %d items, want %d", at, len(r.Docs), walkBenchPage)
		}
		for i, d := range r.Docs {
			if id, _ := d.String("_id"); id != walkItemID(at+i) {
				b.Fatalf("page at %d: item %d is %s, want %s", at, i, id, walkItemID(at+i))
			}
		}
		if last := at+walkBenchPage == n; last != (r.Next == nil) {
			b.Fatalf("page at %d of %d: next %v", at, n, r.Next)
		}
		q.Cursor = &sources.Cursor{After: r.Next}
	}
	return times
}

func meanMs(times []time.Duration) float64 {
	var sum time.Duration
	for _, d := range times {
		sum += d
	}
	return float64(sum.Microseconds()) / 1000 / float64(len(times))
}
