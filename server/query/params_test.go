package query

import (
	"strings"
	"testing"
)

func TestPageAndMaxResults(t *testing.T) {
	for _, tc := range []struct {
		raw       string
		page, max int
	}{
		{"", 1, 25},
		{"page=2&max_results=10", 2, 10},
		{"page=0", 1, 25},
		{"page=-2", 2, 25},
		{"page=abc", 1, 25},
		{"page=1.5", 1, 25},
		{"page=", 1, 25},
		{"page=+3", 3, 25},
		{"page=%201%20", 1, 25},
		{"page=1_0", 10, 25},
		{"page=1__0", 1, 25},
		{"max_results=2.9", 1, 2},
		{"max_results=1e2", 1, 100},
		{"max_results=1E2", 1, 100},
		{"max_results=0", 1, 25},
		{"max_results=0.5", 1, 25},
		{"max_results=-5", 1, 25},
		{"max_results=abc", 1, 25},
		{"max_results=", 1, 25},
		{"max_results=nan", 1, 25},
		{"max_results=NaN", 1, 25},
		{"max_results=inf", 1, 25},
		{"max_results=-Infinity", 1, 25},
		{"max_results=1e400", 1, 25},
		{"max_results=0x10", 1, 25},
		{"max_results=1000", 1, 500},
		{"max_results=500", 1, 500},
		{"max_results=.5e3", 1, 500},
		{"max_results=5.", 1, 5},
		{"max_results=1_0", 1, 10},
		{"max_results=%2010%20", 1, 10},
		{"page=400&max_results=25", 400, 25},
		{"page=20&max_results=500", 20, 500},
		{"page=1&max_results=1e300", 1, 500},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			q, err := Parse(resource(t, "desks"), "", tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			if q.Page != tc.page || q.MaxResults != tc.max {
				t.Errorf("page, max_results = %d, %d; want %d, %d", q.Page, q.MaxResults, tc.page, tc.max)
			}
		})
	}
}

func TestPagingWindow(t *testing.T) {
	for _, tc := range []struct {
		res, raw string
		want     refusal
	}{
		{"desks", "page=401", refusal{400, "page: page 401 of 25 results is beyond the 10000 results that can be paged"}},
		{"items", "page=21&max_results=500", refusal{400, "beyond the 10000 results"}},
		{"items", "page=99999999999999999999999", refusal{400, "beyond the 10000 results"}},
		{"users", "page=-10001&max_results=1", refusal{400, "beyond the 10000 results"}},
	} {
		t.Run(tc.raw, func(t *testing.T) {
			_, err := Parse(resource(t, tc.res), "", tc.raw)
			checkErr(t, err, tc.want)
		})
	}
	// A detail only echoes page in its links: no window.
	q, err := Parse(resource(t, "desks"), "abc", "page=100000")
	if err != nil {
		t.Fatal(err)
	}
	if q.Page != 100000 {
		t.Errorf("detail Page = %d, want 100000", q.Page)
	}
}

func TestQueryStringStrictness(t *testing.T) {
	long := strings.Repeat("a", MaxTarget+1)
	for _, tc := range []struct {
		name, raw string
		want      refusal
	}{
		{"raw semicolon", "where={}&a=1;b=2", refusal{400, `";" is not a parameter separator`}},
		{"semicolon alone", "sort=name;", refusal{400, `";"`}},
		{"bad escape", "where=%zz", refusal{400, "invalid %-escape"}},
		{"truncated escape", "q=%4", refusal{400, "invalid %-escape"}},
		{"bad escape in unknown parameter", "foo=%zz", refusal{400, "malformed"}},
		{"value too long", "q=" + strings.Repeat("a", MaxTarget-2) + "&foo=" + "b", refusal{414, "too long"}},
		{"target too long", "foo=" + long, refusal{414, "too long"}},
		{"invalid UTF-8 in a known parameter", "q=%ff", refusal{400, "q: not valid UTF-8"}},
		{"embedded not an object", "embedded=[1]", refusal{400, "Unable to parse `embedded` clause"}},
		{"embedded bad JSON", "embedded={", refusal{400, "Unable to parse `embedded` clause"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(resource(t, "items"), "", tc.raw)
			checkErr(t, err, tc.want)
		})
	}
}

