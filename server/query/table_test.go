package query

import (
	"strings"
	"testing"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/grammar"
)

// The validator accepts every operator and query type of grammar's table,
// with the table's example, and keeps it in what it hands the backend: an
// entry the validator cannot take fails here.
func TestGrammarTableAccepted(t *testing.T) {
	desks := resource(t, "desks")
	for _, op := range grammar.MongoOps() {
		t.Run(op.Name, func(t *testing.T) {
			q, err := Parse(desks, "", qs("where", op.Example))
			if err != nil {
				t.Fatalf("where %s: %v", op.Example, err)
			}
			if !hasKey(q.Where, op.Name) {
				t.Errorf("where %s became %s, without %s", op.Example, js(q.Where), op.Name)
			}
		})
	}
	for _, qt := range grammar.QueryTypes() {
		t.Run(qt.Name, func(t *testing.T) {
			res := resource(t, "items")
			if strings.Contains(qt.Example, "coverages") {
				res = resource(t, "planning")
			}
			q, err := Parse(res, "", qs("source", `{"query": `+qt.Example+`}`))
			if err != nil {
				t.Fatalf("source %s: %v", qt.Example, err)
			}
			want := qt.Name
			if qt.Bool {
				want = "bool" // the legacy forms reach backends as bool
			}
			got, _ := q.Search.Get("query")
			if !hasKey(got, want) {
				t.Errorf("query %s became %s, without a %s query", qt.Example, js(q.Search), want)
			}
		})
	}
	for _, at := range grammar.AggTypes() {
		t.Run("aggs "+at.Name, func(t *testing.T) {
			if _, err := Parse(resource(t, "items"), "", qs("source", `{"aggs": `+at.Example+`}`)); err != nil {
				t.Fatalf("aggs %s: %v", at.Example, err)
			}
		})
	}
}

// Nothing outside the table gets through: operator and query-type keys
// the table does not list are refused, whatever the validator's code
// knows.
func TestGrammarTableIsTheAllowList(t *testing.T) {
	desks, items := resource(t, "desks"), resource(t, "items")
	for _, name := range []string{"$foo", "$comment", "$rand", "$jsonSchema", "$sampleRate", "$where"} {
		if _, err := Parse(desks, "", qs("where", `{"a": {"`+name+`": 1}}`)); err == nil {
			t.Errorf("where operator %s accepted", name)
		}
	}
	for _, name := range []string{"match_bool_prefix", "fuzzy", "regexp", "terms_set", "geo_distance", "script", "span_term", "intervals"} {
		if _, ok := grammar.QueryTypeByName(name); ok {
			continue
		}
		if _, err := Parse(items, "", qs("source", `{"query": {"`+name+`": {"headline": "x"}}}`)); err == nil {
			t.Errorf("query type %s accepted", name)
		}
	}
	// The $type aliases are the table's.
	for _, bt := range grammar.BSONTypes() {
		if _, err := Parse(desks, "", qs("where", `{"a": {"$type": "`+bt.Alias+`"}}`)); err != nil {
			t.Errorf("$type %s: %v", bt.Alias, err)
		}
	}
	if _, err := Parse(desks, "", qs("where", `{"a": {"$type": "integer"}}`)); err == nil {
		t.Error(`$type "integer" accepted`)
	}
}

// hasKey reports whether k is a key anywhere in v.
func hasKey(v any, k string) bool {
	switch v := v.(type) {
	case *sources.Doc:
		for _, f := range v.Fields() {
			if f.Key == k || hasKey(f.Value, k) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if hasKey(e, k) {
				return true
			}
		}
	}
	return false
}
