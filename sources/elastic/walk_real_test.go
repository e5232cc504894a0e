package elastic_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8"

	"github.com/prodapi/prodapi/sources"
	essrc "github.com/prodapi/prodapi/sources/elastic"
)

// walkRealDocs is the size of the newsroom TestWalkPast10000Real walks:
// past the 10000 results offset paging reaches.
const walkRealDocs = 12000

// A cursor walk goes past the 10000 results that offset paging reaches,
// on a real Elasticsearch 7.10.2 node: 12000 items (ties broken by guid)
// and 12000 assignments (by _id, as 7.x sorts on it), each document
// exactly once, in pages of 500, each page's total the saturated 10000.
// The log line gives the walk's throughput.
func TestWalkPast10000Real(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	url := realNode(t, "walk", func() (map[string][]*sources.Doc, error) {
		items := make([]*sources.Doc, walkRealDocs)
		assignments := make([]*sources.Doc, walkRealDocs)
		for i := range walkRealDocs {
			id := fmt.Sprintf("urn:walk:%06d", i)
			// Ten documents a second: ties the tiebreaker orders.
			updated := base.Add(time.Duration(i/10) * time.Second).Format(sources.DateLayout)
			items[i] = sources.D("_id", id, "guid", id, "type", "text", "state", "published", "headline", "item "+id, "_updated", updated)
			assignments[i] = sources.D("_id", fmt.Sprintf("6a%022x", i), "type", "assignment", "_updated", updated)
		}
		return map[string][]*sources.Doc{"archive": items, "assignments": assignments}, nil
	})
	client, err := elasticsearch.NewClient(essrc.Config(url, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	store := essrc.New(client, essrc.Options{Index: "walk", Timeout: 30 * time.Second})
	for _, res := range []string{"items", "assignments"} {
		t.Run(res, func(t *testing.T) {
			body := `{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":500,"track_total_hits":10000}`
			q := &sources.Query{Resource: resource(res), Page: 1, MaxResults: 500, Search: decode(t, body), Cursor: &sources.Cursor{}}
			seen := make(map[string]int, walkRealDocs)
			pages := 0
			started := time.Now()
			for {
				page, err := store.Find(t.Context(), q)
				if err != nil {
					t.Fatalf("page %d: %v", pages+1, err)
				}
				pages++
				if page.Total != sources.MaxTotal {
					t.Errorf("page %d: total %d, want %d", pages, page.Total, sources.MaxTotal)
				}
				for _, id := range ids(page.Docs) {
					seen[id]++
				}
				if page.Next == nil {
					break
				}
				if pages > walkRealDocs/500+1 {
					t.Fatalf("%d pages and no end", pages)
				}
				q.Cursor.After = page.Next
			}
			elapsed := time.Since(started)
			twice := 0
			for _, n := range seen {
				if n > 1 {
					twice++
				}
			}
			if len(seen) != walkRealDocs || twice > 0 || pages != walkRealDocs/500 {
				t.Errorf("%d documents in %d pages, %d more than once; want %d in %d", len(seen), pages, twice, walkRealDocs, walkRealDocs/500)
			}
			t.Logf("walked %d %s in %d pages of 500 in %v: %.0f documents/s", len(seen), res, pages,
				elapsed.Round(time.Millisecond), float64(len(seen))/elapsed.Seconds())
		})
	}
}

// A walk on a key some documents lack returns each document once, in
// the order of the list in one page, on a real node too, which sorts
// missing dates as the extreme numbers and missing keywords as null.
func TestWalkKeyMissingReal(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	url := realNode(t, "walkmissing", func() (map[string][]*sources.Doc, error) {
		items := make([]*sources.Doc, 12)
		for i := range items {
			id := fmt.Sprintf("urn:missing:%02d", i)
			d := sources.D("_id", id, "guid", id, "type", "text", "_updated", base.Add(time.Duration(i)*time.Minute).Format(sources.DateLayout))
			if i%3 != 0 {
				// Ties: two items a date.
				d.Set("versioncreated", base.Add(time.Duration(i/2)*time.Hour).Format(sources.DateLayout))
			}
			if i%4 == 0 {
				d.Set("assignment_id", fmt.Sprintf("6a%022x", i%8))
			}
			items[i] = d
		}
		return map[string][]*sources.Doc{"archive": items}, nil
	})
	client, err := elasticsearch.NewClient(essrc.Config(url, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	store := essrc.New(client, essrc.Options{Index: "walkmissing", Timeout: 30 * time.Second})
	for _, sort := range missingKeySorts {
		walkEach(t, nil, store, "items", sort, "7.10.2")
	}
}
