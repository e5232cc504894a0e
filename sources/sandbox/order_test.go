package sandbox

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/bsonorder"
	"github.com/prodapi/prodapi/sources/codec"
)

// A page answered from a kept order is the page sortHits makes of every
// hit: the same documents, sort values and total, for queries that read
// no field, some fields or all of them, with and without search_after,
// from, post_filter and every kind of total, from a Store's collection
// and from decoded documents.
func TestSearchInOrderMatchesScan(t *testing.T) {
	s, err := Sample(Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := s.colls["archive"]
	sets := map[string]docSet{"coll": c, "slice": docSlice(decodeAll(t, c))}
	sorts := []string{
		`[{"_updated": {"order": "desc"}}]`, `[{"_updated": {"order": "desc"}}, {"guid": {"order": "asc"}}]`,
		`[{"headline.keyword": "asc"}]`, `[{"versioncreated": {"order": "desc", "missing": "_first"}}]`,
		`[{"urgency": "asc"}, {"priority": {"order": "desc", "mode": "min"}}]`, `[{"_doc": "asc"}]`,
		`[{"slugline": {"order": "asc", "missing": "m"}}]`, `[{"subject.qcode": "desc"}]`, `[{"_id": "desc"}]`, `"type"`,
		`[{"task.desk": "asc"}, {"embargo": {"order": "asc", "missing": "_last"}}]`, `[{"nothing.here": "asc"}]`,
	}
	queries := []string{
		`{"match_all": {}}`, `{"bool": {}}`, `{"bool": {"minimum_should_match": 1}}`, `{"term": {"state": "published"}}`,
		`{"bool": {"must_not": [{"term": {"type": "picture"}}]}}`, `{"query_string": {"query": "council OR bridge"}}`,
		`{"range": {"urgency": {"gte": 3}}}`, `{"ids": {"values": ["x"]}}`, `{"nested": {"path": "subject", "query": {"exists": {"field": "subject.qcode"}}}}`,
	}
	extras := []string{``, `, "from": 3`, `, "track_total_hits": 5`, `, "track_total_hits": true`, `, "track_total_hits": false`,
		`, "post_filter": {"term": {"type": "text"}}`, `, "_source": ["headline"]`}
	env := &searchEnv{now: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), an: newAnalyzer(), resource: "archive"}
	for name, set := range sets {
		for _, srt := range sorts {
			for _, q := range queries {
				for _, extra := range extras {
					sizes := []int{4}
					if extra == "" {
						sizes = []int{0, 4, 100}
					}
					for _, size := range sizes {
						body := fmt.Sprintf(`{"query": %s, "sort": %s, "size": %d%s}`, q, srt, size, extra)
						req, err := env.compileBody(jdoc(t, body))
						if err != nil {
							t.Fatalf("%s: %v", body, err)
						}
						want, wantValues, err := env.scan(set, req)
						if err != nil {
							t.Fatalf("%s: scan: %v", body, err)
						}
						compare := func(after string, req *searchReq) {
							t.Helper()
							got, gotValues, err := env.searchInOrder(set, req, sortJSON(jdoc(t, body)))
							if err != nil {
								t.Fatalf("%s %s: %v", body, after, err)
							}
							if req.after != nil {
								if want, wantValues, err = env.scan(set, req); err != nil {
									t.Fatal(err)
								}
							}
							if diff := cmp.Diff(pageOf(got, gotValues), pageOf(want, wantValues)); diff != "" {
								t.Errorf("%s of %s %s (-in order +scan):\n%s", name, body, after, diff)
							}
						}
						compare("", req)
						if len(wantValues) > 1 {
							req.after = wantValues[1]
							compare(fmt.Sprintf("after %v", req.after), req)
						}
					}
				}
			}
		}
	}
}

// pageOf is a page as the tests compare it.
func pageOf(res *sources.Result, values [][]any) []string {
	out := []string{fmt.Sprint("total ", res.Total)}
	for i, d := range res.Docs {
		out = append(out, string(codec.AppendJSON(nil, d))+" "+string(codec.AppendJSON(nil, values[i])))
	}
	return out
}

