package enrich_test

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/enrich"
	"github.com/prodapi/prodapi/sources"
)

// Lookups is the list of every lookup the enrichers make: enriching a
// page of every kind where each link exists makes each one, and nothing
// else.
func TestLookupsListsEveryLookup(t *testing.T) {
	shape := func(l sources.Lookup) sources.Lookup {
		return sources.Lookup{Collection: l.Collection, Field: l.Field, Sort: l.Sort, Search: l.Search}
	}
	store := loadStore(t, "testdata/linked")
	e := enrich.New(store, enrich.Options{})
	for _, r := range []string{"items", "assignments", "planning", "events"} {
		coll := resource(t, r).Collection
		for _, detail := range []bool{false, true} {
			if _, missing, err := e.Enrich(context.Background(), resource(t, r), cloneDocs(store.data[coll]), detail); err != nil || len(missing) > 0 {
				t.Fatalf("Enrich(%s): missing %v, err %v", r, missing, err)
			}
		}
	}
	var made []sources.Lookup
	for _, l := range store.calls {
		if l := shape(l); !slices.ContainsFunc(made, func(m sources.Lookup) bool { return cmp.Equal(m, l) }) {
			made = append(made, l)
		}
	}
	listed := enrich.Lookups()
	for _, l := range made {
		if !slices.ContainsFunc(listed, func(m sources.Lookup) bool { return cmp.Equal(m, l) }) {
			t.Errorf("the enrichers look up %+v, which Lookups does not list", l)
		}
	}
	for _, l := range listed {
		if !slices.ContainsFunc(made, func(m sources.Lookup) bool { return cmp.Equal(m, l) }) {
			t.Errorf("Lookups lists %+v, which no enricher made", l)
		}
	}
}
