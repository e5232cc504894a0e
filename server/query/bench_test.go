package query

import (
	"testing"

	"github.com/prodapi/prodapi/sources"
)

// BenchmarkParse parses a typical search list request: a source with a
// legacy filtered query, a sort and a size, plus q and a page.
func BenchmarkParse(b *testing.B) {
	res, _ := sources.ResourceByName("items")
	raw := qs("source", `{"query":{"filtered":{"query":{"query_string":{"query":"flood AND headline:storm"}},"filter":{"and":[{"terms":{"type":["text","picture"]}},{"range":{"versioncreated":{"gte":"now-1d"}}},{"not":{"term":{"state":"spiked"}}}]}}},"sort":[{"versioncreated":"desc"}],"size":20}`,
		"q", "rain", "page", "2", "max_results", "20")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(res, "", raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseWhere parses a typical document list request.
func BenchmarkParseWhere(b *testing.B) {
	res, _ := sources.ResourceByName("desks")
	raw := qs("where", `{"$or":[{"name":{"$in":["Sports","Politics"]}},{"members.user":"5d76113ab3af37dea3a2eb92"}]}`,
		"sort", `[("name", 1), ("_id", -1)]`, "projection", `{"name":1,"members":1}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(res, "", raw); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCursor seals the position after a page of items and opens it
// again with the next request: what a walk's cursor costs a page.
func BenchmarkCursor(b *testing.B) {
	res, _ := sources.ResourceByName("items")
	c, err := NewCursors([]byte("a secret of the fleet's, at least thirty-two bytes"), nil)
	if err != nil {
		b.Fatal(err)
	}
	first, err := c.Parse(res, "", "cursor=")
	if err != nil {
		b.Fatal(err)
	}
	pos := sources.Position{Values: []any{int64(1795000000000), "urn:newsml:riverton.example:2026-11-19T19:38:52.765190:1880979e-fc9b-454c-bd98-31d4076de7f8"}}
	b.ReportAllocs()
	for b.Loop() {
		token, err := first.Cursor.Seal(pos)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.Parse(res, "", "cursor="+token); err != nil {
			b.Fatal(err)
		}
	}
}