func TestParametersLenient(t *testing.T) {
	desks := resource(t, "desks")
	for _, tc := range []struct {
		name, raw string
		want      want
	}{
		{"unknown parameters are ignored and not keyed", "foo=1&Where=garbage&collation=x&version=3&show_deleted=1&aggregations=1&es_highlight=1",
			want{sort: keys("name", false)}},
		{"the first value of a known parameter wins", qs("where", `{"name":"a"}`, "where", `{"$where":"x"}`),
			want{where: `{"name":"a"}`, sort: keys("name", false), params: []sourcesParam{p("where", `{"name":"a"}`)}}},
		{"empty values are absent", "where=&sort=&projection=&embedded=&source=&q=&filter=",
			want{sort: keys("name", false)}},
		{"valid embedded is ignored", qs("embedded", `{"user":1}`), want{sort: keys("name", false)}},
		{"pretty with any value", "pretty=0", want{sort: keys("name", false), pretty: true, params: []sourcesParam{p("pretty", "")}}},
		{"pretty with no value", "pretty", want{sort: keys("name", false), pretty: true, params: []sourcesParam{p("pretty", "")}}},
		{"invalid UTF-8 in an unknown parameter", "foo=%ff", want{sort: keys("name", false)}},
		{"plus is a space", "where=%7B%22name%22:%22a+b%22%7D", want{where: `{"name":"a b"}`, sort: keys("name", false),
			params: []sourcesParam{p("where", `{"name":"a b"}`)}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Parse(desks, "", tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			check(t, q, tc.want)
		})
	}
}

func TestDetail(t *testing.T) {
	// Details validate the link-echo parameters and projection, and build
	// nothing for the backend.
	for _, tc := range []struct {
		name, res, raw string
		want           want
	}{
		{"desk with everything", "desks", qs("where", `{"name":"a"}`, "sort", "-name", "projection", `{"name":1}`, "page", "3", "max_results", "7", "pretty", "", "source", "garbage", "foo", "1"),
			want{page: 3, max: 7, pretty: true, fields: proj(false, "name"),
				params: []sourcesParam{p("where", `{"name":"a"}`), p("sort", `[["name",-1]]`), p("pretty", ""), p("projection", `{"name":1}`)}}},
		{"item where uses the search rules", "items", qs("where", `{"type":"text"}`, "q", "x", "filter", "{", "source", "{"),
			want{params: []sourcesParam{p("where", `{"type":"text"}`)}}},
		{"projections is a list alias only", "items", qs("projections", `["a"]`), want{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q, err := Parse(resource(t, tc.res), "some-id", tc.raw)
			if err != nil {
				t.Fatal(err)
			}
			if q.ID != "some-id" || !q.IsDetail() {
				t.Errorf("ID = %q", q.ID)
			}
			check(t, q, tc.want)
		})
	}
	for _, tc := range []struct {
		name, res, raw string
		want           refusal
	}{
		{"where operator on an item", "items", qs("where", `{"type":{"$ne":"text"}}`), refusal{400, "where on items supports field equality only"}},
		{"hidden where on a user", "users", qs("where", `{"password":"x"}`), refusal{400, `where: field "password" cannot be used`}},
		{"hidden sort", "users", qs("sort", "password"), refusal{400, `sort: field "password" cannot be used`}},
		{"hidden projection", "users", qs("projection", `{"password":1}`), refusal{400, `projection: field "password" cannot be used`}},
		{"embedded", "users", qs("embedded", `1`), refusal{400, "Unable to parse `embedded` clause"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(resource(t, tc.res), "x", tc.raw)
			checkErr(t, err, tc.want)
		})
	}
}