// referenceFind is how Find answered a document list when it sorted the
// matches of every page.
func referenceFind(docs []*sources.Doc, q *sources.Query) (*sources.Result, error) {
	m, err := eveRules.compileFilter(q.Where, 0)
	if err != nil {
		return nil, err
	}
	var matched []*sources.Doc
	for _, d := range docs {
		if m(d) {
			matched = append(matched, d)
		}
	}
	bsonorder.SortDocs(matched, q.Sort)
	result := &sources.Result{Total: len(matched)}
	start := min(max(q.Skip(), 0), len(matched))
	keys := bsonorder.WalkKeys(q.Sort)
	if q.Cursor != nil && q.Cursor.After != nil {
		after := q.Cursor.After.Values
		start = sort.Search(len(matched), func(i int) bool { return bsonorder.ComparePosition(matched[i], keys, after) > 0 })
	}
	end := len(matched)
	if q.MaxResults > 0 {
		end = min(start+q.MaxResults, end)
	}
	result.Docs = matched[start:end]
	if q.Cursor != nil && end > start && end < len(matched) {
		result.Next = bsonorder.Position(matched[end-1], keys)
	}
	return result, nil
}

// Document lists from a kept order answer as Find did when it sorted
// every page's matches: filters that read no field, some or several,
// skips, and walks from the first page to the last.
func TestFindMatchesReference(t *testing.T) {
	s, err := Sample(Options{})
	if err != nil {
		t.Fatal(err)
	}
	filters := []string{`{}`, `{"state": "published"}`, `{"$or": [{"type": "picture"}, {"urgency": {"$gte": 3}}]}`,
		`{"subject.qcode": {"$exists": true}}`, `{"$and": [{}]}`, `{"nothing": null}`, `{"_id": {"$type": "string"}}`}
	sorts := [][]sources.SortKey{nil, {{Field: "_updated", Desc: true}}, {{Field: "headline"}}, {{Field: "subject.qcode", Desc: true}},
		{{Field: "urgency"}, {Field: "_id", Desc: true}}, {{Field: "missing.field"}}}
	for _, coll := range []string{"archive", "users", "desks", "planning"} {
		c := s.colls[coll]
		docs := decodeAll(t, c)
		for _, f := range filters {
			for _, srt := range sorts {
				for _, page := range []struct{ page, max int }{{1, 0}, {1, 5}, {3, 4}, {20, 5}} {
					q := &sources.Query{Resource: usersRes, Where: jdoc(t, f), Sort: srt, Page: page.page, MaxResults: page.max}
					compareFind(t, c, docs, q, fmt.Sprintf("%s where %s sort %v page %v", coll, f, srt, page))
				}
				// A walk, page by page, from each's position.
				q := &sources.Query{Resource: usersRes, Where: jdoc(t, f), Sort: srt, Page: 1, MaxResults: 3, Cursor: &sources.Cursor{}}
				for range 30 {
					want := compareFind(t, c, docs, q, fmt.Sprintf("%s walk where %s sort %v after %v", coll, f, srt, q.Cursor.After))
					if want.Next == nil {
						break
					}
					q.Cursor = &sources.Cursor{After: want.Next}
				}
			}
		}
	}
}

// compareFind compares findDocs's answer to q with referenceFind's, and
// returns the latter.
func compareFind(t *testing.T, c *coll, docs []*sources.Doc, q *sources.Query, what string) *sources.Result {
	t.Helper()
	want, err := referenceFind(docs, q)
	if err != nil {
		t.Fatal(err)
	}
	got, err := findDocs(c, q)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(resultOf(got), resultOf(want)); diff != "" {
		t.Fatalf("%s (-got +want):\n%s", what, diff)
	}
	return want
}

