package query

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// corpus holds accepted requests of every kind; TestRoundTrip parses the
// canonical form of each again (the tables elsewhere do the same through
// check).
var corpus = []struct{ res, id, raw string }{
	{"items", "", ""},
	{"items", "", qs("source", `{"query":{"filtered":{"query":{"query_string":{"query":"flood"}},"filter":{"and":[{"term":{"type":"text"}},{"not":{"term":{"state":"spiked"}}}]}}},"sort":[{"versioncreated":"desc"}],"size":10}`)},
	{"items", "", qs("q", `"big flood"`, "df", "headline", "page", "3", "max_results", "10", "pretty", "1")},
	{"items", "", qs("q", `headline:flood AND _exists_:slugline`, "default_operator", "and", "where", `{"type":"text","urgency":3}`)},
	{"items", "", qs("filter", `{"or":[{"terms":{"type":["text","picture"]}},{"range":{"urgency":{"from":1,"to":3}}}]}`, "sort", "-versioncreated,_id")},
	{"items", "", qs("source", `{"aggs":{"desk":{"terms":{"field":"task.desk"},"aggregations":{"stage":{"terms":{"field":"task.stage","size":3}}}}},"size":0,"_source":["headline"],"post_filter":{"term":{"type":"text"}}}`)},
	{"items", "", qs("projections", `["headline","slugline"]`, "source", `{"query":{"bool":{"should":[{"match":{"headline":"a"}}]}}}`, "where", `{"type":"text"}`)},
	{"planning", "", qs("source", `{"sort":[{"coverages.planning.scheduled":{"order":"asc","nested_path":"coverages","nested_filter":{"term":{"coverages.x":1}}}}],"from":20}`)},
	{"contacts", "", qs("source", `{"query":{"filtered":{"filter":{"bool":{"must":{"term":{"is_active":false}}}}}}}`)},
	{"events", "", qs("source", `{"query":{"nested":{"path":"location","filter":{"exists":{"field":"location.name"}}}}}`, "sort", `[("dates.start", -1)]`)},
	{"assignments", "", qs("where", `{"assigned_to.desk":"d1"}`, "projection", `{"planning":0}`)},
	{"desks", "", qs("where", `{"name":"PROD"}`)},
	{"desks", "", qs("where", `{"$or":[{"name":{"$in":["a","b"]}},{"members.user":{"$elemMatch":{"$eq":"u"}}}],"x":{"y":2,"a":[{"c":1,"b":2}]}}`, "sort", `[("name",-1),("_id",1)]`, "projection", `{"name":1,"members":1}`)},
	{"users", "", qs("where", `{"username":{"$exists":true,"$type":"string"},"_updated":{"$gt":"2019-01-01T00:00:00+0000"}}`, "sort", "-_updated", "page", "2", "max_results", "1e2")},
	{"events_files", "", qs("where", `{"loc":{"$near":{"$geometry":{"type":"Point","coordinates":[1,2]},"$maxDistance":5}}}`)},
	{"events_history", "", qs("where", `{"update.name":{"$ne":null}}`, "sort", "_updated")},
	{"desks", "abc", qs("where", `{"name":"a"}`, "sort", "-name", "projection", `{"name":1}`, "page", "2", "pretty", "")},
	{"items", "urn:x", qs("where", `{"type":"text"}`, "sort", `[("headline",1)]`, "projection", `{"headline":1}`)},
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range corpus {
		t.Run(tc.res+" "+tc.raw, func(t *testing.T) {
			q, err := Parse(resource(t, tc.res), tc.id, tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			checkInvariants(t, q) // includes the round trip
		})
	}
}

// TestEquivalentRequests: requests that mean the same get the same
// canonical parameters and the same backend query.
func TestEquivalentRequests(t *testing.T) {
	for _, tc := range []struct {
		res  string
		a, b string
	}{
		{"desks", qs("where", `{"b":1,"a":{"$lt":3,"$gt":1}}`), qs("where", `{"a":{"$gt":1,"$lt":3},"b":1}`)},
		{"desks", qs("sort", `[("a",1),("b",-1)]`), qs("sort", `a,-b`)},
		{"desks", qs("sort", `[["a",1],["b",-1]]`), qs("sort", `(("a", 1), ("b", -1),)`)},
		{"desks", qs("sort", `name`), ""},
		{"desks", qs("projection", `{"b":1,"a":true}`), qs("projection", `{"a":1,"b":1}`)},
		{"desks", qs("where", `{}`, "embedded", `{}`, "foo", "bar"), ""},
		{"items", qs("projections", `["a"]`), qs("projection", `{"a":1}`)},
		{"items", qs("source", `{"query":{"filtered":{"filter":{"term":{"a":1}}}}}`), qs("source", `{"query":{"bool":{"must":{"bool":{"filter":[{"term":{"a":{"value":1}}}]}}}}}`)},
		{"items", qs("source", `{"size":3,"query":{"match":{"b":"x"}}}`), qs("source", `{"query":{"match":{"b":{"query":"x"}}},"size":3}`)},
		{"items", qs("source", `{"track_total_hits":true}`), ""},
		{"items", qs("source", `{"aggregations":{"x":{"terms":{"field":"a"}}}}`), qs("source", `{"aggs":{"x":{"terms":{"field":"a","size":10}}}}`)},
		{"items", qs("where", `{"b":1,"a":2}`), qs("where", `{"a":2,"b":1}`)},
		{"items", qs("q", "x", "default_operator", "or"), qs("q", "x")},
		{"items", qs("default_operator", "and", "df", "headline"), ""},
		{"items", qs("filter", `{"range":{"a":{"from":1,"include_lower":false}}}`), qs("filter", `{"range":{"a":{"gt":1}}}`)},
	} {
		t.Run(tc.a, func(t *testing.T) {
			r := resource(t, tc.res)
			qa, err := Parse(r, "", tc.a)
			if err != nil {
				t.Fatal(err)
			}
			qb, err := Parse(r, "", tc.b)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(qa, qb, docCmp); diff != "" {
				t.Errorf("different queries (-a +b):\n%s", diff)
			}
		})
	}
}
