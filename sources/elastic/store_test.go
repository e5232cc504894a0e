package elastic_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	essrc "github.com/prodapi/prodapi/sources/elastic"
	"github.com/prodapi/prodapi/sources/elastic/estest"
)

var versions = []estest.Version{estest.V8, estest.V7, estest.V710}

func date(s string) time.Time {
	t, err := time.Parse(sources.DateLayout, s)
	if err != nil {
		panic(err)
	}
	return t
}

// newsroom is a small archive, contacts and assignments.
func newsroom() map[string][]*sources.Doc {
	oid := func(s string) sources.ObjectID { id, _ := sources.ParseObjectID(s); return id }
	return map[string][]*sources.Doc{
		"archive": {
			sources.D("_id", "urn:newsml:1", "guid", "urn:newsml:1", "type", "text", "headline", "Flood", "state", "published",
				"_updated", date("2024-01-15T10:00:00+0000"), "versioncreated", date("2024-01-15T10:00:00+0000")),
			sources.D("_id", "urn:newsml:2", "guid", "urn:newsml:2", "type", "picture", "headline", "Bridge", "state", "in_progress",
				"_updated", date("2024-01-16T10:00:00+0000")),
			sources.D("_id", "urn:newsml:3", "guid", "urn:newsml:3", "type", "text", "headline", "Storm", "state", "published",
				"_updated", date("2024-01-14T10:00:00+0000"), "assignment_id", oid("5f0c7c2e2b0b7a0a1c5e9a01")),
		},
		"contacts": {
			sources.D("_id", oid("5f0c7c2e2b0b7a0a1c5e9b01"), "first_name", "Ann", "last_name", "Zed", "is_active", true),
			sources.D("_id", oid("5f0c7c2e2b0b7a0a1c5e9b02"), "first_name", "Bob", "last_name", "Able", "is_active", true),
		},
		"assignments": {
			sources.D("_id", oid("5f0c7c2e2b0b7a0a1c5e9a01"), "coverage_item", "urn:coverage:1", "planning_item", "urn:planning:1",
				"_updated", date("2024-01-15T09:00:00+0000")),
			sources.D("_id", oid("5f0c7c2e2b0b7a0a1c5e9a02"), "coverage_item", "urn:coverage:2", "planning_item", "urn:planning:1",
				"_updated", date("2024-01-15T11:00:00+0000")),
			sources.D("_id", oid("5f0c7c2e2b0b7a0a1c5e9a03"), "coverage_item", "urn:coverage:3", "planning_item", "urn:planning:2",
				"_updated", date("2024-01-15T12:00:00+0000")),
		},
	}
}

type fixture struct {
	fake    *estest.Server
	store   *essrc.Store
	queries *metrics.Queries
}

func setup(t *testing.T, fo estest.Options, timeout time.Duration) fixture {
	t.Helper()
	if fo.Docs == nil {
		fo.Docs = newsroom()
	}
	fake := estest.New(t, fo)
	return fixture{fake: fake}.connect(t, fake.URL, timeout)
}

func (f fixture) connect(t *testing.T, url string, timeout time.Duration) fixture {
	t.Helper()
	client, err := elasticsearch.NewClient(essrc.Config(url, timeout))
	if err != nil {
		t.Fatal(err)
	}
	f.queries = metrics.NewMetrics().SourceQueries()
	f.store = essrc.New(client, essrc.Options{Index: "superdesk", Timeout: timeout, Queries: f.queries})
	return f
}

func resource(name string) *sources.Resource {
	r, ok := sources.ResourceByName(name)
	if !ok {
		panic(name)
	}
	return r
}

func decode(t *testing.T, s string) *sources.Doc {
	t.Helper()
	v, err := codec.DecodeJSON([]byte(s), codec.DecodeOptions{Strict: true})
	if err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return v.(*sources.Doc)
}

func canonical(t *testing.T, b []byte) string {
	t.Helper()
	v, err := codec.DecodeJSON(b, codec.DecodeOptions{})
	if err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return string(codec.AppendCanonicalJSON(nil, v))
}

func jsonOf(docs []*sources.Doc) string {
	return string(codec.AppendJSON(nil, docs))
}