func resultOf(res *sources.Result) []string {
	out := []string{fmt.Sprint("total ", res.Total)}
	for _, d := range res.Docs {
		out = append(out, string(codec.AppendJSON(nil, d)))
	}
	if res.Next != nil {
		out = append(out, "next "+string(codec.AppendJSON(nil, res.Next.Values)))
	}
	return out
}

// Lookups by _id read only the documents of the values' ids: among them
// is every document the lookup's matcher takes, on the document database
// (the Eve rule) as on the search index (string forms).
func TestLookupCandidates(t *testing.T) {
	s := openTest(t, Options{})
	c := s.colls["desks"]
	docs := decodeAll(t, c)
	values := [][]any{
		{"5d76113ab3af37dea3a2eb93"}, {"5D76113AB3AF37DEA3A2EB93"}, {mustOID(t, "5d76113ab3af37dea3a2eb93")},
		{"desk-sport", "5d76113ab3af37dea3a2eb91", "nothing"}, {mustOID(t, "5d76113ab3af37dea3a2eb92")}, {int64(5), nil, []any{"desk-sport"}},
	}
	for _, vs := range values {
		got := c.candidates("_id", vs)
		hex := make([]any, len(vs))
		for i, v := range vs {
			if id, ok := v.(sources.ObjectID); ok {
				v = id.Hex()
			}
			hex[i] = v
		}
		m, err := eveRules.compileFilter(sources.D("_id", sources.D("$in", hex)), 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, d := range docs {
			id, _ := d.Get("_id")
			str, _ := sources.IDString(id)
			search := false
			for _, v := range vs {
				if s, ok := sources.IDString(v); ok && s == str {
					search = true
				}
			}
			if (m(d) || search) && !containsInt(got, i) {
				t.Errorf("%v: document %d (%s) matches, not among the candidates %v", vs, i, str, got)
			}
		}
		if all := c.candidates("name", vs); len(all) != c.size() {
			t.Errorf("candidates of another field: %v, want every document", all)
		}
	}
}

func containsInt(s []int, v int) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

func mustOID(t *testing.T, s string) sources.ObjectID {
	t.Helper()
	id, ok := sources.ParseObjectID(s)
	if !ok {
		t.Fatalf("%s is no ObjectID", s)
	}
	return id
}

// Every resource's default sort and walk tiebreaker reads an indexed
// field, so that its order is built from the spans.
func TestIndexedCoverResources(t *testing.T) {
	for _, r := range sources.Resources() {
		fields := []string{r.Tiebreaker}
		for _, k := range r.DefaultSort {
			fields = append(fields, k.Field)
		}
		for _, f := range fields {
			if f == "" {
				continue
			}
			fr, err := newFieldRef(f)
			if err != nil {
				t.Fatal(err)
			}
			var fs fieldSet
			fs.ref(fr)
			if !allIndexed(fs.names) {
				t.Errorf("%s sorts on %s: %v not all indexed (%v)", r.Name, f, fs.names, indexed)
			}
		}
	}
}

// A collection large enough that orders, pages and scans are made in
// parts at once answers as a small one: a walk serves every item once,
// in order; searches in order and by scan agree; document lists and
// lookups by a linking field find what their reference finds.
func TestLargeCollection(t *testing.T) {
	const n = 9000
	var items, users strings.Builder
	items.WriteString("[")
	users.WriteString("[")
	for i := range n {
		if i > 0 {
			items.WriteString(",\n")
			users.WriteString(",\n")
		}
		fmt.Fprintf(&items, `{"_id": "item-%05d", "guid": "g-%05d", "_updated": {"$date": "2026-01-%02dT00:00:%02dZ"}, "state": %q, "headline": "story %d", "assignment_id": "a-%d"}`,
			i, (i*7919)%n, 1+i%28, i%60, []string{"published", "corrected", "spiked"}[i%3], i, i%50)
		fmt.Fprintf(&users, `{"_id": "u-%05d", "username": "user%d", "n": %d}`, i, (i*31)%n, i%7)
	}
	items.WriteString("]")
	users.WriteString("]")
	s, err := Load(fstest.MapFS{"archive.json": {Data: []byte(items.String())}, "users.json": {Data: []byte(users.String())}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()

	// The walk of /items, as the server asks for it.
	body := jdoc(t, `{"query": {"bool": {}}, "sort": [{"_updated": {"order": "desc"}}], "size": 500, "track_total_hits": 10000}`)
	q := &sources.Query{Resource: itemsRes, MaxResults: 500, Search: body, Cursor: &sources.Cursor{}}
	var walked []string
	for range n {
		res, err := s.Find(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range res.Docs {
			id, _ := d.String("_id")
			walked = append(walked, id)
		}
		if res.Next == nil {
			break
		}
		q.Cursor = &sources.Cursor{After: res.Next}
	}
	docs := decodeAll(t, s.colls["archive"])
	want := slices.Clone(docs)
	slices.SortStableFunc(want, func(a, b *sources.Doc) int {
		ta, _ := a.Get("_updated")
		tb, _ := b.Get("_updated")
		if c := tb.(time.Time).Compare(ta.(time.Time)); c != 0 {
			return c
		}
		ga, _ := a.String("guid")
		gb, _ := b.String("guid")
		return strings.Compare(ga, gb)
	})
	wantIDs := make([]string, len(want))
	for i, d := range want {
		wantIDs[i], _ = d.String("_id")
	}
	if diff := cmp.Diff(walked, wantIDs); diff != "" {
		t.Errorf("walk (-got +want):\n%s", diff)
	}

	// Searches in order and by scan.
	env := &searchEnv{now: time.Now(), an: newAnalyzer(), resource: "archive"}
	for _, b := range []string{
		`{"query": {"term": {"state": "corrected"}}, "sort": [{"headline.keyword": "asc"}], "size": 20, "from": 40, "track_total_hits": 1000}`,
		`{"query": {"query_string": {"query": "story"}}, "sort": [{"_updated": "desc"}, {"guid": "asc"}], "size": 30, "track_total_hits": true}`,
		`{"query": {"bool": {"must_not": [{"term": {"state": "spiked"}}]}}, "post_filter": {"prefix": {"headline": "story 1"}}, "sort": ["_doc"], "size": 10}`,
	} {
		req, err := env.compileBody(jdoc(t, b))
		if err != nil {
			t.Fatal(err)
		}
		got, gotValues, err := env.searchInOrder(s.colls["archive"], req, sortJSON(jdoc(t, b)))
		if err != nil {
			t.Fatal(err)
		}
		want, wantValues, err := env.scan(s.colls["archive"], req)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(pageOf(got, gotValues), pageOf(want, wantValues)); diff != "" {
			t.Errorf("%s (-in order +scan):\n%s", b, diff)
		}
	}

	// A document list, and lookups by a linking field.
	userDocs := decodeAll(t, s.colls["users"])
	compareFind(t, s.colls["users"], userDocs, &sources.Query{Resource: usersRes, Where: jdoc(t, `{"n": {"$in": [1, 3]}}`),
		Sort: []sources.SortKey{{Field: "username", Desc: true}}, Page: 3, MaxResults: 25}, "users where n in 1, 3")
	for _, search := range []bool{false, true} {
		got, err := s.Lookup(ctx, sources.Lookup{Collection: "archive", Field: "assignment_id", Values: []any{"a-7", "a-42"}, Search: search})
		if err != nil {
			t.Fatal(err)
		}
		var wantLinked []string
		for _, d := range docs {
			if a, _ := d.String("assignment_id"); a == "a-7" || a == "a-42" {
				id, _ := d.String("_id")
				wantLinked = append(wantLinked, id)
			}
		}
		var gotLinked []string
		for _, d := range got {
			id, _ := d.String("_id")
			gotLinked = append(gotLinked, id)
		}
		if diff := cmp.Diff(gotLinked, wantLinked); diff != "" {
			t.Errorf("lookup by assignment_id (search %v) (-got +want):\n%s", search, diff)
		}
	}
}
