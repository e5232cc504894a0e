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

// FuzzCursor feeds cursors, made up or a real one changed, to a parser
// with Cursors: each is refused with a 400 naming cursor, or, being a
// cursor this parser sealed for this request, opens; never a panic.
func FuzzCursor(f *testing.F) {
	c, err := NewCursors([]byte("a secret of the fleet's, at least thirty-two bytes"), nil)
	if err != nil {
		f.Fatal(err)
	}
	res, _ := sources.ResourceByName("users")
	first, err := c.Parse(res, "", "cursor=")
	if err != nil {
		f.Fatal(err)
	}
	pos := sources.Position{Values: []any{"jdoe", sources.D("a", []any{int64(1)}), nil}}
	token, err := first.Cursor.Seal(pos)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(token)
	f.Add(token[:len(token)-1])
	f.Add("")
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, cursor string) {
		q, err := c.Parse(res, "", qs("cursor", cursor))
		if err != nil {
			qe, ok := errors.AsType[*Error](err)
			if !ok || qe.Status != http.StatusBadRequest || len(qe.Message) < 8 || qe.Message[:8] != "cursor: " {
				t.Fatalf("error %#v", err)
			}
			return
		}
		// Fuzzing workers seal their own seed, under the same secret:
		// whatever opens must be that position.
		if q.Cursor == nil || (cursor == "") != (q.Cursor.After == nil) ||
			q.Cursor.After != nil && js(q.Cursor.After.Values) != js(pos.Values) {
			t.Fatalf("cursor %q opened as %+v", cursor, q.Cursor)
		}
	})
}
