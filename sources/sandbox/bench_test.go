package sandbox

import (
	"context"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// The sample newsroom's items, searched as clients search them.
var benchBodies = []struct{ name, body string }{
	{"default list", `{"query": {"bool": {}}, "sort": [{"_updated": {"order": "desc"}}], "size": 25, "track_total_hits": 10000}`},
	{"full text", `{"query": {"bool": {"must": [{"query_string": {"query": "marathon OR (bridge AND river)", "default_operator": "OR", "lenient": true}}],
		"filter": [{"terms": {"state": ["published", "corrected"]}}]}}, "sort": [{"_updated": {"order": "desc"}}], "size": 25, "track_total_hits": 10000}`},
	{"filters and aggs", `{"query": {"bool": {"filter": [{"range": {"versioncreated": {"gte": "now-30d/d"}}}, {"term": {"type": {"value": "text"}}}],
		"must_not": [{"term": {"state": {"value": "spiked"}}}]}}, "aggs": {"desk": {"terms": {"field": "task.desk"}}, "state": {"terms": {"field": "state"}}},
		"sort": [{"versioncreated": {"order": "desc"}}], "size": 25, "track_total_hits": 10000}`},
}

var benchNow = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)

func BenchmarkSearch(b *testing.B) {
	s, err := Sample(Options{Now: func() time.Time { return benchNow }})
	if err != nil {
		b.Fatal(err)
	}
	items, _ := sources.ResourceByName("items")
	ctx := context.Background()
	for _, bb := range benchBodies {
		body := jdoc(b, bb.body)
		q := &sources.Query{Resource: items, Page: 1, MaxResults: 25, Search: body}
		b.Run("Store/"+bb.name, func(b *testing.B) {
			for b.Loop() {
				if _, err := s.Find(ctx, q); err != nil {
					b.Fatal(err)
				}
			}
		})
		// Search analyses the stored strings afresh on every call; the
		// Store keeps its analysis.
		b.Run("Search/"+bb.name, func(b *testing.B) {
			docs := decodeAll(b, s.colls["archive"])
			for b.Loop() {
				if _, err := Search(docs, body, benchNow); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMatch(b *testing.B) {
	s, err := Sample(Options{})
	if err != nil {
		b.Fatal(err)
	}
	users := decodeAll(b, s.colls["users"])
	filter := jdoc(b, `{"$or": [{"username": "pnair"}, {"is_active": true, "user_type": {"$in": ["user", "administrator"]}}],
		"_updated": {"$gte": "2026-01-01T00:00:00+0000"}, "role": {"$exists": true}}`)
	b.Run("one document", func(b *testing.B) {
		for b.Loop() {
			if _, err := Match(users[0], filter); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("users list", func(b *testing.B) {
		res, _ := sources.ResourceByName("users")
		q := &sources.Query{Resource: res, Page: 1, MaxResults: 25, Where: filter, Sort: res.DefaultSort}
		for b.Loop() {
			if _, err := s.Find(context.Background(), q); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// decodeAll decodes a collection's documents.
func decodeAll(tb testing.TB, c *coll) []*sources.Doc {
	tb.Helper()
	docs := make([]*sources.Doc, c.size())
	for i := range docs {
		d, err := c.doc(i)
		if err != nil {
			tb.Fatal(err)
		}
		docs[i] = d
	}
	return docs
}
