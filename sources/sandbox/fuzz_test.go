package sandbox

import (
	"errors"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
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
		SortDocs([]*sources.Doc{doc, filter, doc}, []sources.SortKey{{Field: "a"}, {Field: "b.c", Desc: true}})
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
