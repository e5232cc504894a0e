package query

import (
	"errors"
	"net/http"
	"testing"

	"github.com/prodapi/prodapi/sources"
)

// fuzzParse parses one fuzzed parameter value on each resource and checks
// what must hold whatever the input: no panic, errors are *Error with 400
// or 414, and an accepted Query keeps every invariant (grammar, no hidden
// field or refused key, bounded depth, canonical round trip).
func fuzzParse(t *testing.T, resources []string, id string, kv ...string) {
	for _, name := range resources {
		res, _ := sources.ResourceByName(name)
		q, err := Parse(res, id, qs(kv...))
		if err != nil {
			qe, ok := errors.AsType[*Error](err)
			if !ok || qe.Status != http.StatusBadRequest && qe.Status != http.StatusRequestURITooLong || qe.Message == "" {
				t.Fatalf("%s: error %#v", name, err)
			}
			continue
		}
		checkInvariants(t, q)
	}
}

func FuzzWhere(f *testing.F) {
	f.Fuzz(func(t *testing.T, where string) {
		fuzzParse(t, []string{"users", "events_history", "items"}, "", "where", where)
	})
}

func FuzzSource(f *testing.F) {
	f.Fuzz(func(t *testing.T, source string) {
		fuzzParse(t, []string{"items", "planning"}, "", "source", source)
		fuzzParse(t, []string{"items"}, "", "filter", source, "q", source)
	})
}

func FuzzSort(f *testing.F) {
	f.Fuzz(func(t *testing.T, sort string) {
		fuzzParse(t, []string{"users", "items"}, "", "sort", sort)
		fuzzParse(t, []string{"users"}, "x", "sort", sort)
	})
}

func FuzzProjection(f *testing.F) {
	f.Fuzz(func(t *testing.T, projection string) {
		fuzzParse(t, []string{"users", "items"}, "", "projection", projection)
		fuzzParse(t, []string{"items"}, "", "projections", projection)
	})
}
