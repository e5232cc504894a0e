package query

import (
	"strings"
	"testing"
)

func TestSortDocumentLists(t *testing.T) {
	for _, tc := range []struct {
		res, sort string
		keys      []sourcesSortKey
		canon     string // "" when elided
	}{
		{"desks", `[("name", -1)]`, keys("name", true), `[["name",-1]]`},
		{"desks", `[["name", -1]]`, keys("name", true), `[["name",-1]]`},
		{"desks", `(("a",1),)`, keys("a", false), `[["a",1]]`},
		{"desks", `(("a",1), ('b', -1))`, keys("a", false, "b", true), `[["a",1],["b",-1]]`},
		{"desks", `[("a",1),]`, keys("a", false), `[["a",1]]`},
		{"desks", ` [ ( "a" , + 1 ) ] `, keys("a", false), `[["a",1]]`},
		{"desks", `[("a", - 1)]`, keys("a", true), `[["a",-1]]`},
		{"desks", `[('it\'s', 1)]`, keys("it's", false), `[["it's",1]]`},
		{"desks", `[("\u0061\x62", 1)]`, keys("ab", false), `[["ab",1]]`},
		{"desks", `[["a\/b", 1]]`, keys("a/b", false), `[["a/b",1]]`},
		{"desks", `-name,_id`, keys("name", true, "_id", false), `[["name",-1],["_id",1]]`},
		{"desks", ` - name , _id `, keys("name", true, "_id", false), `[["name",-1],["_id",1]]`},
		{"desks", `dates.start`, keys("dates.start", false), `[["dates.start",1]]`},
		{"desks", `name`, keys("name", false), ""},                          // the default: elided
		{"desks", `[("name", 1)]`, keys("name", false), ""},                 // the default: elided
		{"desks", `[]`, keys("name", false), ""},                            // empty: the default
		{"users", `-_updated`, keys("_updated", true), `[["_updated",-1]]`}, // queryable timestamp
		{"events_history", `_updated`, keys("_updated", false), `[["_updated",1]]`},
		{"events_history", `-_updated`, keys("_updated", true), ""},
	} {
		t.Run(tc.res+" "+tc.sort, func(t *testing.T) {
			q, err := Parse(resource(t, tc.res), "", qs("sort", tc.sort))
			if err != nil {
				t.Fatal(err)
			}
			var params []sourcesParam
			if tc.canon != "" {
				params = []sourcesParam{p("sort", tc.canon)}
			}
			check(t, q, want{sort: tc.keys, params: params})
		})
	}
}

