package enrich_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/enrich"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

var update = flag.Bool("update", false, "rewrite the generated files of testdata/want from the current output")

const mediaPrefix = "http://localhost:5500/prodapi/v1/assets"

// render attaches _links as server/render does: self first, then
// the enrichment links, as the last key of each document.
func render(res *sources.Resource, docs, links []*sources.Doc) []any {
	out := make([]any, len(docs))
	for i, d := range docs {
		v, _ := d.Get("_id")
		id, _ := sources.IDString(v)
		l := sources.D("self", sources.D("title", res.ItemTitle, "href", res.Name+"/"+id))
		for _, f := range links[i].Fields() {
			l.Set(f.Key, f.Value)
		}
		d.Delete("_links")
		d.Set("_links", l)
		out[i] = d
	}
	return out
}

// indent encodes v as indented JSON, so that key order counts and diffs
// read line by line.
func indent(v any) string {
	return string(codec.AppendJSONIndent(nil, v, "  "))
}

// TestGolden runs Enrich over upstream-shaped examples of the original's
// answers (the planning list of P1, the assignment list of A1 and the
// item detail of d1be79f4, written by hand in testdata/want from what the
// original served) and over a data set where every kind of link exists
// (testdata/linked). Expectations marked gen were generated with -update
// and then reviewed line by line.
func TestGolden(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resource string
		store    string // directory of collections the lookups read
		input    string // the page
		index    int    // -1: the whole page; otherwise that document only
		detail   bool
		want     string
		gen      bool // the want file was generated (and reviewed); -update rewrites it
	}{
		{"planning list (P1)", "planning", "testdata", "testdata/planning.json", -1, false, "planning_list.json", false},
		{"planning detail P1", "planning", "testdata", "testdata/planning.json", 0, true, "planning_detail.json", false},
		{"assignment list (A1)", "assignments", "testdata", "testdata/assignments.json", -1, false, "assignment_list.json", false},
		{"item detail d1be79f4", "items", "testdata", "testdata/archive.json", 0, true, "item_detail.json", false},
		{"item list d1be79f4", "items", "testdata", "testdata/archive.json", -1, false, "item_list.json", true},
		{"linked items", "items", "testdata/linked", "testdata/linked/archive.json", -1, false, "linked_items.json", true},
		{"linked assignments", "assignments", "testdata/linked", "testdata/linked/assignments.json", -1, false, "linked_assignments.json", true},
		{"linked planning", "planning", "testdata/linked", "testdata/linked/planning.json", -1, false, "linked_planning.json", true},
		{"linked events", "events", "testdata/linked", "testdata/linked/events.json", -1, false, "linked_events.json", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := resource(t, tc.resource)
			store := loadStore(t, tc.store)
			docs := loadDocs(t, tc.input)
			if tc.index >= 0 {
				docs = docs[tc.index : tc.index+1]
			}
			e := enrich.New(store, enrich.Options{MediaPrefix: mediaPrefix + "/"})
			links, missing, err := e.Enrich(context.Background(), res, docs, tc.detail)
			if err != nil || len(missing) > 0 {
				t.Fatalf("Enrich: missing %v, err %v", missing, err)
			}
			var got any = render(res, docs, links)
			if tc.index >= 0 {
				got = got.([]any)[0]
			}
			path := filepath.Join("testdata", "want", tc.want)
			if *update && tc.gen {
				if err := os.WriteFile(path, append([]byte(indent(got)), '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want, err := codec.DecodeJSON(data, codec.DecodeOptions{})
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			if diff := cmp.Diff(indent(got), indent(want)); diff != "" {
				t.Errorf("Enrich output mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

// TestRenditionsAsUpstream is core's test_renditions: the association's
// renditions equal exactly these four, with no media key.
func TestRenditionsAsUpstream(t *testing.T) {
	store := loadStore(t, "testdata")
	docs := loadDocs(t, "testdata/archive.json")[:1]
	e := enrich.New(store, enrich.Options{MediaPrefix: mediaPrefix})
	if _, _, err := e.Enrich(context.Background(), resource(t, "items"), docs, true); err != nil {
		t.Fatal(err)
	}
	got, _ := docs[0].Path("associations.editor_0.renditions")
	r := func(h, w, x, y int64, media string) *sources.Doc {
		return sources.D("href", mediaPrefix+"/"+media+".jpg", "mimetype", "image/jpeg", "width", w, "height", h,
			"poi", sources.D("x", x, "y", y))
	}
	want := sources.D(
		"original", r(1280, 1920, 960, 640, "5d553c333031e2855a2e5662"),
		"baseImage", r(933, 1400, 700, 466, "5d553c343031e2855a2e5664"),
		"thumbnail", r(120, 180, 90, 60, "5d553c343031e2855a2e5666"),
		"viewImage", r(426, 640, 320, 213, "5d553c343031e2855a2e5668"),
	)
	if diff := cmp.Diff(indent(got), indent(want)); diff != "" {
		t.Errorf("renditions (-got +want):\n%s", diff)
	}
}