// The body we send is q.Search, byte for byte, to /<prefix>_<collection>/_search,
// with no parameters and plain JSON media types, in both versions.
func TestFindSendsTheBody(t *testing.T) {
	for _, v := range versions {
		for _, tc := range []struct {
			name, resource, index, body string
		}{
			{"default items list", "items", "superdesk_archive",
				`{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":25,"track_total_hits":10000}`},
			{"source with aggs", "items", "superdesk_archive",
				`{"query":{"bool":{"filter":[{"terms":{"type":["text","picture"]}}]}},"sort":[{"_updated":{"order":"desc"}}],"size":2,"from":1,` +
					`"aggs":{"type":{"terms":{"field":"type","size":10}}},"track_total_hits":10000}`},
			{"contacts default sort", "contacts", "superdesk_contacts",
				`{"query":{"bool":{}},"sort":[{"last_name.keyword":{"order":"asc"}}],"size":25,"track_total_hits":10000}`},
			{"events by date", "events", "superdesk_events",
				`{"query":{"bool":{"must":[{"query_string":{"query":"flood","lenient":true,"default_operator":"OR"}}]}},"sort":[{"dates.start":{"order":"asc"}}],"size":25,"track_total_hits":10000}`},
		} {
			t.Run(string(v)+"/"+tc.name, func(t *testing.T) {
				f := setup(t, estest.Options{Version: v}, 0)
				q := &sources.Query{Resource: resource(tc.resource), Page: 1, MaxResults: 25, Search: decode(t, tc.body)}
				f.store.Find(context.Background(), q) // events: the fake has no such index; the body is what counts

				reqs := f.fake.Searches()
				if len(reqs) != 1 {
					t.Fatalf("%d search requests, want 1", len(reqs))
				}
				r := reqs[0]
				if got, want := r.Method+" "+r.Path, "POST /"+tc.index+"/_search"; got != want {
					t.Errorf("request %q, want %q", got, want)
				}
				if len(r.Query) != 0 {
					t.Errorf("query parameters %v, want none", r.Query)
				}
				if diff := cmp.Diff(string(r.Body), tc.body); diff != "" {
					t.Errorf("body (-got +want):\n%s", diff)
				}
				if diff := cmp.Diff(canonical(t, r.Body), canonical(t, []byte(tc.body))); diff != "" {
					t.Errorf("canonical body (-got +want):\n%s", diff)
				}
				for h, want := range map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip", "Accept": "", "Accept-Encoding": ""} {
					if got := r.Header.Get(h); got != want {
						t.Errorf("%s: %q, want %q", h, got, want)
					}
				}
				if got := f.queries.Value("elastic", tc.resource, "search"); got != 1 {
					t.Errorf("queries{elastic,%s,search} = %d, want 1", tc.resource, got)
				}
				if got := f.queries.Timed("elastic", tc.resource, "search"); got != 1 {
					t.Errorf("timed queries{elastic,%s,search} = %d, want 1", tc.resource, got)
				}
			})
		}
	}
}

// Hits become documents: _source in its order, the hit's _id appended when
// the source has none, _resource removed, _updated a datetime.
func TestFindMapsHits(t *testing.T) {
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			f := setup(t, estest.Options{Version: v}, 0)
			q := &sources.Query{Resource: resource("items"), Page: 1, MaxResults: 25,
				Search: decode(t, `{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":25,"track_total_hits":10000}`)}
			res, err := f.store.Find(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			want := `[` +
				`{"guid":"urn:newsml:2","type":"picture","headline":"Bridge","state":"in_progress","_updated":"2024-01-16T10:00:00+0000","_id":"urn:newsml:2"},` +
				`{"guid":"urn:newsml:1","type":"text","headline":"Flood","state":"published","_updated":"2024-01-15T10:00:00+0000","versioncreated":"2024-01-15T10:00:00+0000","_id":"urn:newsml:1"},` +
				`{"guid":"urn:newsml:3","type":"text","headline":"Storm","state":"published","_updated":"2024-01-14T10:00:00+0000","assignment_id":"5f0c7c2e2b0b7a0a1c5e9a01","_id":"urn:newsml:3"}]`
			if diff := cmp.Diff(jsonOf(res.Docs), want); diff != "" {
				t.Errorf("docs (-got +want):\n%s", diff)
			}
			for _, d := range res.Docs {
				if u, _ := d.Get("_updated"); !isTime(u) {
					t.Errorf("_updated is %T, want time.Time", u)
				}
				if d.Has("_resource") {
					t.Errorf("_resource not removed: %s", codec.AppendJSON(nil, d))
				}
			}
			if res.Total != 3 || res.Aggregations != nil {
				t.Errorf("total %d, aggregations %v; want 3, nil", res.Total, res.Aggregations)
			}
		})
	}
}

func isTime(v any) bool { _, ok := v.(time.Time); return ok }