func TestSortSearchLists(t *testing.T) {
	for _, tc := range []struct {
		res, raw, sort string
		params         []sourcesParam
	}{
		{"items", qs("sort", `[("headline", 1)]`), `[{"headline":{"order":"asc"}}]`, []sourcesParam{p("sort", `[["headline",1]]`)}},
		{"items", qs("sort", `-versioncreated,_id`), `[{"versioncreated":{"order":"desc"}},{"_id":{"order":"asc"}}]`,
			[]sourcesParam{p("sort", `[["versioncreated",-1],["_id",1]]`)}},
		{"items", qs("sort", `-_updated`), itemsSort, nil},
		{"items", qs("sort", `_type`), `[{"_resource":{"order":"asc"}}]`, []sourcesParam{p("sort", `[["_resource",1]]`)}},
		{"items", qs("sort", `_score`), `[{"_score":{"order":"asc"}}]`, []sourcesParam{p("sort", `[["_score",1]]`)}},
		{"events", "", `[{"dates.start":{"order":"asc"}}]`, nil},
		{"contacts", "", `[{"last_name.keyword":{"order":"asc"}}]`, nil},
		// A sort in source wins; the URL sort is still keyed (links echo it).
		{"items", qs("sort", `headline`, "source", `{"sort":["slugline"]}`), `[{"slugline":{"order":"asc"}}]`,
			[]sourcesParam{p("sort", `[["headline",1]]`), p("source", `{"sort":[{"slugline":{"order":"asc"}}]}`)}},
	} {
		t.Run(tc.res+" "+tc.raw, func(t *testing.T) {
			q, err := Parse(resource(t, tc.res), "", tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			check(t, q, want{search: defaultBody(`{"bool":{}}`, tc.sort, 25), params: tc.params})
		})
	}
}

func TestSortRefused(t *testing.T) {
	many := make([]string, 33)
	for i := range many {
		many[i] = "f" + strings.Repeat("x", i)
	}
	for _, tc := range []struct {
		res, sort string
		want      refusal
	}{
		{"users", "password", refusal{400, `sort: field "password" cannot be used`}},
		{"users", `[("password", 1)]`, refusal{400, `sort: field "password" cannot be used`}},
		{"users", `-user_preferences.x`, refusal{400, `cannot be used`}},
		{"users", `[("pass\u0077ord", 1)]`, refusal{400, `sort: field "password" cannot be used`}},
		{"users", `password.keyword`, refusal{400, `cannot be used`}},
		{"items", `lock_user`, refusal{400, `sort: field "lock_user" cannot be used`}},
		{"items", `associations.a.lock_user`, refusal{400, `cannot be used`}},
		{"items", `lock_*`, refusal{400, `cannot be used`}},
		{"desks", `name,`, refusal{400, "empty field name"}},
		{"desks", `,name`, refusal{400, "empty field name"}},
		{"desks", `-`, refusal{400, "empty field name"}},
		{"desks", `name age`, refusal{400, "invalid field name"}},
		{"desks", `a..b`, refusal{400, "empty segment"}},
		{"desks", `$where`, refusal{400, "starting with $"}},
		{"desks", `1`, refusal{400, "must be a list of (field, direction) pairs"}},
		{"desks", `"name"`, refusal{400, "must be a list"}},
		{"desks", `{"name": 1}`, refusal{400, "sort:"}},
		{"desks", `[("name", 2)]`, refusal{400, `the direction of "name" must be 1 or -1`}},
		{"desks", `[("name", 1.0)]`, refusal{400, "only integer directions"}},
		{"desks", `[("name", "asc")]`, refusal{400, "must be 1 or -1"}},
		{"desks", `[("name", True)]`, refusal{400, "invalid syntax"}},
		{"desks", `[("name",)]`, refusal{400, "pairs"}},
		{"desks", `[("name", 1, 2)]`, refusal{400, "pairs"}},
		{"desks", `[(1, 1)]`, refusal{400, "a field name must be a string"}},
		{"desks", `[("name", 1)`, refusal{400, "expected ','"}},
		{"desks", `[("name", `, refusal{400, "unexpected end"}},
		{"desks", `[("name" 1)]`, refusal{400, "expected ','"}},
		{"desks", `[("name", 1)] x`, refusal{400, "unexpected"}},
		{"desks", `[("a\q", 1)]`, refusal{400, "unsupported escape"}},
		{"desks", `[("a`, refusal{400, "unterminated string"}},
		{"desks", `[[[[[["a", 1]]]]]]`, refusal{400, "nested too deeply"}},
		{"desks", `[("name", 99999999999999999999)]`, refusal{400, "integer out of range"}},
		{"desks", `[("a", 1), ("a", -1)]`, refusal{400, `field "a" appears twice`}},
		{"desks", strings.Join(many, ","), refusal{400, "more than 32 keys"}},
		{"desks", "  ", refusal{400, "sort: empty"}},
		{"desks", "a\x00b", refusal{400, "NUL"}},
		{"desks", strings.Repeat("a", 257), refusal{400, "longer than 256 bytes"}},
	} {
		t.Run(tc.res+" "+tc.sort, func(t *testing.T) {
			_, err := Parse(resource(t, tc.res), "", qs("sort", tc.sort))
			checkErr(t, err, tc.want)
		})
	}
}
