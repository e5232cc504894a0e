package render

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

type fakeReader struct {
	docs   map[string]*sources.Doc
	result *sources.Result
}

func (f fakeReader) Get(_ context.Context, res *sources.Resource, id string) (*sources.Doc, error) {
	d, ok := f.docs[id]
	if !ok {
		return nil, fmt.Errorf("fake: %w", sources.ErrNotFound)
	}
	return d.Clone(), nil
}

func (f fakeReader) Find(context.Context, *sources.Query) (*sources.Result, error) {
	r := *f.result
	r.Docs = nil
	for _, d := range f.result.Docs {
		r.Docs = append(r.Docs, d.Clone())
	}
	return &r, nil
}

// noEnrich shapes nothing and adds a marker link to every document.
var noEnrich = EnrichFunc(func(_ context.Context, _ *sources.Resource, docs []*sources.Doc, _ bool) ([]*sources.Doc, []string, error) {
	links := make([]*sources.Doc, len(docs))
	for i := range docs {
		links[i] = sources.D("planning", sources.Link("Planning", "planning/p1"))
	}
	return links, nil, nil
})

func res(name string) *sources.Resource {
	r, _ := sources.ResourceByName(name)
	return r
}

func render(t *testing.T, rd *Renderer, q *sources.Query) (*sources.Representation, string) {
	t.Helper()
	rep, err := rd.Load(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return rep, string(rep.Body)
}

func TestRenderDetail(t *testing.T) {
	updated := time.Date(2026, 11, 20, 9, 15, 0, 0, time.UTC)
	oid, _ := sources.ParseObjectID("5d76113ab3af37dea3a2eb9e")
	store := fakeReader{docs: map[string]*sources.Doc{
		"5d76113ab3af37dea3a2eb9e": sources.D("_id", oid, "name", "PROD", "_updated", updated, "task", sources.D("desk", "d", "stage", "s")),
		"c1":                       sources.D("_id", "c1", "first_name", "Brett"),
	}}
	rd := New(store, noEnrich)

	rep, body := render(t, rd, &sources.Query{Resource: res("desks"), ID: "5d76113ab3af37dea3a2eb9e", Page: 1, MaxResults: 25})
	want := `{"_id":"5d76113ab3af37dea3a2eb9e","name":"PROD","_updated":"2026-11-20T09:15:00+0000","task":{"desk":"d","stage":"s"},` +
		`"_links":{"self":{"title":"Desk","href":"desks/5d76113ab3af37dea3a2eb9e"},"parent":{"title":"home","href":"/"},` +
		`"collection":{"title":"desks","href":"desks"},"planning":{"title":"Planning","href":"planning/p1"}}}`
	if body != want {
		t.Errorf("detail:\n got %s\nwant %s", body, want)
	}
	if rep.Total != -1 || !rep.LastModified.Equal(updated) || rep.ETag != sources.ETag(rep.Body) || rep.Status != 200 {
		t.Errorf("detail metadata: %+v", rep)
	}
	if diff := cmp.Diff([]string{"desks/5d76113ab3af37dea3a2eb9e", "planning/p1"}, rep.Docs); diff != "" {
		t.Errorf("detail Docs (-want +got):\n%s", diff)
	}

	// Eve's collection and prev links carry the item request's list parameters.
	_, body = render(t, rd, &sources.Query{Resource: res("desks"), ID: "5d76113ab3af37dea3a2eb9e", Page: 3, MaxResults: 7,
		Params: []sources.Param{{Name: "where", Value: `{"a":1}`}, {Name: "pretty", Value: ""}}, Fields: sources.Projection{Fields: []string{"task.desk"}}})
	want = `{"_id":"5d76113ab3af37dea3a2eb9e","task":{"desk":"d"},"_links":{"self":{"title":"Desk","href":"desks/5d76113ab3af37dea3a2eb9e"},` +
		`"parent":{"title":"home","href":"/"},"collection":{"title":"desks","href":"desks?max_results=7&where=%7B%22a%22:1%7D&page=3&pretty="},` +
		`"prev":{"title":"previous page","href":"desks/5d76113ab3af37dea3a2eb9e?max_results=7&where=%7B%22a%22:1%7D&page=2&pretty="},` +
		`"planning":{"title":"Planning","href":"planning/p1"}}}`
	if body != want {
		t.Errorf("detail with params:\n got %s\nwant %s", body, want)
	}

	_, body = render(t, rd, &sources.Query{Resource: res("contacts"), ID: "c1", Page: 1, MaxResults: 25})
	if body != `{"_id":"c1","first_name":"Brett"}` {
		t.Errorf("contacts carry no _links: %s", body)
	}

	rep, _ = render(t, rd, &sources.Query{Resource: res("desks"), ID: "missing", Page: 1, MaxResults: 25})
	if rep.Status != 404 || rep.Body != nil {
		t.Errorf("missing detail: %+v", rep)
	}
}

func TestRenderListLinks(t *testing.T) {
	for _, tc := range []struct {
		name      string
		page, max int
		total     int
		params    []sources.Param
		want      string
	}{
		{name: "empty", page: 1, max: 25, total: 0, params: []sources.Param{{Name: "where", Value: `{"a":1}`}},
			want: `{"parent":{"title":"home","href":"/"},"self":{"title":"desks","href":"desks"}}`},
		{name: "one page", page: 1, max: 25, total: 3,
			want: `{"parent":{"title":"home","href":"/"},"self":{"title":"desks","href":"desks"}}`},
		{name: "first of three", page: 1, max: 1, total: 3,
			want: `{"parent":{"title":"home","href":"/"},"self":{"title":"desks","href":"desks?max_results=1"},` +
				`"next":{"title":"next page","href":"desks?max_results=1&page=2"},"last":{"title":"last page","href":"desks?max_results=1&page=3"}}`},
		{name: "middle", page: 2, max: 1, total: 3,
			params: []sources.Param{{Name: "where", Value: `{"name":"a b&c"}`}, {Name: "sort", Value: `[["name",-1]]`}, {Name: "projection", Value: `{"x":1}`}, {Name: "q", Value: "x+y"}},
			want: `{"parent":{"title":"home","href":"/"},` +
				`"self":{"title":"desks","href":"desks?max_results=1&where=%7B%22name%22:%22a%20b%26c%22%7D&sort=%5B%5B%22name%22,-1%5D%5D&page=2&projection=%7B%22x%22:1%7D&q=x%2By"},` +
				`"next":{"title":"next page","href":"desks?max_results=1&where=%7B%22name%22:%22a%20b%26c%22%7D&sort=%5B%5B%22name%22,-1%5D%5D&page=3&projection=%7B%22x%22:1%7D&q=x%2By"},` +
				`"last":{"title":"last page","href":"desks?max_results=1&where=%7B%22name%22:%22a%20b%26c%22%7D&sort=%5B%5B%22name%22,-1%5D%5D&page=3&projection=%7B%22x%22:1%7D&q=x%2By"},` +
				`"prev":{"title":"previous page","href":"desks?max_results=1&where=%7B%22name%22:%22a%20b%26c%22%7D&sort=%5B%5B%22name%22,-1%5D%5D&projection=%7B%22x%22:1%7D&q=x%2By"}}`},
		{name: "past the end", page: 9, max: 25, total: 3,
			want: `{"parent":{"title":"home","href":"/"},"self":{"title":"desks","href":"desks?page=9"},"prev":{"title":"previous page","href":"desks?page=8"}}`},
		{name: "saturated total", page: 2, max: 25, total: 10000,
			want: `{"parent":{"title":"home","href":"/"},"self":{"title":"desks","href":"desks?page=2"},` +
				`"next":{"title":"next page","href":"desks?page=3"},"last":{"title":"last page","href":"desks?page=400"},"prev":{"title":"previous page","href":"desks"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &sources.Query{Resource: res("desks"), Page: tc.page, MaxResults: tc.max, Params: tc.params}
			got := string(codec.AppendJSON(nil, listLinks(q, tc.total)))
			if got != tc.want {
				t.Errorf("links:\n got %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestRenderList(t *testing.T) {
	oid, _ := sources.ParseObjectID("5d76113ab3af37dea3a2eb92")
	store := fakeReader{result: &sources.Result{Total: 2, Docs: []*sources.Doc{
		sources.D("_id", oid, "headline", "Arts", "name", "a", "_updated", "2026-11-20T09:15:00.000Z"),
		sources.D("_id", "x", "headline", "News", "_links", sources.D("self", "stale")),
	}, Aggregations: sources.D("type", sources.D("buckets", []any{}))}}
	// The client's exclusion works inside the items' projection: name,
	// outside it, goes too.
	rep, body := render(t, New(store, noEnrich), &sources.Query{Resource: res("items"), Page: 1, MaxResults: 25,
		Fields: sources.Projection{Fields: []string{"_updated"}, Exclude: true}})
	want := `{"_items":[{"_id":"5d76113ab3af37dea3a2eb92","headline":"Arts","_links":{"self":{"title":"Item","href":"items/5d76113ab3af37dea3a2eb92"},"planning":{"title":"Planning","href":"planning/p1"}}},` +
		`{"_id":"x","headline":"News","_links":{"self":{"title":"Item","href":"items/x"},"planning":{"title":"Planning","href":"planning/p1"}}}],` +
		`"_links":{"parent":{"title":"home","href":"/"},"self":{"title":"Item","href":"items"}},"_meta":{"page":1,"max_results":25,"total":2},` +
		`"_aggregations":{"type":{"buckets":[]}}}`
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("list (-want +got):\n%s", diff)
	}
	if rep.Total != 2 || !rep.LastModified.Equal(time.Date(2026, 11, 20, 9, 15, 0, 0, time.UTC)) {
		t.Errorf("list metadata: total %d modified %v", rep.Total, rep.LastModified)
	}
	if diff := cmp.Diff([]string{"items/5d76113ab3af37dea3a2eb92", "items/x", "planning/p1", "planning/p1"}, rep.Docs); diff != "" {
		t.Errorf("list Docs (-want +got):\n%s", diff)
	}

	incomplete := EnrichFunc(func(context.Context, *sources.Resource, []*sources.Doc, bool) ([]*sources.Doc, []string, error) {
		return nil, []string{"planning"}, nil
	})
	rep, _ = render(t, New(store, incomplete), &sources.Query{Resource: res("contacts"), Page: 1, MaxResults: 25, Pretty: true})
	if !slices.Equal(rep.Missing, []string{"planning"}) {
		t.Errorf("Missing = %q after an incomplete enrichment, want [planning]", rep.Missing)
	}
	if want := "{\n    \"_items\": [\n        {\n            \"_id\": \"5d76113ab3af37dea3a2eb92\""; string(rep.Body[:len(want)]) != want {
		t.Errorf("pretty body starts %q", rep.Body[:60])
	}
}

// A page of a cursor walk links itself and, while the walk goes on, the
// next page by the cursor its Seal gives; no prev, no last, no page.
func TestRenderWalk(t *testing.T) {
	var sealedAt []sources.Position
	seal := func(p sources.Position) (string, error) {
		sealedAt = append(sealedAt, p)
		return "NEXT-" + p.Values[0].(string), nil
	}
	docs := []*sources.Doc{sources.D("_id", "a"), sources.D("_id", "b")}
	for _, tc := range []struct {
		name   string
		params []sources.Param
		next   *sources.Position
		want   string
	}{
		{"first page", []sources.Param{{Name: "cursor", Value: ""}}, &sources.Position{Values: []any{"b"}},
			`{"parent":{"title":"home","href":"/"},"self":{"title":"desks","href":"desks?max_results=2&cursor="},` +
				`"next":{"title":"next page","href":"desks?max_results=2&cursor=NEXT-b"}}`},
		{"a later page", []sources.Param{{Name: "where", Value: `{"a":1}`}, {Name: "cursor", Value: "HERE"}, {Name: "pretty", Value: ""}},
			&sources.Position{Values: []any{"b"}},
			`{"parent":{"title":"home","href":"/"},"self":{"title":"desks","href":"desks?max_results=2&where=%7B%22a%22:1%7D&cursor=HERE&pretty="},` +
				`"next":{"title":"next page","href":"desks?max_results=2&where=%7B%22a%22:1%7D&cursor=NEXT-b&pretty="}}`},
		{"the last page", []sources.Param{{Name: "cursor", Value: "HERE"}}, nil,
			`{"parent":{"title":"home","href":"/"},"self":{"title":"desks","href":"desks?max_results=2&cursor=HERE"}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sealedAt = nil
			rd := New(fakeReader{result: &sources.Result{Docs: docs, Total: 7, Next: tc.next}}, noEnrich)
			q := &sources.Query{Resource: res("desks"), Page: 1, MaxResults: 2, Params: tc.params, Cursor: &sources.Cursor{Seal: seal}}
			_, body := render(t, rd, q)
			v, err := codec.DecodeJSON([]byte(body), codec.DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			env := v.(*sources.Doc)
			links, _ := env.Get("_links")
			if got := string(codec.AppendJSON(nil, links)); got != tc.want {
				t.Errorf("_links\n got %s\nwant %s", got, tc.want)
			}
			meta, _ := env.Get("_meta")
			if got := string(codec.AppendJSON(nil, meta)); got != `{"max_results":2,"total":7}` {
				t.Errorf("_meta %s", got)
			}
			if (tc.next != nil) != (len(sealedAt) == 1) {
				t.Errorf("sealed %v for next %v", sealedAt, tc.next)
			}
		})
	}
}
