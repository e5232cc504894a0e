package cache

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prodapi/prodapi/server/query"
	"github.com/prodapi/prodapi/sources"
)

func TestKey(t *testing.T) {
	items, desks := resource(t, "items"), resource(t, "desks")
	for _, tc := range []struct {
		name string
		q    *sources.Query
		want string
	}{
		{"list", &sources.Query{Resource: items, Page: 1, MaxResults: 25},
			"prodapi:v1:items:list:page=1&max_results=25"},
		{"detail", &sources.Query{Resource: items, ID: "urn:newsml:localhost:2024:3f1c", Page: 1, MaxResults: 25},
			"prodapi:v1:items:detail:id=urn:newsml:localhost:2024:3f1c"},
		{"params sorted", &sources.Query{Resource: desks, Page: 2, MaxResults: 10, Params: []sources.Param{
			{Name: "where", Value: `{"name":"Sports"}`}, {Name: "sort", Value: `[["name",1]]`}}},
			`prodapi:v1:desks:list:page=2&max_results=10&sort=[["name",1]]&where={"name":"Sports"}`},
		{"escaped", &sources.Query{Resource: items, Page: 1, MaxResults: 25, Params: []sources.Param{
			{Name: "q", Value: "a&b=c #d%é"}}},
			"prodapi:v1:items:list:page=1&max_results=25&q=a%26b%3Dc%20%23d%25%C3%A9"},
		{"pretty", &sources.Query{Resource: items, Page: 1, MaxResults: 25, Pretty: true},
			"prodapi:v1:items:list:page=1&max_results=25&pretty=1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Key(tc.q); got != tc.want {
				t.Errorf("Key = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestKeyHashesLongRequests(t *testing.T) {
	q := list(t, "items", "source", `{"query":{"bool":{"must":[{"match":{"headline":{"query":"`+strings.Repeat("x", 200)+`"}}}]}}}`)
	got := Key(q)
	if !regexp.MustCompile(`^prodapi:v1:items:list:#[0-9a-f]{64}$`).MatchString(got) {
		t.Errorf("Key = %q, want the readable prefix and a SHA-256", got)
	}
	q.Params[0].Value += " "
	if Key(q) == got {
		t.Error("two long requests share a key")
	}
}

// Queries that must never share an entry.
func TestKeysDiffer(t *testing.T) {
	items := resource(t, "items")
	base := func() *sources.Query {
		return &sources.Query{Resource: items, Page: 1, MaxResults: 25, Params: []sources.Param{{Name: "q", Value: "a"}}}
	}
	with := func(f func(q *sources.Query)) *sources.Query {
		q := base()
		f(q)
		return q
	}
	queries := map[string]*sources.Query{
		"base":             base(),
		"other resource":   with(func(q *sources.Query) { q.Resource = resource(t, "planning") }),
		"detail":           with(func(q *sources.Query) { q.ID = "a" }),
		"other detail":     with(func(q *sources.Query) { q.ID = "b" }),
		"page":             with(func(q *sources.Query) { q.Page = 2 }),
		"max_results":      with(func(q *sources.Query) { q.MaxResults = 26 }),
		"value":            with(func(q *sources.Query) { q.Params[0].Value = "b" }),
		"name":             with(func(q *sources.Query) { q.Params[0].Name = "df" }),
		"pretty":           with(func(q *sources.Query) { q.Pretty = true }),
		"more params":      with(func(q *sources.Query) { q.Params = append(q.Params, sources.Param{Name: "x", Value: ""}) }),
		"injected &":       with(func(q *sources.Query) { q.Params[0].Value = "a&x=" }),
		"injected #":       with(func(q *sources.Query) { q.Params[0].Value = "#" }),
		"no params":        with(func(q *sources.Query) { q.Params = nil }),
		"resource colon":   with(func(q *sources.Query) { q.Resource = &sources.Resource{Name: "items:list"} }),
		"detail like list": with(func(q *sources.Query) { q.ID = "page=1&max_results=25&q=a" }),
	}
	seen := map[string]string{}
	for name, q := range queries {
		k := Key(q)
		if other, ok := seen[k]; ok {
			t.Errorf("%s and %s share the key %q", name, other, k)
		}
		seen[k] = name
	}
}

func TestKeyIgnoresParamOrder(t *testing.T) {
	a := list(t, "items", "q", "x", "sort", "[]", "where", "{}")
	b := list(t, "items", "where", "{}", "q", "x", "sort", "[]")
	before := slices.Clone(b.Params)
	if Key(a) != Key(b) {
		t.Errorf("%q != %q", Key(a), Key(b))
	}
	if !slices.Equal(before, b.Params) {
		t.Error("Key reordered the query's parameters")
	}
}

func TestAssetKey(t *testing.T) {
	if got, want := assetKey("20240115120112/photo one.jpg"), "prodapi:v1:assets:redirect:20240115120112/photo%20one.jpg"; got != want {
		t.Errorf("assetKey = %q, want %q", got, want)
	}
	if got := assetKey(strings.Repeat("a", 300)); len(got) > 100 {
		t.Errorf("long asset key not hashed: %q", got)
	}
}

// FuzzKey checks that a key does not depend on parameter order, that
// different parameter lists give different keys, and that keys stay
// within bounds.
func FuzzKey(f *testing.F) {
	f.Add("q", "election", "sort", `[["_updated",-1]]`, "", false)
	f.Add("where", `{"a&b":"c=d"}`, "where", `{"a":"b&c=d"}`, "urn:1", true)
	f.Add("a", "#", "b", "%23", "", false)
	items, _ := sources.ResourceByName("items")
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2, id string, pretty bool) {
		q := func(params ...sources.Param) *sources.Query {
			return &sources.Query{Resource: items, ID: id, Page: 1, MaxResults: 25, Pretty: pretty, Params: params}
		}
		p1, p2 := sources.Param{Name: n1, Value: v1}, sources.Param{Name: n2, Value: v2}
		k := Key(q(p1, p2))
		if Key(q(p2, p1)) != k {
			t.Fatalf("order matters: %q", k)
		}
		if p1 != p2 && Key(q(p1, p1)) == Key(q(p2, p2)) {
			t.Fatalf("(%q,%q) twice and (%q,%q) twice share %q", n1, v1, n2, v2, Key(q(p1, p1)))
		}
		if len(k) > len("prodapi:v1:items:detail:")+maxReadable {
			t.Fatalf("key of %d bytes", len(k))
		}
		for i := 0; i < len(k); i++ {
			if k[i] <= ' ' || k[i] >= 0x7f {
				t.Fatalf("key with byte %#x: %q", k[i], k)
			}
		}
	})
}

// Pages of a cursor walk are keyed by their cursor like any parameter:
// the same cursor twice shares an entry, another cursor (or none) does
// not, and a long cursor makes a hashed key of bounded length.
func TestKeyOfAWalk(t *testing.T) {
	items := resource(t, "items")
	cursors, err := query.NewCursors([]byte("a secret of the fleet's, at least thirty-two bytes"), nil)
	if err != nil {
		t.Fatal(err)
	}
	parse := func(raw string) *sources.Query {
		t.Helper()
		q, err := cursors.Parse(items, "", raw)
		if err != nil {
			t.Fatal(err)
		}
		return q
	}
	first := parse("cursor=")
	if Key(first) != Key(parse("cursor=")) || Key(first) == Key(parse("")) {
		t.Errorf("first pages: %s, %s, plain list %s", Key(first), Key(parse("cursor=")), Key(parse("")))
	}
	long, err := first.Cursor.Seal(sources.Position{Values: []any{strings.Repeat("headline ", 200), "urn:1"}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := first.Cursor.Seal(sources.Position{Values: []any{"a", "urn:2"}})
	if err != nil {
		t.Fatal(err)
	}
	k := Key(parse("cursor=" + long))
	if k != Key(parse("cursor="+long)) || k == Key(parse("cursor="+other)) || k == Key(first) {
		t.Errorf("keys of cursors: %s", k)
	}
	if len(long) < 1000 || len(k) > 256 {
		t.Errorf("a cursor of %d bytes makes a key of %d: %s", len(long), len(k), k)
	}
}