// A _source that carries _id keeps its own, in place.
func TestFindKeepsSourceID(t *testing.T) {
	f := setup(t, estest.Options{}, 0)
	f.fake.Fail(1, estest.Reply{Status: 200, Body: `{"took":1,"timed_out":false,"_shards":{"total":1,"successful":1,"skipped":0,"failed":0},` +
		`"hits":{"total":{"value":1,"relation":"eq"},"max_score":null,"hits":[{"_index":"superdesk_archive","_id":"hit-id","_score":null,` +
		`"_source":{"_id":"source-id","headline":"x","_resource":"archive","_created":"2024-01-15T10:00:00.000Z"}}]}}`})
	res, err := f.store.Find(context.Background(), &sources.Query{Resource: resource("items"), Search: decode(t, `{"size":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := jsonOf(res.Docs), `[{"_id":"source-id","headline":"x","_created":"2024-01-15T10:00:00+0000"}]`; got != want {
		t.Errorf("docs %s, want %s", got, want)
	}
}

func manyDocs(n int) []*sources.Doc {
	docs := make([]*sources.Doc, n)
	for i := range docs {
		docs[i] = sources.D("_id", fmt.Sprintf("urn:%05d", i), "type", "text")
	}
	return docs
}

// Totals come from hits.total in every form and saturate at 10000.
func TestFindTotals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		v      estest.Version
		asInt  bool
		n      int
		body   string
		want   int
		hitsIn int
	}{
		{"8.x exact", estest.V8, false, 30, `{"size":5,"track_total_hits":10000}`, 30, 5},
		{"7.17 exact", estest.V7, false, 30, `{"size":5,"track_total_hits":10000}`, 30, 5},
		{"8.x gte at 10000", estest.V8, false, 10001, `{"size":1,"track_total_hits":10000}`, 10000, 1},
		{"7.17 gte at 10000", estest.V7, false, 10001, `{"size":1,"track_total_hits":10000}`, 10000, 1},
		{"exact count saturates", estest.V8, false, 10005, `{"size":1,"track_total_hits":true}`, 10000, 1},
		{"int total", estest.V7, true, 42, `{"size":1,"track_total_hits":10000}`, 42, 1},
		{"int total saturates", estest.V7, true, 10002, `{"size":1,"track_total_hits":true}`, 10000, 1},
		{"no total: from + hits", estest.V8, false, 30, `{"size":5,"from":10,"track_total_hits":false}`, 15, 5},
		{"empty", estest.V8, false, 0, `{"size":5,"track_total_hits":10000}`, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t, estest.Options{Version: tc.v, TotalAsInt: tc.asInt, Docs: map[string][]*sources.Doc{"archive": manyDocs(tc.n)}}, 0)
			res, err := f.store.Find(context.Background(), &sources.Query{Resource: resource("items"), Search: decode(t, tc.body)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Total != tc.want || len(res.Docs) != tc.hitsIn {
				t.Errorf("total %d with %d docs, want %d with %d", res.Total, len(res.Docs), tc.want, tc.hitsIn)
			}
		})
	}
}

// Aggregations come back as Elasticsearch shaped them.
func TestFindAggregations(t *testing.T) {
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			f := setup(t, estest.Options{Version: v}, 0)
			body := `{"query":{"bool":{}},"size":0,"aggs":{"type":{"terms":{"field":"type","size":1},"aggs":{"state":{"terms":{"field":"state","size":5}}}}},"track_total_hits":10000}`
			res, err := f.store.Find(context.Background(), &sources.Query{Resource: resource("items"), Search: decode(t, body)})
			if err != nil {
				t.Fatal(err)
			}
			want := `{"type":{"doc_count_error_upper_bound":0,"sum_other_doc_count":1,"buckets":[{"key":"text","doc_count":2,` +
				`"state":{"doc_count_error_upper_bound":0,"sum_other_doc_count":0,"buckets":[{"key":"published","doc_count":2}]}}]}}`
			if diff := cmp.Diff(string(codec.AppendJSON(nil, res.Aggregations)), want); diff != "" {
				t.Errorf("aggregations (-got +want):\n%s", diff)
			}
			if len(res.Docs) != 0 || res.Total != 3 {
				t.Errorf("%d docs, total %d; want 0, 3", len(res.Docs), res.Total)
			}
		})
	}
}

func TestLookup(t *testing.T) {
	oid := func(s string) sources.ObjectID { id, _ := sources.ParseObjectID(s); return id }
	for _, v := range versions {
		for _, tc := range []struct {
			name     string
			lookup   sources.Lookup
			body     string // "" when no request is expected
			want     string
			resource string
		}{
			{"by coverage, sorted, no limit",
				sources.Lookup{Collection: "assignments", Field: "coverage_item", Search: true,
					Values: []any{"urn:coverage:1", "urn:coverage:2", "urn:coverage:1", "urn:coverage:9"},
					Sort:   []sources.SortKey{{Field: "_updated", Desc: true}}},
				`{"query":{"bool":{"filter":[{"terms":{"coverage_item":["urn:coverage:1","urn:coverage:2","urn:coverage:9"]}}]}},"sort":[{"_updated":{"order":"desc"}}],"size":10000,"track_total_hits":false}`,
				`[{"coverage_item":"urn:coverage:2","planning_item":"urn:planning:1","_updated":"2024-01-15T11:00:00+0000","_id":"5f0c7c2e2b0b7a0a1c5e9a02"},` +
					`{"coverage_item":"urn:coverage:1","planning_item":"urn:planning:1","_updated":"2024-01-15T09:00:00+0000","_id":"5f0c7c2e2b0b7a0a1c5e9a01"}]`,
				"assignments"},
			{"object ids as hex, limit",
				sources.Lookup{Collection: "archive", Field: "assignment_id", Search: true, Limit: 1,
					Values: []any{oid("5f0c7c2e2b0b7a0a1c5e9a01"), "5f0c7c2e2b0b7a0a1c5e9a01", nil}},
				`{"query":{"bool":{"filter":[{"terms":{"assignment_id":["5f0c7c2e2b0b7a0a1c5e9a01"]}}]}},"size":1,"track_total_hits":false}`,
				`[{"guid":"urn:newsml:3","type":"text","headline":"Storm","state":"published","_updated":"2024-01-14T10:00:00+0000","assignment_id":"5f0c7c2e2b0b7a0a1c5e9a01","_id":"urn:newsml:3"}]`,
				"items"},
			{"by _id, two sort keys",
				sources.Lookup{Collection: "assignments", Field: "_id", Search: true,
					Values: []any{oid("5f0c7c2e2b0b7a0a1c5e9a03"), oid("5f0c7c2e2b0b7a0a1c5e9a01")},
					Sort:   []sources.SortKey{{Field: "planning_item"}, {Field: "_updated", Desc: true}}},
				`{"query":{"bool":{"filter":[{"terms":{"_id":["5f0c7c2e2b0b7a0a1c5e9a03","5f0c7c2e2b0b7a0a1c5e9a01"]}}]}},"sort":[{"planning_item":{"order":"asc"}},{"_updated":{"order":"desc"}}],"size":10000,"track_total_hits":false}`,
				`[{"coverage_item":"urn:coverage:1","planning_item":"urn:planning:1","_updated":"2024-01-15T09:00:00+0000","_id":"5f0c7c2e2b0b7a0a1c5e9a01"},` +
					`{"coverage_item":"urn:coverage:3","planning_item":"urn:planning:2","_updated":"2024-01-15T12:00:00+0000","_id":"5f0c7c2e2b0b7a0a1c5e9a03"}]`,
				"assignments"},
			{"no values, no request",
				sources.Lookup{Collection: "assignments", Field: "coverage_item", Search: true, Values: []any{nil}},
				"", `[]`, "assignments"},
		} {
			t.Run(string(v)+"/"+tc.name, func(t *testing.T) {
				f := setup(t, estest.Options{Version: v}, 0)
				docs, err := f.store.Lookup(context.Background(), tc.lookup)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(jsonOf(docs), tc.want); diff != "" {
					t.Errorf("docs (-got +want):\n%s", diff)
				}
				reqs := f.fake.Searches()
				if tc.body == "" {
					if len(reqs) != 0 {
						t.Errorf("%d requests, want none", len(reqs))
					}
					return
				}
				if len(reqs) != 1 {
					t.Fatalf("%d requests, want 1", len(reqs))
				}
				if got, want := reqs[0].Path, "/superdesk_"+tc.lookup.Collection+"/_search"; got != want {
					t.Errorf("path %s, want %s", got, want)
				}
				if diff := cmp.Diff(string(reqs[0].Body), tc.body); diff != "" {
					t.Errorf("body (-got +want):\n%s", diff)
				}
				if got := f.queries.Value("elastic", tc.resource, "search"); got != 1 {
					t.Errorf("queries{elastic,%s,search} = %d, want 1", tc.resource, got)
				}
			})
		}
	}
}

var itemsList = `{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":25,"track_total_hits":10000}`

// Every failure becomes a sentinel; two error answers become empty results.
func TestFindErrors(t *testing.T) {
	for _, v := range versions {
		for _, tc := range []struct {
			name     string
			replies  []estest.Reply
			resource string
			want     error // nil: an empty result
			requests int   // how many attempts reached the fake
			esText   string
		}{
			{"unmapped sort field", []estest.Reply{{Status: 400, Body: string(estest.NoMapping("superdesk_archive", "nofield"))}}, "items", nil, 1, ""},
			{"sort on a field no document has", nil, "items-unmapped", nil, 1, ""},
			{"missing index", nil, "events", nil, 1, ""},
			{"parse error", []estest.Reply{{Status: 400, Body: string(estest.ParsingError("unknown query [foo]"))}}, "items", sources.ErrInvalid, 1, "unknown query [foo]"},
			{"shard query error", []estest.Reply{{Status: 400, Body: string(estest.ShardError("superdesk_archive",
				"Text fields are not optimised for operations that require per-document field data"))}}, "items", sources.ErrInvalid, 1, "Text fields are not optimised"},
			{"too many requests", []estest.Reply{{Status: 429, Body: string(estest.Rejected())}}, "items", sources.ErrUnavailable, 1, "es_rejected_execution_exception"},
			{"no shards, retried once", []estest.Reply{{Status: 503, Body: string(estest.NoShards())}, {Status: 503, Body: string(estest.NoShards())}}, "items", sources.ErrUnavailable, 2, "all shards failed"},
			{"bad gateway, retried once", []estest.Reply{{Status: 502, Body: "<html>bad gateway</html>"}, {Status: 502, Body: "<html>bad gateway</html>"}}, "items", sources.ErrUnavailable, 2, ""},
			{"gateway timeout", []estest.Reply{{Status: 504, Body: ""}, {Status: 504, Body: ""}}, "items", sources.ErrTimeout, 2, ""},
			{"unauthorised", []estest.Reply{{Status: 401, Body: string(estest.ErrorBody(401, "security_exception", "missing authentication credentials for REST request [/superdesk_archive/_search]", nil))}}, "items", sources.ErrUnavailable, 1, "security_exception"},
			{"timed out", []estest.Reply{{TimedOut: true}}, "items", sources.ErrPartial, 1, "timed_out"},
			{"failed shard", []estest.Reply{{FailedShards: 1}}, "items", sources.ErrPartial, 1, "node_not_connected_exception"},
			{"not JSON", []estest.Reply{{Status: 200, Body: "<html>proxy</html>"}}, "items", sources.ErrUnavailable, 1, ""},
		} {
			t.Run(string(v)+"/"+tc.name, func(t *testing.T) {
				f := setup(t, estest.Options{Version: v}, 0)
				for _, r := range tc.replies {
					f.fake.Fail(1, r)
				}
				body, name := itemsList, tc.resource
				if n, ok := strings.CutSuffix(tc.resource, "-unmapped"); ok {
					body, name = `{"query":{"bool":{}},"sort":[{"nofield.keyword":{"order":"asc"}}],"size":25}`, n
				}
				tc.resource = name
				res, err := f.store.Find(context.Background(), &sources.Query{Resource: resource(tc.resource), Search: decode(t, body)})
				if n := len(f.fake.Searches()); n != tc.requests {
					t.Errorf("%d requests, want %d", n, tc.requests)
				}
				if got := f.queries.Value("elastic", tc.resource, "search"); got != 1 {
					t.Errorf("counted %d queries, want 1", got)
				}
				for _, kind := range metrics.ErrorKinds {
					want := uint64(0)
					if kind == sources.FailureKind(tc.want) {
						want = 1
					}
					if got := f.queries.Errors("elastic", tc.resource, kind); got != want {
						t.Errorf("counted %d %s errors, want %d", got, kind, want)
					}
				}
				if tc.want == nil {
					if err != nil {
						t.Fatalf("error %v, want an empty result", err)
					}
					if res.Total != 0 || len(res.Docs) != 0 || res.Docs == nil {
						t.Errorf("result %+v, want empty", res)
					}
					return
				}
				if !errors.Is(err, tc.want) {
					t.Fatalf("error %v, want %v", err, tc.want)
				}
				e, ok := errors.AsType[*essrc.Error](err)
				if !ok {
					t.Fatalf("error %T, want *elastic.Error", err)
				}
				// The log gets Elasticsearch's words; the sentinel, which is
				// all the server shows a client, carries none of them.
				if !strings.Contains(err.Error(), tc.esText) || !strings.Contains(err.Error(), "superdesk_archive") {
					t.Errorf("error %q lacks %q for the log", err, tc.esText)
				}
				if tc.esText != "" && strings.Contains(e.Kind.Error(), tc.esText) {
					t.Errorf("sentinel %q carries Elasticsearch text", e.Kind)
				}
			})
		}
	}
}

// A retried 503 that then succeeds is a success, counted once.
func TestFindRetriesOnce(t *testing.T) {
	f := setup(t, estest.Options{}, 0)
	f.fake.Fail(1, estest.Reply{Status: 503, Body: string(estest.NoShards())})
	res, err := f.store.Find(context.Background(), &sources.Query{Resource: resource("items"), Search: decode(t, itemsList)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Total != 3 || len(f.fake.Searches()) != 2 || f.queries.Value("elastic", "items", "search") != 1 {
		t.Errorf("total %d after %d requests, %d counted; want 3 after 2, 1 counted", res.Total, len(f.fake.Searches()), f.queries.Value("elastic", "items", "search"))
	}
}

func TestLookupErrors(t *testing.T) {
	l := sources.Lookup{Collection: "assignments", Field: "coverage_item", Values: []any{"urn:coverage:1"}, Search: true,
		Sort: []sources.SortKey{{Field: "_updated"}}}
	f := setup(t, estest.Options{}, 0)
	unmapped := l
	unmapped.Sort = []sources.SortKey{{Field: "nofield"}}
	if docs, err := f.store.Lookup(context.Background(), unmapped); err != nil || len(docs) != 0 {
		t.Errorf("unmapped sort: %v, %v; want no documents", docs, err)
	}
	if docs, err := f.store.Lookup(context.Background(), l); err != nil || len(docs) != 1 {
		t.Errorf("lookup: %v, %v; want one document", docs, err)
	}
	f.fake.Fail(1, estest.Reply{Status: 429, Body: string(estest.Rejected())})
	if _, err := f.store.Lookup(context.Background(), l); !errors.Is(err, sources.ErrUnavailable) {
		t.Errorf("429: %v, want ErrUnavailable", err)
	}
	f.fake.Fail(1, estest.Reply{TimedOut: true})
	if _, err := f.store.Lookup(context.Background(), l); !errors.Is(err, sources.ErrPartial) {
		t.Errorf("timed out: %v, want ErrPartial", err)
	}
	f.fake.Fail(1, estest.Reply{Status: 400, Body: string(estest.ParsingError("[terms] unknown token [START_OBJECT]"))})
	if _, err := f.store.Lookup(context.Background(), l); !errors.Is(err, sources.ErrInvalid) {
		t.Errorf("400: %v, want ErrInvalid", err)
	}
}

// A server slower than the timeout costs the timeout, not more: the
// caller sets no deadline and the fake never answers, so only the
// store's timeout can end the request, as ErrTimeout, after one attempt.
// How long that took is the machine's business, not the test's.
func TestFindTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	f := setup(t, estest.Options{}, timeout)
	f.fake.Fail(0, estest.Reply{Hang: true})
	_, err := f.store.Find(context.Background(), &sources.Query{Resource: resource("items"), Search: decode(t, itemsList)})
	if !errors.Is(err, sources.ErrTimeout) {
		t.Fatalf("error %v, want ErrTimeout", err)
	}
	if n := len(f.fake.Searches()); n != 1 {
		t.Errorf("%d attempts, want 1 (no retry after a timeout)", n)
	}
	if err := f.store.Ping(context.Background()); !errors.Is(err, sources.ErrTimeout) {
		t.Errorf("ping: %v, want ErrTimeout", err)
	}

	// A response that starts and stalls times out while being read.
	f.fake.Clear()
	f.fake.Fail(1, estest.Reply{StallBody: true})
	if _, err := f.store.Find(context.Background(), &sources.Query{Resource: resource("items"), Search: decode(t, itemsList)}); !errors.Is(err, sources.ErrTimeout) {
		t.Errorf("stalled body: %v, want ErrTimeout", err)
	}
}

// The caller's cancellation is the caller's error, not a timeout.
func TestFindCancelled(t *testing.T) {
	f := setup(t, estest.Options{}, 0)
	held := make(chan struct{}, 1)
	f.fake.Fail(0, estest.Reply{Hang: true, Held: held})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { // ends when the fake holds the request (or the test ends)
		select {
		case <-held:
		case <-t.Context().Done():
		}
		cancel()
	}()
	_, err := f.store.Find(ctx, &sources.Query{Resource: resource("items"), Search: decode(t, itemsList)})
	if !errors.Is(err, context.Canceled) || errors.Is(err, sources.ErrTimeout) {
		t.Errorf("error %v, want context.Canceled", err)
	}
	for _, kind := range metrics.ErrorKinds {
		if n := f.queries.Errors("elastic", "items", kind); n != 0 {
			t.Errorf("a cancelled query counted as a %s error", kind)
		}
	}

	// The caller's own deadline is a timeout.
	dctx, dcancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer dcancel()
	if _, err := f.store.Find(dctx, &sources.Query{Resource: resource("items"), Search: decode(t, itemsList)}); !errors.Is(err, sources.ErrTimeout) {
		t.Errorf("expired deadline: %v, want ErrTimeout", err)
	}
	if n := f.queries.Errors("elastic", "items", metrics.KindTimeout); n != 1 {
		t.Errorf("counted %d timeouts, want 1", n)
	}
}

// Unreachable Elasticsearch fails fast as unavailable, and the same store
// works once Elasticsearch is there. Fast, shown without a stopwatch: the
// store's timeout is an hour and the caller sets no deadline, so an
// answer at all (ErrUnavailable, not ErrTimeout) means the refusal ended
// the request.
func TestUnreachableThenRecovers(t *testing.T) {
	url := estest.RefusedURL(t)
	f := fixture{}.connect(t, url, time.Hour)
	q := &sources.Query{Resource: resource("items"), Search: decode(t, itemsList)}
	_, err := f.store.Find(context.Background(), q)
	if !errors.Is(err, sources.ErrUnavailable) {
		t.Fatalf("refused: %v, want ErrUnavailable", err)
	}
	if err := f.store.Ping(context.Background()); !errors.Is(err, sources.ErrUnavailable) {
		t.Errorf("ping refused: %v, want ErrUnavailable", err)
	}

	fake := estest.New(t, estest.Options{Addr: strings.TrimPrefix(url, "http://"), Docs: newsroom()})
	if err := f.store.Ping(context.Background()); err != nil {
		t.Errorf("ping after recovery: %v", err)
	}
	res, err := f.store.Find(context.Background(), q)
	if err != nil || res.Total != 3 {
		t.Errorf("after recovery: %v, %v; want 3 documents", res, err)
	}
	if len(fake.Searches()) != 1 {
		t.Errorf("%d searches reached the fake, want 1", len(fake.Searches()))
	}
}

func TestUnresolvableHost(t *testing.T) {
	f := fixture{}.connect(t, "http://elasticsearch.invalid:9200", time.Second)
	_, err := f.store.Find(context.Background(), &sources.Query{Resource: resource("items"), Search: decode(t, itemsList)})
	if !errors.Is(err, sources.ErrUnavailable) && !errors.Is(err, sources.ErrTimeout) {
		t.Errorf("error %v, want ErrUnavailable (or ErrTimeout where DNS hangs)", err)
	}
}

func TestPing(t *testing.T) {
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			f := setup(t, estest.Options{Version: v}, 0)
			if err := f.store.Ping(context.Background()); err != nil {
				t.Errorf("ping: %v", err)
			}
			if reqs := f.fake.Requests(); len(reqs) != 1 || reqs[0].Method+" "+reqs[0].Path != "GET /" {
				t.Errorf("requests %v, want GET /", reqs)
			}
			f.fake.Fail(2, estest.Reply{Status: 503, Body: string(estest.ErrorBody(503, "master_not_discovered_exception", "", nil))})
			if err := f.store.Ping(context.Background()); !errors.Is(err, sources.ErrUnavailable) {
				t.Errorf("ping of a 503: %v, want ErrUnavailable", err)
			}
		})
	}
}

// A server that is not Elasticsearch fails the client's product check.
func TestProductCheck(t *testing.T) {
	f := setup(t, estest.Options{NoProductHeader: true}, 0)
	if _, err := f.store.Find(context.Background(), &sources.Query{Resource: resource("items"), Search: decode(t, itemsList)}); !errors.Is(err, sources.ErrUnavailable) {
		t.Errorf("find: %v, want ErrUnavailable", err)
	}
	if err := f.store.Ping(context.Background()); !errors.Is(err, sources.ErrUnavailable) {
		t.Errorf("ping: %v, want ErrUnavailable", err)
	}
}

// Elasticsearch 7.10 (Superdesk's) sends no X-Elastic-Product header:
// the client accepts it after one GET / per client, as the 7.x client
// did, and never asks again.
func TestProductCheckLegacy(t *testing.T) {
	fake := estest.New(t, estest.Options{Version: estest.V710, Docs: newsroom()})
	infos := func() int {
		n := 0
		for _, r := range fake.Requests() {
			if r.Method+" "+r.Path == "GET /" {
				n++
			}
		}
		return n
	}
	for client := 1; client <= 2; client++ {
		f := fixture{fake: fake}.connect(t, fake.URL, 0)
		for range 3 {
			res, err := f.store.Find(context.Background(), &sources.Query{Resource: resource("items"), Search: decode(t, itemsList)})
			if err != nil || res.Total != 3 {
				t.Fatalf("client %d: find: %v, %v", client, res, err)
			}
		}
		if err := f.store.Ping(context.Background()); err != nil {
			t.Errorf("client %d: ping: %v", client, err)
		}
		// One GET / for the check, one for the ping.
		if n := infos(); n != 2*client {
			t.Errorf("client %d: %d GET / so far, want %d: one check per client", client, n, 2*client)
		}
	}

	// A ping first checks the product on its own answer: no second GET /.
	fake.Clear()
	f := fixture{fake: fake}.connect(t, fake.URL, 0)
	if err := f.store.Ping(context.Background()); err != nil {
		t.Errorf("ping first: %v", err)
	}
	if _, err := f.store.Find(context.Background(), &sources.Query{Resource: resource("items"), Search: decode(t, itemsList)}); err != nil {
		t.Errorf("find after ping: %v", err)
	}
	if n := infos(); n != 1 {
		t.Errorf("%d GET / for a ping then a find, want 1", n)
	}
}

// Products that are not Elasticsearch stay refused, however much of its
// API they speak, and are asked again (not remembered as good) each time.
func TestProductCheckRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts estest.Options
	}{
		{"OpenSearch reporting 7.10.2", estest.Options{Product: estest.OpenSearch}},
		{"8.x without the header", estest.Options{Version: estest.V8, NoProductHeader: true}},
		{"7.17 without the header", estest.Options{Version: estest.V7, NoProductHeader: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t, tc.opts, 0)
			for range 2 {
				_, err := f.store.Find(context.Background(), &sources.Query{Resource: resource("items"), Search: decode(t, itemsList)})
				if !errors.Is(err, sources.ErrUnavailable) || !strings.Contains(err.Error(), "not Elasticsearch") {
					t.Errorf("find: %v, want ErrUnavailable from the product check", err)
				}
			}
			if err := f.store.Ping(context.Background()); !errors.Is(err, sources.ErrUnavailable) {
				t.Errorf("ping: %v, want ErrUnavailable", err)
			}
		})
	}
}

