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
	sameLookups(t, store.calls, enrich.Lookups(), "the enrichers", "Lookups")
}

// sameLookups fails for each shape of the lookups made that listed
// lacks, and each listed that none made.
func sameLookups(t *testing.T, calls, listed []sources.Lookup, maker, lister string) {
	t.Helper()
	var made []sources.Lookup
	for _, l := range calls {
		l = sources.Lookup{Collection: l.Collection, Field: l.Field, Sort: l.Sort, Search: l.Search}
		if !slices.ContainsFunc(made, func(m sources.Lookup) bool { return cmp.Equal(m, l) }) {
			made = append(made, l)
		}
	}
	for _, l := range made {
		if !slices.ContainsFunc(listed, func(m sources.Lookup) bool { return cmp.Equal(m, l) }) {
			t.Errorf("%s look up %+v, which %s does not list", maker, l, lister)
		}
	}
	for _, l := range listed {
		if !slices.ContainsFunc(made, func(m sources.Lookup) bool { return cmp.Equal(m, l) }) {
			t.Errorf("%s lists %+v, which %s did not make", lister, l, maker)
		}
	}
}
