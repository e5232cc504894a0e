package elastic_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	essrc "github.com/prodapi/prodapi/sources/elastic"
)

func TestIndexMappings(t *testing.T) {
	m := essrc.IndexMappings()
	var got []string
	for c := range m {
		got = append(got, c)
	}
	slices.Sort(got)
	var want []string
	for _, r := range sources.Resources() {
		if r.Search {
			want = append(want, r.Collection)
		}
	}
	slices.Sort(want)
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("collections (-got +want):\n%s", diff)
	}
	// The fields the API's defaults and enrichment rely on are mapped for
	// sorting and exact matching.
	for _, tc := range []struct{ collection, path, typ string }{
		{"archive", "guid", "keyword"},
		{"archive", "_updated", "date"},
		{"archive", "versioncreated", "date"},
		{"archive", "state", "keyword"},
		{"archive", "task.desk", "keyword"},
		{"archive", "assignment_id", "keyword"},
		{"archive", "headline", "text"},
		{"archive", "headline.keyword", "keyword"},
		{"contacts", "last_name.keyword", "keyword"},
		{"events", "dates.start", "date"},
		{"events", "dates.end", "date"},
		{"planning", "event_item", "keyword"},
		{"planning", "coverages", "nested"},
		{"planning", "coverages.assigned_to.assignment_id", "keyword"},
		{"assignments", "planning.scheduled", "date"},
		{"assignments", "coverage_item", "keyword"},
		{"assignments", "planning_item", "keyword"},
	} {
		v, err := codec.DecodeJSON(m[tc.collection], codec.DecodeOptions{Strict: true})
		if err != nil {
			t.Fatalf("%s: %v", tc.collection, err)
		}
		field, _ := v.(*sources.Doc).Doc("mappings")
		for i, seg := range strings.Split(tc.path, ".") {
			key := "properties"
			if i > 0 && !field.Has("properties") {
				key = "fields"
			}
			next, _ := field.Doc(key)
			field, _ = next.Doc(seg)
		}
		if got, _ := field.String("type"); got != tc.typ {
			t.Errorf("%s %s: type %q, want %q", tc.collection, tc.path, got, tc.typ)
		}
	}
}
