package query

import (
	"strings"
	"testing"

	"github.com/prodapi/prodapi/sources/codec"
)

func canonical(t *testing.T, s string) string {
	t.Helper()
	v, err := codec.DecodeJSON([]byte(s), codec.DecodeOptions{Strict: true})
	if err != nil {
		t.Fatalf("bad JSON in test: %v: %s", err, s)
	}
	return string(codec.AppendCanonicalJSON(nil, v))
}

// TestDefaultBody pins the exact bytes of the plainest list body.
func TestDefaultBody(t *testing.T) {
	q, err := Parse(resource(t, "items"), "", "")
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":25,"track_total_hits":10000}`
	if got := js(q.Search); got != want {
		t.Errorf("body:\n got %s\nwant %s", got, want)
	}
	if q.Where != nil || len(q.Sort) > 0 || len(q.Params) > 0 {
		t.Errorf("Where, Sort, Params = %v, %v, %v; want none on a search list", q.Where, q.Sort, q.Params)
	}
}

// TestQueryNormalisation runs each query through the filter parameter:
// the body's filter clause is the normalised long form, and so is the
// canonical parameter.
func TestQueryNormalisation(t *testing.T) {
	for _, tc := range []struct {
		name, res, in, out string
	}{
		{"term short", "items", `{"term":{"state":"published"}}`, `{"term":{"state":{"value":"published"}}}`},
		{"term long", "items", `{"term":{"urgency":{"case_insensitive":true,"boost":2,"value":3}}}`,
			`{"term":{"urgency":{"value":3,"boost":2,"case_insensitive":true}}}`},
		{"term _type", "items", `{"term":{"_type":"archive"}}`, `{"term":{"_resource":{"value":"archive"}}}`},
		{"term highlight field", "items", `{"term":{"highlight":"h1"}}`, `{"term":{"highlight":{"value":"h1"}}}`},
		{"terms", "items", `{"terms":{"boost":1.5,"type":["text","picture",1,true]}}`, `{"terms":{"type":["text","picture",1,true],"boost":1.5}}`},
		{"terms empty", "items", `{"terms":{"type":[]}}`, `{"terms":{"type":[]}}`},
		{"match short", "items", `{"match":{"headline":"flood"}}`, `{"match":{"headline":{"query":"flood"}}}`},
		{"match long", "items", `{"match":{"headline":{"zero_terms_query":"ALL","lenient":true,"boost":1,"minimum_should_match":"75%","operator":"AND","query":"a b"}}}`,
			`{"match":{"headline":{"query":"a b","operator":"and","minimum_should_match":"75%","boost":1,"lenient":true,"zero_terms_query":"all"}}}`},
		{"match_phrase", "items", `{"match_phrase":{"body_html":"big flood"}}`, `{"match_phrase":{"body_html":{"query":"big flood"}}}`},
		{"match_phrase long", "items", `{"match_phrase":{"body_html":{"query":"big flood","slop":2,"boost":3}}}`, `{"match_phrase":{"body_html":{"query":"big flood","slop":2,"boost":3}}}`},
		{"match_phrase_prefix", "items", `{"match_phrase_prefix":{"headline":{"max_expansions":10,"query":"flo"}}}`, `{"match_phrase_prefix":{"headline":{"query":"flo","max_expansions":10}}}`},
		{"multi_match", "items", `{"multi_match":{"operator":"And","type":"PHRASE","fields":["headline^2","body_*"],"query":"x"}}`,
			`{"multi_match":{"query":"x","fields":["headline^2","body_*"],"type":"phrase","operator":"and"}}`},
		{"multi_match one field", "items", `{"multi_match":{"fields":"headline","query":"x"}}`, `{"multi_match":{"query":"x","fields":["headline"]}}`},
		{"match_all", "items", `{"match_all":{}}`, `{"match_all":{}}`},
		{"match_all boost", "items", `{"match_all":{"boost":1.2}}`, `{"match_all":{"boost":1.2}}`},
		{"match_none", "items", `{"match_none":{}}`, `{"match_none":{}}`},
		{"range", "items", `{"range":{"versioncreated":{"boost":1,"relation":"within","time_zone":"+01:00","format":"yyyy","lte":"now","gt":"now-1d"}}}`,
			`{"range":{"versioncreated":{"gt":"now-1d","lte":"now","format":"yyyy","time_zone":"+01:00","relation":"WITHIN","boost":1}}}`},
		{"range legacy inclusive", "items", `{"range":{"urgency":{"from":1,"to":3}}}`, `{"range":{"urgency":{"gte":1,"lte":3}}}`},
		{"range legacy exclusive", "items", `{"range":{"urgency":{"from":1,"to":3,"include_lower":false,"include_upper":false}}}`, `{"range":{"urgency":{"gt":1,"lt":3}}}`},
		{"range legacy open", "items", `{"range":{"urgency":{"from":null,"to":3,"include_upper":true}}}`, `{"range":{"urgency":{"lte":3}}}`},
		{"range null bound", "items", `{"range":{"urgency":{"gt":null,"lt":3}}}`, `{"range":{"urgency":{"lt":3}}}`},
		{"range queryable timestamp", "items", `{"range":{"_updated":{"gte":"2019-01-01"}}}`, `{"range":{"_updated":{"gte":"2019-01-01"}}}`},
		{"exists", "items", `{"exists":{"field":"headline"}}`, `{"exists":{"field":"headline"}}`},
		{"exists pattern", "items", `{"exists":{"field":"head*"}}`, `{"exists":{"field":"head*"}}`},
		{"ids", "items", `{"ids":{"values":["a","b"]}}`, `{"ids":{"values":["a","b"]}}`},
		{"prefix short", "items", `{"prefix":{"slugline":"flo"}}`, `{"prefix":{"slugline":{"value":"flo"}}}`},
		{"prefix long", "items", `{"prefix":{"slugline":{"boost":2,"value":"flo","case_insensitive":true}}}`, `{"prefix":{"slugline":{"value":"flo","case_insensitive":true,"boost":2}}}`},
		{"wildcard short", "items", `{"wildcard":{"slugline":"fl*d"}}`, `{"wildcard":{"slugline":{"value":"fl*d"}}}`},
		{"wildcard legacy key", "items", `{"wildcard":{"slugline":{"wildcard":"fl*d","boost":2}}}`, `{"wildcard":{"slugline":{"value":"fl*d","boost":2}}}`},
		{"query_string gets lenient", "items", `{"query_string":{"query":"headline:flood"}}`, `{"query_string":{"query":"headline:flood","lenient":true}}`},
		{"query_string keeps lenient", "items", `{"query_string":{"lenient":false,"default_operator":"and","fields":["headline","slug*^2"],"default_field":"body_html","query":"x","phrase_slop":1,"analyze_wildcard":true}}`,
			`{"query_string":{"query":"x","default_field":"body_html","fields":["headline","slug*^2"],"default_operator":"AND","lenient":false,"analyze_wildcard":true,"phrase_slop":1}}`},
		{"simple_query_string", "items", `{"simple_query_string":{"query":"a +b","fields":["headline"],"default_operator":"or","flags":"AND|OR"}}`,
			`{"simple_query_string":{"query":"a +b","fields":["headline"],"default_operator":"OR","flags":"AND|OR"}}`},
		{"nested query", "items", `{"nested":{"path":"subject","query":{"term":{"subject.qcode":"01"}},"score_mode":"MAX"}}`,
			`{"nested":{"path":"subject","query":{"term":{"subject.qcode":{"value":"01"}}},"score_mode":"max"}}`},
		{"nested legacy filter", "items", `{"nested":{"path":"subject","filter":{"term":{"subject.qcode":"01"}}}}`,
			`{"nested":{"path":"subject","query":{"bool":{"filter":[{"term":{"subject.qcode":{"value":"01"}}}]}}}}`},
		{"constant_score", "items", `{"constant_score":{"filter":{"term":{"a":1}},"boost":2}}`, `{"constant_score":{"filter":{"term":{"a":{"value":1}}},"boost":2}}`},
		{"dis_max", "items", `{"dis_max":{"queries":[{"term":{"a":1}},{}],"tie_breaker":0.7}}`, `{"dis_max":{"queries":[{"term":{"a":{"value":1}}}],"tie_breaker":0.7}}`},
		{"bool clauses become arrays", "items", `{"bool":{"_name":"n","boost":1,"minimum_should_match":1,"must_not":{"term":{"a":1}},"should":[{"term":{"b":1}}],"filter":{"term":{"c":1}},"must":{"match_all":{}}}}`,
			`{"bool":{"must":[{"match_all":{}}],"filter":[{"term":{"c":{"value":1}}}],"should":[{"term":{"b":{"value":1}}}],"must_not":[{"term":{"a":{"value":1}}}],"minimum_should_match":1,"boost":1,"_name":"n"}}`},
		{"bool empty clauses dropped", "items", `{"bool":{"must":[],"filter":{},"should":[{}],"must_not":null}}`, `{"bool":{}}`},
		{"filtered", "items", `{"filtered":{"query":{"match":{"a":"x"}},"filter":{"term":{"b":1}}}}`,
			`{"bool":{"must":[{"match":{"a":{"query":"x"}}}],"filter":[{"term":{"b":{"value":1}}}]}}`},
		{"filtered empty filter", "items", `{"filtered":{"filter":{},"query":{"match_all":{}}}}`, `{"bool":{"must":[{"match_all":{}}]}}`},
		{"and", "items", `{"and":[{"term":{"a":1}},{"term":{"b":2}}]}`, `{"bool":{"must":[{"term":{"a":{"value":1}}},{"term":{"b":{"value":2}}}]}}`},
		{"or", "items", `{"or":[{"term":{"a":1}},{"term":{"b":2}}]}`, `{"bool":{"should":[{"term":{"a":{"value":1}}},{"term":{"b":{"value":2}}}],"minimum_should_match":1}}`},
		{"not", "items", `{"not":{"term":{"a":1}}}`, `{"bool":{"must_not":[{"term":{"a":{"value":1}}}]}}`},
		{"not filter", "items", `{"not":{"filter":{"term":{"a":1}}}}`, `{"bool":{"must_not":[{"term":{"a":{"value":1}}}]}}`},
		{"query wrapper", "items", `{"bool":{"must":[{"query":{"match":{"a":"x"}}}]}}`, `{"bool":{"must":[{"bool":{"must":[{"match":{"a":{"query":"x"}}}]}}]}}`},
		{"legacy keys merge", "items", `{"and":[{"term":{"a":1}}],"not":{"term":{"b":1}}}`, `{"bool":{"must":[{"term":{"a":{"value":1}}}],"must_not":[{"term":{"b":{"value":1}}}]}}`},
		{"legacy inside bool", "items", `{"bool":{"must":{"filtered":{"filter":{"or":[{"term":{"a":1}}]}}}}}`,
			`{"bool":{"must":[{"bool":{"filter":[{"bool":{"should":[{"term":{"a":{"value":1}}}],"minimum_should_match":1}}]}}]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := resource(t, tc.res)
			q, err := Parse(r, "", qs("filter", tc.in))
			if err != nil {
				t.Fatal(err)
			}
			check(t, q, want{
				search: defaultBody(`{"bool":{"filter":[`+tc.out+`]}}`, js(sortBody(r.DefaultSort)), 25),
				params: []sourcesParam{p("filter", canonical(t, tc.out))},
			})
		})
	}
}

func TestSource(t *testing.T) {
	for _, tc := range []struct {
		name, res, raw string
		body           string
		params         []sourcesParam
	}{
		{"the original's filtered example", "items",
			qs("source", `{"query":{"filtered":{"filter":{"terms":{"type":["text"]}}}},"size":3,"from":7}`, "page", "2"),
			`{"query":{"bool":{"must":[{"bool":{"filter":[{"terms":{"type":["text"]}}]}}]}},"sort":[{"_updated":{"order":"desc"}}],"size":3,"from":7,"track_total_hits":10000}`,
			[]sourcesParam{p("source", `{"from":7,"query":{"bool":{"must":[{"bool":{"filter":[{"terms":{"type":["text"]}}]}}]}},"size":3}`)}},
		{"the original's where and filter example", "items",
			qs("where", `{"type":"text"}`, "filter", `{"term":{"state":"published"}}`),
			`{"query":{"bool":{"filter":[{"term":{"state":{"value":"published"}}},{"term":{"type":{"value":"text"}}}]}},"sort":[{"_updated":{"order":"desc"}}],"size":25,"track_total_hits":10000}`,
			[]sourcesParam{p("where", `{"type":"text"}`), p("filter", `{"term":{"state":{"value":"published"}}}`)}},
		{"upstream test_items test_filters", "items",
			qs("source", `{"query":{"filtered":{"filter":{"terms":{"task.desk":["7777777775ec40943b60e"]}}}}}`),
			`{"query":{"bool":{"must":[{"bool":{"filter":[{"terms":{"task.desk":["7777777775ec40943b60e"]}}]}}]}},"sort":[{"_updated":{"order":"desc"}}],"size":25,"track_total_hits":10000}`,
			[]sourcesParam{p("source", `{"query":{"bool":{"must":[{"bool":{"filter":[{"terms":{"task.desk":["7777777775ec40943b60e"]}}]}}]}}}`)}},
		{"upstream test_contacts terms", "contacts",
			qs("source", `{"query":{"terms":{"first_name":["brett"]}}}`),
			`{"query":{"bool":{"must":[{"terms":{"first_name":["brett"]}}]}},"sort":[{"last_name.keyword":{"order":"asc"}}],"size":25,"track_total_hits":10000}`,
			[]sourcesParam{p("source", `{"query":{"bool":{"must":[{"terms":{"first_name":["brett"]}}]}}}`)}},
		{"upstream test_contacts filtered bool", "contacts",
			qs("source", `{"query":{"filtered":{"filter":{"bool":{"must":{"term":{"is_active":false}}}}}}}`),
			`{"query":{"bool":{"must":[{"bool":{"filter":[{"bool":{"must":[{"term":{"is_active":{"value":false}}}]}}]}}]}},"sort":[{"last_name.keyword":{"order":"asc"}}],"size":25,"track_total_hits":10000}`,
			[]sourcesParam{p("source", `{"query":{"bool":{"must":[{"bool":{"filter":[{"bool":{"must":[{"term":{"is_active":{"value":false}}}]}}]}}]}}}`)}},
		{"bool only is kept", "items", qs("source", `{"query":{"bool":{"must":{"term":{"a":1}}}}}`),
			defaultBody(`{"bool":{"must":[{"term":{"a":{"value":1}}}]}}`, itemsSort, 25),
			[]sourcesParam{p("source", `{"query":{"bool":{"must":[{"term":{"a":{"value":1}}}]}}}`)}},
		{"bool and other keys merge", "items", qs("source", `{"query":{"bool":{"filter":{"term":{"a":1}}},"match":{"b":"x"}}}`),
			defaultBody(`{"bool":{"must":[{"match":{"b":{"query":"x"}}}],"filter":[{"term":{"a":{"value":1}}}]}}`, itemsSort, 25),
			[]sourcesParam{p("source", `{"query":{"bool":{"filter":[{"term":{"a":{"value":1}}}],"must":[{"match":{"b":{"query":"x"}}}]}}}`)}},
		{"should-only bool keeps its meaning when clauses are added", "items", qs("source", `{"query":{"bool":{"should":[{"term":{"a":1}}]}}}`, "where", `{"b":2}`),
			defaultBody(`{"bool":{"filter":[{"term":{"b":{"value":2}}}],"should":[{"term":{"a":{"value":1}}}],"minimum_should_match":1}}`, itemsSort, 25),
			[]sourcesParam{p("where", `{"b":2}`), p("source", `{"query":{"bool":{"should":[{"term":{"a":{"value":1}}}]}}}`)}},
		{"top-level legacy filter", "items", qs("source", `{"filter":{"term":{"a":1}},"query":{"match":{"b":"x"}}}`),
			defaultBody(`{"bool":{"must":[{"match":{"b":{"query":"x"}}}],"filter":[{"term":{"a":{"value":1}}}]}}`, itemsSort, 25),
			[]sourcesParam{p("source", `{"query":{"bool":{"filter":[{"term":{"a":{"value":1}}}],"must":[{"match":{"b":{"query":"x"}}}]}}}`)}},
		{"top-level legacy filter list", "items", qs("source", `{"filter":[{"term":{"a":1}},{}]}`),
			defaultBody(`{"bool":{"filter":[{"term":{"a":{"value":1}}}]}}`, itemsSort, 25),
			[]sourcesParam{p("source", `{"query":{"bool":{"filter":[{"term":{"a":{"value":1}}}]}}}`)}},
		{"empty source", "items", qs("source", `{}`), defaultBody(`{"bool":{}}`, itemsSort, 25), nil},
		{"empty query", "items", qs("source", `{"query":{}}`), defaultBody(`{"bool":{}}`, itemsSort, 25), nil},
		{"track_total_hits is forced", "items", qs("source", `{"track_total_hits":true}`), defaultBody(`{"bool":{}}`, itemsSort, 25), nil},
		{"track_total_hits int", "items", qs("source", `{"track_total_hits":5,"size":2}`), defaultBody(`{"bool":{}}`, itemsSort, 2),
			[]sourcesParam{p("source", `{"size":2}`)}},
		{"size clamps at 500", "items", qs("source", `{"size":1000}`), defaultBody(`{"bool":{}}`, itemsSort, 500),
			[]sourcesParam{p("source", `{"size":500}`)}},
		{"size zero", "items", qs("source", `{"size":0}`), defaultBody(`{"bool":{}}`, itemsSort, 0), []sourcesParam{p("source", `{"size":0}`)}},
		{"from zero is kept but not sent", "items", qs("source", `{"from":0}`, "page", "3"), defaultBody(`{"bool":{}}`, itemsSort, 25),
			[]sourcesParam{p("source", `{"from":0}`)}},
		{"page sets from", "items", qs("page", "3", "max_results", "10"),
			`{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":10,"from":20,"track_total_hits":10000}`, nil},
		{"source size does not change from", "items", qs("source", `{"size":5}`, "page", "3", "max_results", "10"),
			`{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":5,"from":20,"track_total_hits":10000}`, []sourcesParam{p("source", `{"size":5}`)}},
		{"from+size at the window", "items", qs("source", `{"from":9500,"size":500}`),
			`{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":500,"from":9500,"track_total_hits":10000}`,
			[]sourcesParam{p("source", `{"from":9500,"size":500}`)}},
		{"sort forms", "items", qs("source", `{"sort":["headline",{"urgency":"DESC"},{"_score":{}},"_doc",{"a":"asc","b":{"order":"desc","missing":"_first","unmapped_type":"long","mode":"MIN"}}]}`),
			defaultBody(`{"bool":{}}`, `[{"headline":{"order":"asc"}},{"urgency":{"order":"desc"}},{"_score":{"order":"desc"}},{"_doc":{"order":"asc"}},{"a":{"order":"asc"}},{"b":{"order":"desc","missing":"_first","unmapped_type":"long","mode":"min"}}]`, 25),
			[]sourcesParam{p("source", `{"sort":[{"headline":{"order":"asc"}},{"urgency":{"order":"desc"}},{"_score":{"order":"desc"}},{"_doc":{"order":"asc"}},{"a":{"order":"asc"}},{"b":{"missing":"_first","mode":"min","order":"desc","unmapped_type":"long"}}]}`)}},
		{"sort single object", "items", qs("source", `{"sort":{"_type":"asc"}}`),
			defaultBody(`{"bool":{}}`, `[{"_resource":{"order":"asc"}}]`, 25), []sourcesParam{p("source", `{"sort":[{"_resource":{"order":"asc"}}]}`)}},
		{"sort empty", "items", qs("source", `{"sort":[]}`), defaultBody(`{"bool":{}}`, `[]`, 25), []sourcesParam{p("source", `{"sort":[]}`)}},
		{"sort nested keeps its filter a filter", "planning", qs("source", `{"sort":[{"coverages.planning.scheduled":{"order":"asc","nested":{"path":"coverages","filter":{"term":{"coverages.a":1}}}}}]}`),
			defaultBody(`{"bool":{}}`, `[{"coverages.planning.scheduled":{"order":"asc","nested":{"path":"coverages","filter":{"term":{"coverages.a":{"value":1}}}}}}]`, 25),
			[]sourcesParam{p("source", `{"sort":[{"coverages.planning.scheduled":{"nested":{"filter":{"term":{"coverages.a":{"value":1}}},"path":"coverages"},"order":"asc"}}]}`)}},
		{"sort legacy nested_path", "planning", qs("source", `{"sort":[{"coverages.x":{"nested_path":"coverages","nested_filter":{"and":[{"term":{"coverages.a":1}}]}}}]}`),
			defaultBody(`{"bool":{}}`, `[{"coverages.x":{"order":"asc","nested":{"path":"coverages","filter":{"bool":{"must":[{"term":{"coverages.a":{"value":1}}}]}}}}}]`, 25),
			[]sourcesParam{p("source", `{"sort":[{"coverages.x":{"nested":{"filter":{"bool":{"must":[{"term":{"coverages.a":{"value":1}}}]}},"path":"coverages"},"order":"asc"}}]}`)}},
		{"aggregations", "items", qs("source", `{"size":0,"aggregations":{"type":{"terms":{"field":"type"}},"desk":{"terms":{"field":"task.desk","size":5,"order":{"_term":"ASC"},"min_doc_count":1,"missing":"none","include":["a"],"exclude":["b"]},"aggregations":{"stage":{"terms":{"field":"task.stage","order":[{"_count":"desc"},{"_key":"asc"}]}}}}}}`),
			`{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":0,"aggs":{"desk":{"terms":{"field":"task.desk","size":5,"order":{"_key":"asc"},"min_doc_count":1,"missing":"none","include":["a"],"exclude":["b"]},"aggs":{"stage":{"terms":{"field":"task.stage","size":10,"order":[{"_count":"desc"},{"_key":"asc"}]}}}},"type":{"terms":{"field":"type","size":10}}},"track_total_hits":10000}`,
			[]sourcesParam{p("source", `{"aggs":{"desk":{"aggs":{"stage":{"terms":{"field":"task.stage","order":[{"_count":"desc"},{"_key":"asc"}],"size":10}}},"terms":{"exclude":["b"],"field":"task.desk","include":["a"],"min_doc_count":1,"missing":"none","order":{"_key":"asc"},"size":5}},"type":{"terms":{"field":"type","size":10}}},"size":0}`)}},
		{"empty aggs", "items", qs("source", `{"aggs":{}}`), defaultBody(`{"bool":{}}`, itemsSort, 25), nil},
		{"post_filter", "items", qs("source", `{"post_filter":{"terms":{"type":["text"]}}}`),
			`{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":25,"post_filter":{"terms":{"type":["text"]}},"track_total_hits":10000}`,
			[]sourcesParam{p("source", `{"post_filter":{"terms":{"type":["text"]}}}`)}},
		{"_source false", "items", qs("source", `{"_source":false}`),
			`{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":25,"_source":false,"track_total_hits":10000}`,
			[]sourcesParam{p("source", `{"_source":false}`)}},
		{"_source true", "items", qs("source", `{"_source":true}`), defaultBody(`{"bool":{}}`, itemsSort, 25), nil},
		{"_source string", "items", qs("source", `{"_source":"headline"}`),
			`{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":25,"_source":{"includes":["headline"]},"track_total_hits":10000}`,
			[]sourcesParam{p("source", `{"_source":{"includes":["headline"]}}`)}},
		{"_source legacy include/exclude", "items", qs("source", `{"_source":{"exclude":"body_*","include":["slugline","headline","slugline"]}}`),
			`{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":25,"_source":{"includes":["headline","slugline"],"excludes":["body_*"]},"track_total_hits":10000}`,
			[]sourcesParam{p("source", `{"_source":{"excludes":["body_*"],"includes":["headline","slugline"]}}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Parse(resource(t, tc.res), "", tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			check(t, q, want{search: tc.body, params: tc.params})
		})
	}
}

func TestTextSearch(t *testing.T) {
	for _, tc := range []struct {
		name, raw, query string
		params           []sourcesParam
	}{
		{"q", qs("q", "flood"), `{"bool":{"must":[{"query_string":{"query":"flood","default_operator":"OR","lenient":true}}]}}`,
			[]sourcesParam{p("q", "flood")}},
		{"q df and", qs("q", "a b", "df", "headline", "default_operator", "and"),
			`{"bool":{"must":[{"query_string":{"query":"a b","default_field":"headline","default_operator":"AND","lenient":true}}]}}`,
			[]sourcesParam{p("default_operator", "AND"), p("df", "headline"), p("q", "a b")}},
		{"default operator OR elided", qs("q", "x", "default_operator", "or"),
			`{"bool":{"must":[{"query_string":{"query":"x","default_operator":"OR","lenient":true}}]}}`, []sourcesParam{p("q", "x")}},
		{"quoted q with df is a phrase", qs("q", ` "big flood" `, "df", "body_html"),
			`{"bool":{"must":[{"match_phrase":{"body_html":{"query":"big flood"}}}]}}`,
			[]sourcesParam{p("df", "body_html"), p("q", ` "big flood" `)}},
		{"quoted q without df is a query string", qs("q", `"big flood"`),
			`{"bool":{"must":[{"query_string":{"query":"\"big flood\"","default_operator":"OR","lenient":true}}]}}`,
			[]sourcesParam{p("q", `"big flood"`)}},
		{"df and operator without q are not keyed", qs("df", "headline", "default_operator", "AND"), `{"bool":{}}`, nil},
		{"q with a source lacking a query", qs("q", "x", "source", `{"size":2}`),
			`{"bool":{"must":[{"query_string":{"query":"x","default_operator":"OR","lenient":true}}]}}`,
			[]sourcesParam{p("q", "x"), p("source", `{"size":2}`)}},
		{"q, source, filter and where", qs("q", "x", "source", `{"query":{"term":{"a":1}}}`, "filter", `{"term":{"b":1}}`, "where", `{"c":1}`),
			`{"bool":{"must":[{"term":{"a":{"value":1}}},{"query_string":{"query":"x","default_operator":"OR","lenient":true}}],"filter":[{"term":{"b":{"value":1}}},{"term":{"c":{"value":1}}}]}}`,
			[]sourcesParam{p("where", `{"c":1}`), p("filter", `{"term":{"b":{"value":1}}}`), p("q", "x"), p("source", `{"query":{"bool":{"must":[{"term":{"a":{"value":1}}}]}}}`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Parse(resource(t, "items"), "", tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			size := 25
			if strings.Contains(tc.raw, "size") {
				size = 2
			}
			check(t, q, want{search: defaultBody(tc.query, itemsSort, size), params: tc.params})
		})
	}
	for _, tc := range []struct {
		name, raw string
		want      refusal
	}{
		{"bad operator", qs("q", "x", "default_operator", "XOR"), refusal{400, "default_operator: must be AND or OR"}},
		{"bad operator without q", qs("default_operator", "NOT"), refusal{400, "default_operator: must be AND or OR"}},
		{"hidden df", qs("q", "x", "df", "lock_user"), refusal{400, `df: field "lock_user" cannot be used`}},
		{"hidden df phrase", qs("q", `"x"`, "df", "lock_session"), refusal{400, `df: field "lock_session" cannot be used`}},
		{"hidden field in q", qs("q", "flood AND lock_user:abc"), refusal{400, `q: field "lock_user" cannot be used`}},
		{"hidden escaped field in q", qs("q", `lock\_user:abc`), refusal{400, `q: field "lock_user" cannot be used`}},
		{"hidden pattern in q", qs("q", `lock\*:abc`), refusal{400, `q: field "lock*" cannot be used`}},
		{"hidden multi-field in q", qs("q", `unique_id.keyword:1`), refusal{400, `cannot be used`}},
		{"hidden nested in q", qs("q", `associations.x.lock_time:[* TO *]`), refusal{400, `cannot be used`}},
		{"_exists_ hidden", qs("q", `_exists_:lock_user`), refusal{400, `q: field "lock_user" cannot be used`}},
		{"all fields by star", qs("q", `*:x`), refusal{400, `q: field "*" cannot be used`}},
		{"invalid df", qs("q", "x", "df", "a..b"), refusal{400, "df: field name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(resource(t, "items"), "", tc.raw)
			checkErr(t, err, tc.want)
		})
	}
}

func TestSourceRefused(t *testing.T) {
	deepNot := strings.Repeat(`{"not":`, 25) + `{"match_all":{}}` + strings.Repeat(`}`, 25)
	manyAggs := `{"a":{"terms":{"field":"a","size":500},"aggs":{"b":{"terms":{"field":"b","size":21}}}}}`
	for _, tc := range []struct {
		name, res, source string
		want              refusal
	}{
		// Not an object, not JSON.
		{"bad JSON", "items", `{"query":`, refusal{400, "source: invalid JSON"}},
		{"array", "items", `[]`, refusal{400, "source: must be a JSON object"}},
		{"duplicate keys", "items", `{"size":1,"size":2}`, refusal{400, `source: invalid JSON: duplicate key "size"`}},
		{"trailing data", "items", `{}x`, refusal{400, "unexpected data after the JSON value"}},
		{"invalid UTF-8 escape", "items", `{"query":{"term":{"a":"\ud800"}}}`, refusal{400, "unpaired surrogate"}},
		{"too deep", "items", strings.Repeat(`[`, 33) + strings.Repeat(`]`, 33), refusal{400, "nested more than 32 levels deep"}},
		// Refused features, wherever they are.
		{"script query", "items", `{"query":{"script":{"script":"1"}}}`, refusal{400, `source: query.script: "script" is not allowed`}},
		{"script in bool", "items", `{"query":{"bool":{"filter":[{"script":{}}]}}}`, refusal{400, `"script" is not allowed`}},
		{"script_score", "items", `{"query":{"script_score":{}}}`, refusal{400, `"script_score" is not allowed`}},
		{"function_score", "items", `{"query":{"function_score":{"query":{}}}}`, refusal{400, `"function_score" is not allowed`}},
		{"percolate", "items", `{"query":{"percolate":{}}}`, refusal{400, `"percolate" is not allowed`}},
		{"more_like_this", "items", `{"query":{"more_like_this":{"like":[{"_index":"superdesk_users","_id":"1"}]}}}`, refusal{400, `"more_like_this" is not allowed`}},
		{"wrapper", "items", `{"query":{"wrapper":{"query":"e30="}}}`, refusal{400, `"wrapper" is not allowed`}},
		{"runtime_mappings", "items", `{"runtime_mappings":{"x":{"type":"keyword","script":"emit(1)"}}}`, refusal{400, `source: runtime_mappings: "runtime_mappings" is not allowed`}},
		{"script_fields", "items", `{"script_fields":{}}`, refusal{400, `"script_fields" is not allowed`}},
		{"stored_fields", "items", `{"stored_fields":["lock_user"]}`, refusal{400, `"stored_fields" is not allowed`}},
		{"docvalue_fields", "items", `{"docvalue_fields":["lock_user"]}`, refusal{400, `"docvalue_fields" is not allowed`}},
		{"highlight", "items", `{"highlight":{"fields":{"lock_user":{}}}}`, refusal{400, `"highlight" is not allowed`}},
		{"suggest", "items", `{"suggest":{}}`, refusal{400, `"suggest" is not allowed`}},
		{"collapse", "items", `{"collapse":{"field":"a"}}`, refusal{400, `"collapse" is not allowed`}},
		{"rescore", "items", `{"rescore":{}}`, refusal{400, `"rescore" is not allowed`}},
		{"inner_hits", "items", `{"query":{"nested":{"path":"subject","query":{"match_all":{}},"inner_hits":{}}}}`, refusal{400, `"inner_hits" is not allowed`}},
		{"script sort", "items", `{"sort":{"_script":{"type":"number","script":"doc['lock_user']"}}}`, refusal{400, `"_script" is not allowed`}},
		{"script in agg", "items", `{"aggs":{"x":{"terms":{"script":"doc['lock_user']"}}}}`, refusal{400, `"script" is not allowed`}},
		{"script in range", "items", `{"query":{"range":{"script":{"gt":1}}}}`, refusal{400, `"script" is not allowed`}},
		{"script field as term", "items", `{"query":{"term":{"script":"x"}}}`, refusal{400, `"script" is not allowed`}},
		{"script option", "items", `{"query":{"match":{"a":{"query":"x","script":"1"}}}}`, refusal{400, `"script" is not allowed`}},
		{"terms lookup", "items", `{"query":{"terms":{"_id":{"index":"superdesk_users","id":"1","path":"password"}}}}`, refusal{400, "terms lookups are not allowed"}},
		{"terms lookup in filter", "contacts", `{"filter":{"terms":{"x":{"index":"i"}}}}`, refusal{400, "terms lookups are not allowed"}},
		// Unsupported.
		{"unknown top key", "items", `{"profile":true}`, refusal{400, `source: profile: unsupported key "profile"`}},
		{"explain", "items", `{"explain":true}`, refusal{400, `unsupported key "explain"`}},
		{"min_score", "items", `{"min_score":1}`, refusal{400, `unsupported key`}},
		{"search_after", "items", `{"search_after":[1]}`, refusal{400, `unsupported key`}},
		{"unknown query type", "items", `{"query":{"fuzzy":{"a":"x"}}}`, refusal{400, `unsupported query type "fuzzy"`}},
		{"regexp", "items", `{"query":{"regexp":{"a":"x.*"}}}`, refusal{400, `unsupported query type "regexp"`}},
		{"has_child", "items", `{"query":{"has_child":{}}}`, refusal{400, `unsupported query type "has_child"`}},
		{"geo_shape indexed_shape", "items", `{"query":{"geo_shape":{"a":{"indexed_shape":{}}}}}`, refusal{400, `unsupported query type "geo_shape"`}},
		{"missing legacy", "items", `{"query":{"missing":{"field":"a"}}}`, refusal{400, `unsupported query type "missing"`}},
		{"unknown agg", "items", `{"aggs":{"x":{"top_hits":{}}}}`, refusal{400, `unsupported aggregation type "top_hits"`}},
		{"avg agg", "items", `{"aggs":{"x":{"avg":{"field":"a"}}}}`, refusal{400, `unsupported aggregation type "avg"`}},
		{"agg without terms", "items", `{"aggs":{"x":{}}}`, refusal{400, "only terms aggregations"}},
		{"agg name", "items", `{"aggs":{"a>b":{"terms":{"field":"a"}}}}`, refusal{400, "invalid aggregation name"}},
		{"agg size", "items", `{"aggs":{"x":{"terms":{"field":"a","size":501}}}}`, refusal{400, "terms size must be between 1 and 500"}},
		{"agg size zero", "items", `{"aggs":{"x":{"terms":{"field":"a","size":0}}}}`, refusal{400, "terms size"}},
		{"agg buckets", "items", `{"aggs":` + manyAggs + `}`, refusal{400, "more than 10000 buckets"}},
		{"agg order by sub-agg", "items", `{"aggs":{"x":{"terms":{"field":"a","order":{"y":"desc"}}}}}`, refusal{400, "terms order"}},
		{"agg include regex", "items", `{"aggs":{"x":{"terms":{"field":"a","include":".*"}}}}`, refusal{400, "include must be an array"}},
		{"aggs and aggregations", "items", `{"aggs":{},"aggregations":{}}`, refusal{400, "not both"}},
		{"several query types", "items", `{"filter":{"term":{"a":1},"match":{"b":"x"}}}`, refusal{400, "holds one query type"}},
		{"empty query in must", "items", `{"query":{"bool":{"must":[{"bool":{"must":{"term":{}}}}]}}}`, refusal{400, "term takes exactly one field"}},
		{"term two fields", "items", `{"query":{"term":{"a":1,"b":2}}}`, refusal{400, "term takes exactly one field"}},
		{"term null", "items", `{"query":{"term":{"a":null}}}`, refusal{400, "term on \"a\" needs a value"}},
		{"term object value", "items", `{"query":{"term":{"a":{"value":{"x":1}}}}}`, refusal{400, `invalid term "value"`}},
		{"term no value", "items", `{"query":{"term":{"a":{"boost":1}}}}`, refusal{400, `term on "a" needs "value"`}},
		{"terms not an array", "items", `{"query":{"terms":{"a":"x"}}}`, refusal{400, "needs an array of values"}},
		{"terms two fields", "items", `{"query":{"terms":{"a":[1],"b":[2]}}}`, refusal{400, "terms takes exactly one field"}},
		{"match bad operator", "items", `{"query":{"match":{"a":{"query":"x","operator":"xor"}}}}`, refusal{400, `invalid match "operator"`}},
		{"match fuzziness", "items", `{"query":{"match":{"a":{"query":"x","fuzziness":2}}}}`, refusal{400, `unsupported match option "fuzziness"`}},
		{"multi_match without fields", "items", `{"query":{"multi_match":{"query":"x"}}}`, refusal{400, "multi_match needs fields"}},
		{"range two lower bounds", "items", `{"query":{"range":{"a":{"gt":1,"gte":2}}}}`, refusal{400, "two lower bounds"}},
		{"range from and gt", "items", `{"query":{"range":{"a":{"from":1,"gt":2}}}}`, refusal{400, "two lower bounds"}},
		{"range include without from", "items", `{"query":{"range":{"a":{"include_upper":false,"lt":2}}}}`, refusal{400, "include_upper needs to"}},
		{"range object bound", "items", `{"query":{"range":{"a":{"gt":{}}}}}`, refusal{400, "range bound"}},
		{"range unknown", "items", `{"query":{"range":{"a":{"execution":"index"}}}}`, refusal{400, `unsupported range option "execution"`}},
		{"ids numbers", "items", `{"query":{"ids":{"values":[1]}}}`, refusal{400, "ids needs values"}},
		{"ids type", "items", `{"query":{"ids":{"type":"x","values":[]}}}`, refusal{400, `unsupported ids option "type"`}},
		{"wildcard both", "items", `{"query":{"wildcard":{"a":{"value":"x","wildcard":"y"}}}}`, refusal{400, "not both"}},
		{"quote_field_suffix", "items", `{"query":{"query_string":{"query":"\"x\"","fields":["lock"],"quote_field_suffix":"_user"}}}`, refusal{400, `unsupported query_string option "quote_field_suffix"`}},
		{"nested query and filter", "items", `{"query":{"nested":{"path":"a","query":{"match_all":{}},"filter":{"match_all":{}}}}}`, refusal{400, "not both"}},
		{"nested without query", "items", `{"query":{"nested":{"path":"a"}}}`, refusal{400, "nested needs a query"}},
		{"or empty", "items", `{"query":{"or":[]}}`, refusal{400, "or needs at least one query"}},
		{"not empty", "items", `{"query":{"not":{}}}`, refusal{400, "not needs a query"}},
		{"not filter and more", "items", `{"query":{"not":{"filter":{"match_all":{}},"x":1}}}`, refusal{400, "not takes a query"}},
		{"empty query object", "items", `{"query":{"bool":{"must":[{"constant_score":{"filter":{}}}]}}}`, refusal{400, "empty query"}},
		{"query not an object", "items", `{"query":"x"}`, refusal{400, "query must be an object"}},
		{"clause not an object", "items", `{"query":{"bool":{"must":[1]}}}`, refusal{400, "source: query.bool.must[0]: a query must be an object"}},
		{"msm float", "items", `{"query":{"bool":{"minimum_should_match":1.5}}}`, refusal{400, "minimum_should_match"}},
		{"bool unknown", "items", `{"query":{"bool":{"disable_coord":true}}}`, refusal{400, `unsupported bool option "disable_coord"`}},
		{"too many nested queries", "items", `{"query":` + deepNot + `}`, refusal{400, "queries nested more than 24 deep"}},
		{"size negative", "items", `{"size":-1}`, refusal{400, "size must be a non-negative integer"}},
		{"size float", "items", `{"size":10.0}`, refusal{400, "size must be a non-negative integer"}},
		{"size string", "items", `{"size":"10"}`, refusal{400, "size must be a non-negative integer"}},
		{"from negative", "items", `{"from":-1}`, refusal{400, "from must be a non-negative integer"}},
		{"from+size over the window", "items", `{"from":9990,"size":20}`, refusal{400, "source: from 9990 + size 20 is beyond the 10000 results that can be paged"}},
		{"from huge", "items", `{"from":9223372036854775807}`, refusal{400, "beyond the 10000 results"}},
		{"from huge float", "items", `{"from":1e300}`, refusal{400, "from must be a non-negative integer"}},
		{"track_total_hits string", "items", `{"track_total_hits":"yes"}`, refusal{400, "track_total_hits must be"}},
		{"sort order", "items", `{"sort":{"a":"up"}}`, refusal{400, "sort order must be asc or desc"}},
		{"sort score options", "items", `{"sort":{"_score":{"order":"asc","missing":"_last"}}}`, refusal{400, `unsupported sort option "missing"`}},
		{"sort geo", "items", `{"sort":{"_geo_distance":{}}}`, refusal{400, `unsupported sort "_geo_distance"`}},
		{"sort number", "items", `{"sort":[1]}`, refusal{400, "a sort is a field name or an object"}},
		{"sort too many", "items", `{"sort":[` + strings.Repeat(`"a",`, 32) + `"a"]}`, refusal{400, "more than 32 sort keys"}},
		{"sort nested both", "items", `{"sort":{"a":{"nested":{"path":"x"},"nested_path":"x"}}}`, refusal{400, "not both"}},
		{"_source object", "items", `{"_source":{"fields":["a"]}}`, refusal{400, `unsupported _source option "fields"`}},
		{"_source number", "items", `{"_source":1}`, refusal{400, "_source must be"}},
		{"post_filter array", "items", `{"post_filter":[]}`, refusal{400, "a query must be an object"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(resource(t, tc.res), "", qs("source", tc.source))
			checkErr(t, err, tc.want)
		})
	}
}

// TestSourceHiddenFields: every place a field can appear in the DSL.
func TestSourceHiddenFields(t *testing.T) {
	for _, tc := range []struct {
		name, res, source string
	}{
		{"term", "items", `{"query":{"term":{"lock_user":"u"}}}`},
		{"term keyword", "items", `{"query":{"term":{"lock_user.keyword":"u"}}}`},
		{"terms", "items", `{"query":{"terms":{"lock_session":["s"]}}}`},
		{"match", "items", `{"query":{"match":{"unique_id":"1"}}}`},
		{"match_phrase", "planning", `{"query":{"match_phrase":{"item_class":"x"}}}`},
		{"match_phrase_prefix", "items", `{"query":{"match_phrase_prefix":{"family_id":"x"}}}`},
		{"range", "items", `{"query":{"range":{"lock_time":{"gte":"now-1d"}}}}`},
		{"exists", "items", `{"query":{"exists":{"field":"lock_user"}}}`},
		{"exists pattern", "items", `{"query":{"exists":{"field":"lock_*"}}}`},
		{"exists star", "items", `{"query":{"exists":{"field":"*"}}}`},
		{"prefix", "items", `{"query":{"prefix":{"event_id":"x"}}}`},
		{"wildcard", "items", `{"query":{"wildcard":{"_current_version":"1*"}}}`},
		{"multi_match", "items", `{"query":{"multi_match":{"query":"x","fields":["headline","lock_user^3"]}}}`},
		{"multi_match pattern", "items", `{"query":{"multi_match":{"query":"x","fields":["lock_*"]}}}`},
		{"query_string default_field", "items", `{"query":{"query_string":{"query":"x","default_field":"lock_user"}}}`},
		{"query_string fields", "items", `{"query":{"query_string":{"query":"x","fields":["lock_*"]}}}`},
		{"query_string text", "items", `{"query":{"query_string":{"query":"a OR lock_session:b"}}}`},
		{"simple_query_string fields", "items", `{"query":{"simple_query_string":{"query":"x","fields":["fields_meta.*"]}}}`},
		{"simple_query_string text", "items", `{"query":{"simple_query_string":{"query":"lock_user:x"}}}`},
		{"nested path", "planning", `{"query":{"nested":{"path":"_planning_schedule","query":{"match_all":{}}}}}`},
		{"inside nested", "planning", `{"query":{"nested":{"path":"coverages","filter":{"term":{"flags.x":1}}}}}`},
		{"nested association", "items", `{"query":{"term":{"associations.featured.lock_user":"u"}}}`},
		{"sort", "items", `{"sort":[{"lock_time":"desc"}]}`},
		{"sort string", "items", `{"sort":"lock_time"}`},
		{"sort nested path", "planning", `{"sort":[{"a":{"nested":{"path":"_updates_schedule"}}}]}`},
		{"sort nested filter", "planning", `{"sort":[{"a":{"nested":{"path":"x","filter":{"term":{"item_class":"x"}}}}}]}`},
		{"aggregation", "items", `{"aggs":{"x":{"terms":{"field":"lock_user"}}}}`},
		{"sub-aggregation", "items", `{"aggs":{"x":{"terms":{"field":"type"},"aggs":{"y":{"terms":{"field":"lock_user.keyword"}}}}}}`},
		{"_source includes", "items", `{"_source":["headline","lock_user"]}`},
		{"_source excludes", "items", `{"_source":{"excludes":["_etag"]}}`},
		{"_source pattern", "items", `{"_source":"lock*"}`},
		{"post_filter", "items", `{"post_filter":{"term":{"lock_user":"u"}}}`},
		{"legacy filter", "items", `{"filter":{"exists":{"field":"lock_user"}}}`},
		{"filtered", "contacts", `{"query":{"filtered":{"filter":{"term":{"_etag":"x"}}}}}`},
		{"contacts _links", "contacts", `{"query":{"exists":{"field":"_links"}}}`},
		{"_type is hidden when not a key", "items", `{"query":{"exists":{"field":"_type"}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(resource(t, tc.res), "", qs("source", tc.source))
			checkErr(t, err, refusal{400, "cannot be used"})
		})
	}
	// The same through filter.
	_, err := Parse(resource(t, "items"), "", qs("filter", `{"term":{"lock_user":"u"}}`))
	checkErr(t, err, refusal{400, `filter: term: field "lock_user" cannot be used`})
}
