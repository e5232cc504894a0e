package query

import (
	"fmt"
	"strings"
	"testing"
)

// TestHostile runs the classes of hostile input
// that reach parameter parsing. Each is refused (400, or 414 for size) or,
// where the contract is lenient, accepted harmlessly; none panics.
func TestHostile(t *testing.T) {
	clauses := make([]string, 10000)
	for i := range clauses {
		clauses[i] = fmt.Sprintf(`{"term":{"a":%d}}`, i)
	}
	bigBool := `{"query":{"bool":{"should":[` + strings.Join(clauses, ",") + `]}}}`
	fitBool := `{"query":{"bool":{"should":[` + strings.Join(clauses[:150], ",") + `]}}}`
	growBool := `{"query":{"bool":{"should":[` + strings.Join(clauses[:300], ",") + `]}}}`
	deepWhere := strings.Repeat(`{"$or":[`, 17) + `{}` + strings.Repeat(`]}`, 17)
	deepSource := `{"query":` + strings.Repeat(`{"not":`, 25) + `{"match_all":{}}` + strings.Repeat(`}`, 25) + `}`
	var many strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&many, "%x=&", i)
	}
	const ok = 200
	for _, tc := range []struct {
		class, name, res, raw string
		status                int
		msg                   string
	}{
		// S10: oracles on excluded fields.
		{"S10", "where $lt on password", "users", qs("where", `{"password":{"$lt":"$2b$"}}`), 400, `"password" cannot be used`},
		{"S10", "where $in", "users", qs("where", `{"password":{"$in":["x"]}}`), 400, "cannot be used"},
		{"S10", "where $exists", "users", qs("where", `{"user_preferences":{"$exists":true}}`), 400, "cannot be used"},
		{"S10", "where $type", "users", qs("where", `{"password":{"$type":2}}`), 400, "cannot be used"},
		{"S10", "where $elemMatch", "users", qs("where", `{"session_preferences":{"$elemMatch":{"$exists":true}}}`), 400, "cannot be used"},
		{"S10", "where dotted", "users", qs("where", `{"user_preferences.editor:theme":"dark"}`), 400, "cannot be used"},
		{"S10", "where \\u escape", "users", qs("where", `{"\u0070assword":{"$gt":""}}`), 400, `"password" cannot be used`},
		{"S10", "where NUL in key", "users", qs("where", `{"password\u0000":"x"}`), 400, "NUL"},
		{"S10", "where $where this.password", "users", qs("where", `{"$where":"this.password[0]=='$'"}`), 400, `"$where" is not allowed`},
		{"S10", "sort password", "users", qs("sort", "password"), 400, "cannot be used"},
		{"S10", "sort python", "users", qs("sort", `[("password", 1)]`), 400, "cannot be used"},
		{"S10", "search term", "items", qs("filter", `{"term":{"lock_session":"x"}}`), 400, "cannot be used"},
		{"S10", "search q", "items", qs("q", "lock_session:x*"), 400, "cannot be used"},
		{"S10", "search where", "planning", qs("where", `{"flags.marked_for_not_publication":true}`), 400, "cannot be used"},
		{"S10", "search agg", "items", qs("source", `{"aggs":{"l":{"terms":{"field":"lock_user"}}}}`), 400, "cannot be used"},
		// S11: projection expressions.
		{"S11", "$password", "users", qs("projection", `{"leak":"$password"}`), 400, "must be 0, 1"},
		{"S11", "$concat", "users", qs("projection", `{"leak":{"$concat":["$password"]}}`), 400, "must be 0, 1"},
		{"S11", "$function", "users", qs("projection", `{"leak":{"$function":{"body":"1","args":[],"lang":"js"}}}`), 400, "must be 0, 1"},
		{"S11", "truthy string", "users", qs("projection", `{"username":"yes"}`), 400, "must be 0, 1"},
		// S12: Mongo operator injection.
		{"S12", "$expr", "users", qs("where", `{"$expr":{"$eq":["$password","x"]}}`), 400, `"$expr" is not allowed`},
		{"S12", "$function", "users", qs("where", `{"$expr":{"$function":{}}}`), 400, "not allowed"},
		{"S12", "$accumulator", "desks", qs("where", `{"a":{"$accumulator":{}}}`), 400, `"$accumulator" is not allowed`},
		{"S12", "$lookup", "desks", qs("where", `{"$lookup":{"from":"users"}}`), 400, `unknown operator "$lookup"`},
		{"S12", "pipeline", "desks", qs("where", `[{"$match":{}},{"$lookup":{}}]`), 400, "must be a JSON object"},
		{"S12", "$regex", "desks", qs("where", `{"name":{"$regex":"(a+)+$"}}`), 400, `"$regex" is not allowed`},
		{"S12", "$text", "desks", qs("where", `{"$text":{"$search":"x"}}`), 400, `"$text" is not allowed`},
		{"S12", "unknown", "desks", qs("where", `{"a":{"$foo":1}}`), 400, `unknown operator "$foo"`},
		{"S12", "operator in literal", "desks", qs("where", `{"a":[{"$where":"1"}]}`), 400, `"$where" is not allowed`},
		// S13: Elasticsearch DSL abuse.
		{"S13", "script query", "items", qs("source", `{"query":{"script":{"script":{"source":"doc['lock_user'].value == 'x'"}}}}`), 400, `"script" is not allowed`},
		{"S13", "script score", "items", qs("source", `{"query":{"function_score":{"script_score":{"script":"1"}}}}`), 400, `"function_score" is not allowed`},
		{"S13", "script sort", "items", qs("source", `{"sort":[{"_script":{"script":"1"}}]}`), 400, `"_script" is not allowed`},
		{"S13", "script fields", "items", qs("source", `{"script_fields":{"x":{"script":"1"}}}`), 400, `"script_fields" is not allowed`},
		{"S13", "runtime mappings", "items", qs("source", `{"runtime_mappings":{}}`), 400, `"runtime_mappings" is not allowed`},
		{"S13", "terms lookup", "items", qs("source", `{"query":{"terms":{"guid":{"index":"superdesk_users","id":"x","path":"password"}}}}`), 400, "terms lookups are not allowed"},
		{"S13", "more_like_this docs", "items", qs("source", `{"query":{"more_like_this":{"like":[{"_index":"superdesk_users","_id":"1"}]}}}`), 400, "not allowed"},
		{"S13", "percolate", "items", qs("source", `{"query":{"percolate":{"field":"q","index":"i","id":"1"}}}`), 400, "not allowed"},
		{"S13", "indexed_shape", "events", qs("source", `{"query":{"geo_shape":{"location":{"indexed_shape":{"index":"x","id":"1"}}}}}`), 400, "unsupported"},
		{"S13", "top_hits agg", "items", qs("source", `{"aggs":{"x":{"top_hits":{}}}}`), 400, "unsupported"},
		{"S13", "highlight", "items", qs("source", `{"highlight":{"fields":{"*":{}}}}`), 400, `"highlight" is not allowed`},
		{"S13", "inner_hits", "items", qs("source", `{"query":{"nested":{"path":"a","query":{"match_all":{}},"inner_hits":{}}}}`), 400, `"inner_hits" is not allowed`},
		{"S13", "suggest", "items", qs("source", `{"suggest":{"s":{"text":"x","term":{"field":"lock_user"}}}}`), 400, `"suggest" is not allowed`},
		{"S13", "profile", "items", qs("source", `{"profile":true}`), 400, "unsupported"},
		{"S13", "explain", "items", qs("source", `{"explain":true}`), 400, "unsupported"},
		{"S13", "partial results", "items", qs("source", `{"allow_partial_search_results":true}`), 400, "unsupported"},
		{"S13", "timeout", "items", qs("source", `{"timeout":"1ms","terminate_after":1}`), 400, "unsupported"},
		{"S13", "wrapper", "items", qs("filter", `{"wrapper":{"query":"eyJtYXRjaF9hbGwiOnt9fQ=="}}`), 400, `"wrapper" is not allowed`},
		{"S13", "scripted agg", "items", qs("source", `{"aggs":{"x":{"scripted_metric":{}}}}`), 400, "unsupported"},
		// S14: parser differentials.
		{"S14", "duplicate keys where", "desks", qs("where", `{"name":"a","name":{"$gt":""}}`), 400, "duplicate key"},
		{"S14", "duplicate keys source", "items", qs("source", `{"query":{"term":{"a":1}},"query":{"script":{}}}`), 400, "duplicate key"},
		{"S14", "trailing data", "desks", qs("where", `{"a":1}{"$where":"1"}`), 400, "unexpected data"},
		{"S14", "NaN", "items", qs("source", `{"size":NaN}`), 400, "invalid JSON"},
		{"S14", "Infinity", "items", qs("source", `{"size":Infinity}`), 400, "invalid JSON"},
		{"S14", "overflow", "items", qs("source", `{"size":1e400}`), 400, "out of range"},
		{"S14", "big integer", "items", qs("source", `{"size":99999999999999999999}`), 400, "non-negative integer"},
		{"S14", "invalid UTF-8 raw", "desks", "where=%7B%22a%22%3A%22%ff%22%7D", 400, "not valid UTF-8"},
		{"S14", "lone surrogate", "desks", qs("where", `{"a":"\ud800"}`), 400, "surrogate"},
		{"S14", "depth 33", "desks", qs("where", deepWhere), 400, "nested more than 32 levels"},
		{"S14", "depth 33 source", "items", qs("source", strings.Repeat(`{"a":`, 33)+"1"+strings.Repeat(`}`, 33)), 400, "nested more than 32 levels"},
		{"S14", "query depth", "items", qs("source", deepSource), 400, "nested more than 24"},
		{"S14", "control character", "desks", qs("where", "{\"a\":\"\x01\"}"), 400, "control character"},
		// S15: resource consumption.
		{"S15", "max_results=inf", "items", "max_results=inf", ok, ""},
		{"S15", "max_results=-inf", "desks", "max_results=-inf", ok, ""},
		{"S15", "max_results=nan", "desks", "max_results=nan", ok, ""},
		{"S15", "max_results huge", "desks", "max_results=1e9", ok, ""},
		{"S15", "page huge", "desks", "page=1e9", ok, ""}, // not an int: page 1
		{"S15", "page past the window", "desks", "page=100000000", 400, "beyond the 10000 results"},
		{"S15", "from+size", "items", qs("source", `{"from":10000,"size":1}`), 400, "beyond the 10000 results"},
		{"S15", "size 10000", "items", qs("source", `{"size":10000}`), ok, ""}, // clamped to 500
		{"S15", "bucket explosion", "items", qs("source", `{"aggs":{"a":{"terms":{"field":"a","size":500},"aggs":{"b":{"terms":{"field":"b","size":500}}}}}}`), 400, "buckets"},
		{"S15", "regexp", "items", qs("filter", `{"regexp":{"a":"(a+)+"}}`), 400, "unsupported"},
		{"S15", "10k-clause bool", "items", qs("source", bigBool), 414, "too long"},
		{"S15", "150-clause bool", "items", qs("source", fitBool), ok, ""},
		{"S15", "300-clause bool outgrows the target once normalised", "items", qs("source", growBool), 414, "too long once normalised"},
		// S16: oversized requests.
		{"S16", "target over 16 KiB", "desks", "a=" + strings.Repeat("x", MaxTarget), 414, "too long"},
		{"S16", "3000 parameters", "desks", many.String(), ok, ""},
		// S19: query-string differentials.
		{"S19", "duplicate known parameter", "users", qs("where", `{"username":"a"}`, "where", `{"password":"x"}`), ok, ""},
		{"S19", "raw semicolon", "users", "where={}&sort=username;password", 400, `";"`},
		{"S19", "case-varied name", "users", qs("WHERE", `{"password":"x"}`, "Sort", "password"), ok, ""},
		{"S19", "bad escape", "users", "where=%7B%zz", 400, "invalid %-escape"},
		{"S19", "unknown parameter", "users", qs("cachebuster", "1"), ok, ""},
	} {
		t.Run(tc.class+" "+tc.name, func(t *testing.T) {
			q, err := Parse(resource(t, tc.res), "", tc.raw)
			if tc.status == ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				checkInvariants(t, q)
				return
			}
			checkErr(t, err, refusal{tc.status, tc.msg})
		})
	}
}

// TestHostileFirstValueWins: the duplicate parameter is not read.
func TestHostileFirstValueWins(t *testing.T) {
	q, err := Parse(resource(t, "users"), "", qs("where", `{"username":"a"}`, "where", `{"password":"x"}`, "WHERE", `{"password":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	check(t, q, want{where: `{"username":"a"}`, sort: keys("username", false), params: []sourcesParam{p("where", `{"username":"a"}`)}})
}
