package server_test

import (
	"flag"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/enrich"
	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/server/render"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	"github.com/prodapi/prodapi/sources/sandbox"
)

var update = flag.Bool("update", false, "rewrite server/testdata/*.golden from the responses")

// newSampleServer serves the bundled sample newsroom through the real
// pipeline (sandbox → enrich → renderer → server), without a cache and
// without auth: the goldens pin bodies, which the cache does not change.
func newSampleServer(t *testing.T) *httptest.Server {
	t.Helper()
	store, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := enrich.New(store, enrich.Options{MediaPrefix: "http://localhost:5500/prodapi/v1/assets"})
	srv := server.New(render.New(store, e.Enrich), server.Options{})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// TestGolden pins representative responses of every resource: list
// envelopes and links, details with every _links kind, shaping (renditions,
// body_html, profile names, coverage sync, exclusions), aggregations and
// errors. Bodies are compared indented, field order included.
func TestGolden(t *testing.T) {
	ts := newSampleServer(t)
	for _, tc := range []struct{ name, target string }{
		{"home", "/prodapi/v1"},
		{"items_list", "/prodapi/v1/items?max_results=3"},
		{"items_list_page2", "/prodapi/v1/items?max_results=2&page=2&sort=[(\"versioncreated\",-1)]"},
		{"items_source_aggs", `/prodapi/v1/items?source={"query":{"term":{"type":"picture"}},"size":2,"aggs":{"states":{"terms":{"field":"state"}}}}`},
		{"items_q", `/prodapi/v1/items?q=flood&df=headline&max_results=2`},
		{"items_projection", `/prodapi/v1/items?max_results=2&projection={"headline":1,"state":1}`},
		{"desks_list", "/prodapi/v1/desks"},
		{"desks_where", `/prodapi/v1/desks?where={"name":"Sport"}`},
		{"users_list", "/prodapi/v1/users?max_results=2"},
		{"contacts_list", "/prodapi/v1/contacts?max_results=3"},
		{"contacts_inactive", `/prodapi/v1/contacts?source={"query":{"filtered":{"filter":{"bool":{"must":{"term":{"is_active":false}}}}}}}`},
		{"events_list", "/prodapi/v1/events?max_results=2"},
		{"events_files_list", "/prodapi/v1/events_files"},
		{"events_history_list", "/prodapi/v1/events_history?max_results=2"},
		{"planning_list", "/prodapi/v1/planning?max_results=2"},
		{"assignments_list", "/prodapi/v1/assignments?max_results=3"},
		{"not_found", "/prodapi/v1/items/urn:no-such-item"},
		{"bad_where", `/prodapi/v1/users?where={"password":{"$exists":true}}`},
	} {
		t.Run(tc.name, func(t *testing.T) { checkGolden(t, ts, tc.name, tc.target) })
	}
	// Details of the documents that carry every kind of link.
	for _, tc := range []struct{ name, collection, slug string }{
		{"item_with_links", "archive", "council-budget"},
		{"item_with_associations", "archive", "millbrook-crossing"},
		{"assignment_with_content", "assignments", "council-budget"},
		{"planning_with_event", "planning", "council-budget"},
		{"event_with_plannings", "events", "council-budget"},
		{"desk", "desks", ""},
		{"user", "users", ""},
		{"contact", "contacts", ""},
		{"events_history", "events_history", ""},
		{"events_file", "events_files", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := sampleID(t, tc.collection, tc.slug)
			res, _ := sources.ResourceByCollection(tc.collection)
			checkGolden(t, ts, tc.name, "/prodapi/v1/"+res.Name+"/"+id)
		})
	}
}

// sampleID finds a document of the sample by slugline (or the first
// one); for assignments, the one delivered by the item with that slugline.
func sampleID(t *testing.T, collection, slug string) string {
	t.Helper()
	find := func(collection string, match func(*sources.Doc) bool) *sources.Doc {
		b, err := os.ReadFile(filepath.Join("..", "sources", "sandbox", "sample", collection+".json"))
		if err != nil {
			t.Fatal(err)
		}
		v, err := codec.DecodeJSON(b, codec.DecodeOptions{Extended: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range v.([]any) {
			if doc := d.(*sources.Doc); match(doc) {
				return doc
			}
		}
		t.Fatalf("no %s document with slugline %q in the sample", collection, slug)
		return nil
	}
	bySlug := func(d *sources.Doc) bool { s, _ := d.String("slugline"); return slug == "" || s == slug }
	if collection == "assignments" {
		item := find("archive", bySlug)
		id, _ := item.String("assignment_id")
		return id
	}
	idv, _ := find(collection, bySlug).Get("_id")
	id, _ := sources.IDString(idv)
	return id
}

func checkGolden(t *testing.T, ts *httptest.Server, name, target string) {
	t.Helper()
	res, err := http.Get(ts.URL + strings.ReplaceAll(target, " ", "%20"))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	v, err := codec.DecodeJSON(body, codec.DecodeOptions{})
	if err != nil {
		t.Fatalf("GET %s: %d, body is not JSON: %v\n%s", target, res.StatusCode, err, body)
	}
	got := "GET " + target + "\n" + res.Status + "\n" + string(codec.AppendJSONIndent(nil, v, "  ")) + "\n"
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./server -run TestGolden -update)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("GET %s differs from %s (-want +got):\n%s", target, path, diff)
	}
}