// ELASTIC_CLIENT_APIVERSIONING=true makes the v8 client send
// compatible-with=8, which 7.17 refuses; Config sends plain JSON anyway.
func TestCompatibilityHeadersNeutralised(t *testing.T) {
	t.Setenv("ELASTIC_CLIENT_APIVERSIONING", "true")
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			f := setup(t, estest.Options{Version: v}, 0)
			res, err := f.store.Find(context.Background(), &sources.Query{Resource: resource("items"), Search: decode(t, itemsList)})
			if err != nil || res.Total != 3 {
				t.Fatalf("find: %v, %v", res, err)
			}
			r := f.fake.Searches()[0]
			if got := r.Header.Get("Content-Type") + "|" + r.Header.Get("Accept"); got != "application/json|application/json" {
				t.Errorf("media types %q, want application/json for both", got)
			}
		})
	}

	// Without the interceptor, 7.17 refuses the request: a configuration
	// fault, unavailable, not the client's 400.
	fake := estest.New(t, estest.Options{Version: estest.V7, Docs: newsroom()})
	cfg := essrc.Config(fake.URL, 0)
	cfg.Interceptors = nil
	client, err := elasticsearch.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	store := essrc.New(client, essrc.Options{Index: "superdesk"})
	_, err = store.Find(context.Background(), &sources.Query{Resource: resource("items"), Search: decode(t, itemsList)})
	if e, ok := errors.AsType[*essrc.Error](err); !ok || e.Type != "media_type_header_exception" || !errors.Is(err, sources.ErrUnavailable) {
		t.Errorf("compatible-with=8 against 7.17: %v, want ErrUnavailable from media_type_header_exception", err)
	}
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{"", []string{"http://localhost:9200"}},
		{"http://es:9200", []string{"http://es:9200"}},
		{" http://es1:9200 , http://es2:9200,", []string{"http://es1:9200", "http://es2:9200"}},
	} {
		cfg := essrc.Config(tc.url, 0)
		if diff := cmp.Diff(cfg.Addresses, tc.want); diff != "" {
			t.Errorf("Config(%q).Addresses (-got +want):\n%s", tc.url, diff)
		}
		if cfg.MaxRetries != 1 || cfg.EnableCompatibilityMode || !cfg.CompressRequestBody {
			t.Errorf("Config(%q): retries %d, compatibility %v, compression %v", tc.url, cfg.MaxRetries, cfg.EnableCompatibilityMode, cfg.CompressRequestBody)
		}
		tr, ok := cfg.Transport.(*http.Transport)
		if !ok || tr.ResponseHeaderTimeout != essrc.DefaultTimeout {
			t.Errorf("Config(%q).Transport: %T without the default response-header timeout", tc.url, cfg.Transport)
		}
	}
}
