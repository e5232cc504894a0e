package elastic_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	"github.com/prodapi/prodapi/sources/elastic/estest"
	"github.com/prodapi/prodapi/sources/sourcestest"
)

// The fake answers search bodies as a real Elasticsearch 7.10.2 node
// holding the same documents with prodapi's mappings: the same status,
// the same hits in order with the same fields, the same totals and
// aggregations, the same error types. Where the fake imitates 7.10, this
// is the test that says it does.
func TestFakeAnswersAsReal(t *testing.T) {
	dir := sourcestest.Dir()
	url := realNode(t, "contract", func() (map[string][]*sources.Doc, error) { return sourcestest.Fixtures(dir) })
	docs, err := sourcestest.Fixtures(dir)
	if err != nil {
		t.Fatal(err)
	}
	fake := estest.New(t, estest.Options{Version: estest.V710, Prefix: "contract", Docs: docs})
	for _, tc := range []struct{ name, index, body string }{
		{"match_all sorted", "archive", `{"query":{"match_all":{}},"sort":[{"_updated":{"order":"desc"}}],"size":25,"track_total_hits":10000}`},
		{"no sort", "contacts", `{"query":{"bool":{"filter":[{"term":{"is_active":{"value":true}}}]}},"sort":[{"last_name.keyword":{"order":"asc","unmapped_type":"keyword"}},{"_id":{"order":"asc"}}],"size":3,"from":1,"track_total_hits":10000}`},
		{"track_total_hits false", "archive", `{"query":{"match_all":{}},"sort":[{"guid":{"order":"asc"}}],"size":2,"track_total_hits":false}`},
		{"track_total_hits true", "archive", `{"query":{"match_all":{}},"sort":[{"guid":{"order":"asc"}}],"size":2,"track_total_hits":true}`},
		{"track_total_hits 2", "archive", `{"query":{"match_all":{}},"sort":[{"guid":{"order":"asc"}}],"size":1,"track_total_hits":2}`},
		{"_source includes", "archive", `{"query":{"match_all":{}},"sort":[{"guid":{"order":"asc"}}],"size":3,"_source":{"includes":["headline","_updated"]},"track_total_hits":10000}`},
		{"_source excludes", "archive", `{"query":{"match_all":{}},"sort":[{"guid":{"order":"asc"}}],"size":3,"_source":{"excludes":["body_html","renditions"]},"track_total_hits":10000}`},
		{"_source false", "archive", `{"query":{"match_all":{}},"sort":[{"guid":{"order":"asc"}}],"size":2,"_source":false,"track_total_hits":10000}`},
		{"size 0 aggs", "archive", `{"query":{"match_all":{}},"size":0,"aggs":{"t":{"terms":{"field":"type","size":10}}},"track_total_hits":10000}`},
		{"date terms agg", "archive", `{"query":{"match_all":{}},"size":0,"aggs":{"d":{"terms":{"field":"_updated","size":3}}},"track_total_hits":10000}`},
		{"nested terms agg", "archive", `{"query":{"match_all":{}},"size":0,"aggs":{"t":{"terms":{"field":"type","size":10},"aggs":{"s":{"terms":{"field":"state","size":10}}}}},"track_total_hits":10000}`},
		{"range on Superdesk dates", "archive", `{"query":{"bool":{"filter":[{"range":{"_updated":{"gte":"2024-01-03T00:00:00+0000"}}}]}},"sort":[{"_updated":{"order":"asc"}}],"size":25,"track_total_hits":10000}`},
		{"range date math", "archive", `{"query":{"bool":{"filter":[{"range":{"versioncreated":{"lt":"now"}}}]}},"sort":[{"guid":{"order":"asc"}}],"size":25,"track_total_hits":10000}`},
		{"sort on an unmapped field", "archive", `{"query":{"match_all":{}},"sort":[{"no_such_field":{"order":"asc"}}],"size":25,"track_total_hits":10000}`},
		{"sort on an unmapped field with unmapped_type", "archive", `{"query":{"match_all":{}},"sort":[{"no_such_field":{"order":"asc","unmapped_type":"keyword"}},{"guid":{"order":"asc"}}],"size":25,"track_total_hits":10000}`},
		{"sort on a text field", "archive", `{"query":{"match_all":{}},"sort":[{"headline":{"order":"asc"}}],"size":25,"track_total_hits":10000}`},
		{"unknown query option", "archive", `{"query":{"term":{"guid":{"valu":"x"}}},"size":1}`},
		{"query_string lenient", "archive", `{"query":{"query_string":{"query":"word_count:abc OR headline:flood","lenient":true}},"sort":[{"guid":{"order":"asc"}}],"size":25,"track_total_hits":10000}`},
		{"missing index", "no_such_collection", `{"query":{"match_all":{}},"size":1}`},
		{"terms agg on a text field", "archive", `{"size":0,"aggs":{"h":{"terms":{"field":"headline","size":10}}}}`},
		{"terms agg order and size", "archive", `{"size":0,"aggs":{"k":{"terms":{"field":"keywords","size":2,"order":{"_key":"desc"}}}}}`},
		{"match", "archive", `{"query":{"bool":{"must":[{"match":{"headline":{"query":"bridge traffic"}}}]}},"sort":[{"guid":{"order":"asc"}}],"size":25}`},
		{"match_phrase", "archive", `{"query":{"bool":{"must":[{"match_phrase":{"headline":{"query":"opens to traffic"}}}]}},"sort":[{"guid":{"order":"asc"}}],"size":25}`},
		{"match_phrase_prefix", "archive", `{"query":{"bool":{"must":[{"match_phrase_prefix":{"headline":{"query":"budget vo"}}}]}},"sort":[{"guid":{"order":"asc"}}],"size":25}`},
		{"multi_match", "archive", `{"query":{"bool":{"must":[{"multi_match":{"query":"river","fields":["headline","body_html"]}}]}},"sort":[{"guid":{"order":"asc"}}],"size":25}`},
		{"prefix and wildcard", "archive", `{"query":{"bool":{"should":[{"prefix":{"slugline":{"value":"bud"}}},{"wildcard":{"guid":{"value":"tag:*"}}}],"minimum_should_match":1}},"sort":[{"guid":{"order":"asc"}}],"size":25}`},
		{"terms and exists", "archive", `{"query":{"bool":{"filter":[{"terms":{"state":["published","spiked"]}},{"exists":{"field":"body_html"}}]}},"sort":[{"guid":{"order":"asc"}}],"size":25}`},
		{"ids", "archive", `{"query":{"ids":{"values":["tag:localhost:5000:2024:item-0002","nope"]}},"sort":[{"guid":{"order":"asc"}}],"size":25}`},
		{"must_not", "archive", `{"query":{"bool":{"must_not":[{"term":{"type":{"value":"text"}}}]}},"sort":[{"guid":{"order":"asc"}}],"size":25}`},
		{"simple_query_string", "archive", `{"query":{"simple_query_string":{"query":"mayor | sunset","fields":["headline"]}},"sort":[{"guid":{"order":"asc"}}],"size":25}`},
		{"query_string with field", "archive", `{"query":{"query_string":{"query":"headline:(bridge OR budget) AND state:published","lenient":true}},"sort":[{"guid":{"order":"asc"}}],"size":25}`},
		{"range on numbers", "archive", `{"query":{"range":{"word_count":{"gt":100,"lte":450}}},"sort":[{"word_count":{"order":"desc"}}],"size":25}`},
		{"sort on a missing number", "archive", `{"query":{"match_all":{}},"sort":[{"urgency":{"order":"asc"}},{"guid":{"order":"asc"}}],"size":25}`},
		{"nested", "planning", `{"query":{"nested":{"path":"coverages","query":{"term":{"coverages.planning.g2_content_type":{"value":"text"}}}}},"sort":[{"guid":{"order":"asc"}}],"size":25}`},
		{"constant_score and dis_max", "contacts", `{"query":{"dis_max":{"queries":[{"constant_score":{"filter":{"term":{"public":{"value":true}}}}},{"match":{"first_name":{"query":"anna"}}}]}},"sort":[{"_id":{"order":"asc"}}],"size":25}`},
		{"post_filter", "archive", `{"query":{"match_all":{}},"post_filter":{"term":{"type":{"value":"text"}}},"aggs":{"t":{"terms":{"field":"type","size":10}}},"sort":[{"guid":{"order":"asc"}}],"size":25}`},
		{"from past the end", "archive", `{"query":{"match_all":{}},"sort":[{"guid":{"order":"asc"}}],"size":5,"from":50,"track_total_hits":10000}`},
		{"search_after a date and a guid", "archive", `{"query":{"match_all":{}},"sort":[{"_updated":{"order":"desc"}},{"guid":{"order":"asc"}}],"size":3,"search_after":[1704362400000,"urn:newsml:localhost:5000:2024-01-04T10:00:00.000000:item-0004"],"track_total_hits":10000}`},
		{"search_after a missing keyword", "archive", `{"query":{"match_all":{}},"sort":[{"assignment_id":{"order":"asc"}},{"guid":{"order":"asc"}}],"size":5,"search_after":[null,"tag:localhost:5000:2024:item-0002"],"track_total_hits":10000}`},
		{"search_after a missing keyword first", "archive", `{"query":{"match_all":{}},"sort":[{"assignment_id":{"order":"desc","missing":"_first"}},{"guid":{"order":"asc"}}],"size":5,"search_after":[null,"urn:newsml:localhost:5000:2024-01-03T10:00:00.000000:item-0003"],"track_total_hits":10000}`},
		{"search_after an _id", "contacts", `{"query":{"match_all":{}},"sort":[{"last_name.keyword":{"order":"asc","unmapped_type":"keyword"}},{"_id":{"order":"asc"}}],"size":5,"search_after":["Favre","66f000000000000000000001"],"track_total_hits":10000}`},
		{"search_after past the end", "archive", `{"query":{"match_all":{}},"sort":[{"guid":{"order":"asc"}}],"size":5,"search_after":["zzz"],"track_total_hits":10000}`},
		{"search_after of the wrong length", "archive", `{"query":{"match_all":{}},"sort":[{"guid":{"order":"asc"}}],"size":5,"search_after":["a","b"]}`},
		{"sort by _score", "archive", `{"query":{"match":{"headline":{"query":"bridge"}}},"sort":[{"_score":{"order":"desc"}},{"guid":{"order":"asc"}}],"size":25}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := "/contract_" + tc.index + "/_search"
			realStatus, real := postJSON(t, url+path, tc.body)
			fakeStatus, fakeBody := postJSON(t, fake.URL+path, tc.body)
			if realStatus != fakeStatus {
				t.Fatalf("status: fake %d, real %d\nfake: %.1000s\nreal: %.1000s", fakeStatus, realStatus, fakeBody, real)
			}
			if diff := gocmp.Diff(shapeOf(t, real), shapeOf(t, fakeBody)); diff != "" {
				t.Errorf("answer (-real +fake):\n%s\nreal: %.3000s", diff, real)
			}
		})
	}
}

// score keeps whether there is a score, not its value: the fake does not
// score (every hit has 1.0), and prodapi reads no score.
func score(v any) any {
	if v == nil {
		return nil
	}
	return "a score"
}

func postJSON(t *testing.T, url, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, b
}

// shapeOf keeps what must agree in a search answer: for a hit list, each
// hit's keys, _id, whether it has a _score, its _source (canonical), the
// total, whether there is a max_score, and the aggregations; for an error, the status and
// the types of the error and its first root cause (not the reasons: the
// fake's come from the sandbox's evaluator). took, _shards and
// ids of Elasticsearch's own (index uuids, node ids) are left out.
func shapeOf(t *testing.T, b []byte) string {
	t.Helper()
	v, err := codec.DecodeJSON(b, codec.DecodeOptions{})
	if err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	d := v.(*sources.Doc)
	out := sources.NewDoc()
	if e, ok := d.Doc("error"); ok {
		typ, _ := e.Get("type")
		out.Set("error.type", typ)
		if rc, _ := e.Get("root_cause"); rc != nil {
			if list, _ := rc.([]any); len(list) > 0 {
				first := list[0].(*sources.Doc)
				rt, _ := first.Get("type")
				out.Set("root_cause.type", rt)
			}
		}
		st, _ := d.Get("status")
		out.Set("status", st)
		return string(codec.AppendCanonicalJSON(nil, out))
	}
	hits, _ := d.Doc("hits")
	if v, ok := hits.Get("total"); ok {
		out.Set("hits.total", v)
	}
	if v, ok := hits.Get("max_score"); ok {
		out.Set("hits.max_score", score(v))
	}
	list, _ := hits.Get("hits")
	var shaped []any
	for _, h := range list.([]any) {
		h := h.(*sources.Doc)
		keys := slices.Collect(func(yield func(string) bool) {
			for k := range h.All() {
				if !yield(k) {
					return
				}
			}
		})
		s := sources.D("keys", keys)
		for _, k := range []string{"_id", "_source"} {
			if v, ok := h.Get(k); ok {
				s.Set(k, v)
			}
		}
		sc, _ := h.Get("_score")
		s.Set("_score", score(sc))
		shaped = append(shaped, s)
	}
	out.Set("hits", shaped)
	if a, ok := d.Get("aggregations"); ok {
		out.Set("aggregations", a)
	}
	return string(codec.AppendCanonicalJSON(nil, out))
}
