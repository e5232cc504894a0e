package feed

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
)

// coalesce keeps each document's newest change, in their order; one
// that stands for changes not derived yet is to be derived with the
// document as it was before the first of those, and taken by the cache
// only if the newest was.
func TestCoalesce(t *testing.T) {
	doc := func(v string) *sources.Doc { return sources.D("v", v) }
	ch := func(id, v string, before *sources.Doc) sources.Change {
		return sources.Change{Collection: "archive", ID: id, Op: sources.OpUpdate, Version: v, Before: before}
	}
	type row struct {
		ID, Version, Before string
		Applied, Derived    bool
	}
	rows := func(q []pending) []row {
		var out []row
		for _, p := range q {
			r := row{ID: p.ch.ID, Version: p.ch.Version, Applied: p.applied, Derived: p.derived}
			if p.ch.Before != nil {
				r.Before, _ = p.ch.Before.String("v")
			}
			out = append(out, r)
		}
		return out
	}
	got := coalesce([]pending{
		{ch: ch("a", "1", doc("a0")), applied: true, derived: true},  // derived already: its dependents are queued
		{ch: ch("a", "2", doc("a1")), applied: true},                 // the first not derived
		{ch: ch("b", "1", doc("b0")), applied: false, derived: true}, // a dependent, say
		{ch: ch("a", "3", doc("a2")), applied: false},
		{ch: ch("c", "1", nil), applied: true},
		{ch: ch("c", "2", doc("c1")), applied: true, derived: true},
	})
	want := []row{
		{ID: "b", Version: "1", Before: "b0", Derived: true},
		{ID: "a", Version: "3", Before: "a1"},
		{ID: "c", Version: "2", Applied: true},
	}
	if diff := cmp.Diff(rows(got), want); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
}
