package sandbox

import (
	"errors"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/bsonorder"
	"github.com/prodapi/prodapi/sources/codec"
)

// The evaluators get validated input, but must never panic on any
// document: what they cannot evaluate is ErrInvalid.

func decodeFuzz(data []byte) (*sources.Doc, bool) {
	v, err := codec.DecodeJSON(data, codec.DecodeOptions{Extended: true, MaxDepth: 64})
	if err != nil {
		return nil, false
	}
	d, ok := v.(*sources.Doc)
	return d, ok
}

func FuzzMatch(f *testing.F) {
	f.Fuzz(func(t *testing.T, docJSON, filterJSON []byte) {
		doc, ok1 := decodeFuzz(docJSON)
		filter, ok2 := decodeFuzz(filterJSON)
		if !ok1 || !ok2 {
			return
		}
		if _, err := Match(doc, filter); err != nil && !errors.Is(err, sources.ErrInvalid) {
			t.Errorf("Match(%s, %s): %v, want nil or ErrInvalid", docJSON, filterJSON, err)
		}
		bsonorder.SortDocs([]*sources.Doc{doc, filter, doc}, []sources.SortKey{{Field: "a"}, {Field: "b.c", Desc: true}})
	})
}

func FuzzSearch(f *testing.F) {
	now := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	f.Fuzz(func(t *testing.T, docJSON, bodyJSON []byte) {
		doc, ok1 := decodeFuzz(docJSON)
		body, ok2 := decodeFuzz(bodyJSON)
		if !ok1 || !ok2 {
			return
		}
		docs := []*sources.Doc{doc, sources.D("_id", "x", "a", "b c", "n", int64(3)), body}
		if _, err := Search(docs, body, now); err != nil && !errors.Is(err, sources.ErrInvalid) {
			t.Errorf("Search(%s): %v, want nil or ErrInvalid", bodyJSON, err)
		}
	})
}

// FuzzQueryString feeds any text to query_string and simple_query_string:
// grammar's lexer and the parser above it answer or refuse, never panic.
func FuzzQueryString(f *testing.F) {
	for _, s := range []string{`headline:(a OR b) AND -"c d"~2`, `x:[1 TO 5} y:>=3 _exists_:z`, `a:`, `"`, `/re/ \`, `(((`, `+a | b* -c`} {
		f.Add(s)
	}
	now := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	docs := []*sources.Doc{sources.D("_id", "x", "headline", "a b c", "n", int64(3))}
	f.Fuzz(func(t *testing.T, s string) {
		for _, kind := range []string{"query_string", "simple_query_string"} {
			body := sources.D("query", sources.D(kind, sources.D("query", s)))
			if _, err := Search(docs, body, now); err != nil && !errors.Is(err, sources.ErrInvalid) {
				t.Errorf("%s %q: %v, want nil or ErrInvalid", kind, s, err)
			}
		}
	})
}
