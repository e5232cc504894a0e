package enrich_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/enrich"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// entries renders changes as "op collection/id".
func entries(cs []sources.Change) []string {
	out := []string{}
	for _, c := range cs {
		out = append(out, strings.TrimSuffix(c.Op+" "+c.Collection+"/"+c.ID, "/"))
	}
	return out
}

// A small newsroom where every link exists once: item i1 fulfils
// assignment a1, which covers planning p1 of event e1; p2 (of event e2)
// names a2 in a scheduled update; i2 fulfils a2.
const linkedRoom = `{
 "content_types": [{"_id": {"$oid": "5d553c333031e2855a2e0001"}, "label": "Text"}],
 "archive": [
  {"_id": "i1", "assignment_id": "a1", "profile": "5d553c333031e2855a2e0001", "state": "in_progress"},
  {"_id": "i2", "assignment_id": {"$oid": "60e403bc8361feb5664719b2"}, "state": "published"},
  {"_id": "i3", "state": "published"}],
 "assignments": [
  {"_id": "a1", "planning_item": "p1", "coverage_item": "c1", "assigned_to": {"state": "assigned"}},
  {"_id": {"$oid": "60e403bc8361feb5664719b2"}, "planning_item": "p2", "assigned_to": {"state": "in_progress"}},
  {"_id": "a3", "planning_item": "p3"}],
 "planning": [
  {"_id": "p1", "event_item": "e1", "coverages": [{"coverage_id": "c1", "assigned_to": {"assignment_id": "a1"}}]},
  {"_id": "p2", "event_item": "e2", "coverages": [{"coverage_id": "c2", "assigned_to": {},
    "scheduled_updates": [{"scheduled_update_id": "u1", "assigned_to": {"assignment_id": "60e403bc8361feb5664719b2"}}]}]},
  {"_id": "p3"}],
 "events": [{"_id": "e1", "guid": "e1"}, {"_id": "e2", "guid": "e2"}, {"_id": "e3", "guid": "e3"}]
}`

// roomStore parses a JSON object of collections into a fake looker.
func roomStore(t testing.TB, s string) *fakeLooker {
	t.Helper()
	f := &fakeLooker{data: map[string][]*sources.Doc{}}
	root := parse(t, s).(*sources.Doc)
	for coll, v := range root.All() {
		for _, d := range v.([]any) {
			f.data[coll] = append(f.data[coll], d.(*sources.Doc))
		}
	}
	return f
}

// set gives the document coll/id of f field (a dotted path, documents
// made on the way) the value; a nil value deletes the document. It
// returns the document as it was.
func (f *fakeLooker) set(t testing.TB, coll, id, field string, value any) *sources.Doc {
	t.Helper()
	for i, d := range f.data[coll] {
		if did, _ := sources.IDString(mustGet(d, "_id")); did != id {
			continue
		}
		before := d.Clone()
		if field == "" {
			f.data[coll] = slices.Delete(f.data[coll], i, i+1)
			return before
		}
		setPath(d, field, value)
		return before
	}
	t.Fatalf("no %s/%s", coll, id)
	return nil
}

func mustGet(d *sources.Doc, k string) any { v, _ := d.Get(k); return v }

func setPath(d *sources.Doc, path string, value any) {
	head, rest, more := strings.Cut(path, ".")
	if !more {
		d.Set(head, value)
		return
	}
	next, ok := d.Doc(head)
	if !ok || next == nil {
		next = sources.NewDoc()
		d.Set(head, next)
	}
	setPath(next, rest, value)
}

// Every edge of the graph, both ways: the change of a document gives
// the documents that embed it, now and (through Before or the kept
// references) before.
func TestDependents(t *testing.T) {
	const a2 = "60e403bc8361feb5664719b2"
	update := func(coll, id string) sources.Change {
		return sources.Change{Collection: coll, ID: id, Op: sources.OpUpdate, Version: "v1"}
	}
	for _, tc := range []struct {
		name   string
		edit   func(t *testing.T, f *fakeLooker) sources.Change
		before bool // pass the document as it was, as the sandbox does
		want   []string
	}{
		{"an item: its assignment, that one's planning and the planning's event", func(t *testing.T, f *fakeLooker) sources.Change {
			f.set(t, "archive", "i1", "state", "published")
			return update("archive", "i1")
		}, false, []string{"update assignments/a1", "update planning/p1", "update events/e1"}},
		{"an item named by a scheduled update's assignment", func(t *testing.T, f *fakeLooker) sources.Change {
			f.set(t, "archive", "i2", "state", "killed")
			return update("archive", "i2")
		}, false, []string{"update assignments/" + a2, "update planning/p2", "update events/e2"}},
		{"an item without an assignment", func(t *testing.T, f *fakeLooker) sources.Change {
			f.set(t, "archive", "i3", "state", "killed")
			return update("archive", "i3")
		}, false, []string{}},
		{"an item moved from a1 to a2, by Before", func(t *testing.T, f *fakeLooker) sources.Change {
			ch := update("archive", "i1")
			ch.Before = f.set(t, "archive", "i1", "assignment_id", a2)
			return ch
		}, true, []string{"update assignments/" + a2, "update assignments/a1", "update planning/p1", "update planning/p2",
			"update events/e1", "update events/e2"}},
		{"an item deleted, by Before", func(t *testing.T, f *fakeLooker) sources.Change {
			return sources.Change{Collection: "archive", ID: "i1", Op: sources.OpDelete, Version: "deleted", Before: f.set(t, "archive", "i1", "", nil)}
		}, true, []string{"update assignments/a1", "update planning/p1", "update events/e1"}},
		{"an assignment: its items, the planning naming it and their events", func(t *testing.T, f *fakeLooker) sources.Change {
			f.set(t, "assignments", "a1", "assigned_to.state", "completed")
			return update("assignments", "a1")
		}, false, []string{"update archive/i1", "update planning/p1", "update events/e1"}},
		{"an assignment named by a scheduled update, deleted", func(t *testing.T, f *fakeLooker) sources.Change {
			f.set(t, "assignments", a2, "", nil)
			return sources.Change{Collection: "assignments", ID: a2, Op: sources.OpDelete}
		}, false, []string{"update archive/i2", "update planning/p2", "update events/e2"}},
		{"a planning: the items and assignments of its coverage, its event", func(t *testing.T, f *fakeLooker) sources.Change {
			f.set(t, "planning", "p1", "_updated", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			return update("planning", "p1")
		}, false, []string{"update archive/i1", "update assignments/a1", "update events/e1"}},
		{"a planning moved from e1 to e3, by Before", func(t *testing.T, f *fakeLooker) sources.Change {
			ch := update("planning", "p1")
			ch.Before = f.set(t, "planning", "p1", "event_item", "e3")
			return ch
		}, true, []string{"update archive/i1", "update assignments/a1", "update events/e1", "update events/e3"}},
		{"an event: nothing embeds one", func(t *testing.T, f *fakeLooker) sources.Change {
			f.set(t, "events", "e1", "name", "renamed")
			return update("events", "e1")
		}, false, []string{}},
		{"a content type: the items of its profile", func(t *testing.T, f *fakeLooker) sources.Change {
			f.set(t, "content_types", "5d553c333031e2855a2e0001", "label", "Story")
			return update("content_types", "5d553c333031e2855a2e0001")
		}, false, []string{"update archive/i1"}},
		{"a desk: nothing", func(t *testing.T, f *fakeLooker) sources.Change { return update("desks", "d1") }, false, []string{}},
		{"a flush of the items: whatever embeds them", func(t *testing.T, f *fakeLooker) sources.Change {
			return sources.Change{Collection: "archive", Op: sources.OpFlush}
		}, false, []string{"flush assignments", "flush planning", "flush events"}},
		{"a flush of the assignments", func(t *testing.T, f *fakeLooker) sources.Change {
			return sources.Change{Collection: "assignments", Op: sources.OpFlush}
		}, false, []string{"flush archive", "flush planning", "flush events"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := roomStore(t, linkedRoom)
			d := enrich.NewDeriver(f, enrich.DeriveOptions{})
			ch := tc.edit(t, f)
			if !tc.before {
				ch.Before = nil
			}
			got, err := d.Dependents(context.Background(), ch)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(entries(got), tc.want); diff != "" {
				t.Errorf("dependents (-got +want):\n%s", diff)
			}
			for _, l := range f.calls {
				if l.Search {
					t.Errorf("looked up %s.%s on the search index, which lags", l.Collection, l.Field)
				}
			}
			for _, g := range got {
				if g.Op == sources.OpUpdate && (g.Version == "" || g.Version == ch.Version) && ch.Version != "" {
					t.Errorf("%s/%s: version %q, want one derived from %q", g.Collection, g.ID, g.Version, ch.Version)
				}
			}
		})
	}
}

// Without Before, what a document linked to before its change is what
// the Deriver kept when it derived the change before: an item moved
// from a1 to a2, then deleted, gives entries for a1, then a2, and their
// planning and events. Deriving a change again (a retry, another
// replica) finds the same.
func TestDependentsRemembersLinks(t *testing.T) {
	const a2 = "60e403bc8361feb5664719b2"
	f := roomStore(t, linkedRoom)
	refs := &countingRefs{m: map[string][]byte{}}
	d := enrich.NewDeriver(f, enrich.DeriveOptions{Refs: refs})
	ctx := context.Background()
	derive := func(ch sources.Change) []string {
		t.Helper()
		got, err := d.Dependents(ctx, ch)
		if err != nil {
			t.Fatal(err)
		}
		return entries(got)
	}
	first := sources.Change{Collection: "archive", ID: "i1", Op: sources.OpUpdate, Version: "v1"}
	if diff := cmp.Diff(derive(first), []string{"update assignments/a1", "update planning/p1", "update events/e1"}); diff != "" {
		t.Errorf("first change (-got +want):\n%s", diff)
	}
	f.set(t, "archive", "i1", "assignment_id", a2)
	moved := sources.Change{Collection: "archive", ID: "i1", Op: sources.OpUpdate, Version: "v2"}
	want := []string{"update assignments/" + a2, "update assignments/a1", "update planning/p1", "update planning/p2",
		"update events/e1", "update events/e2"}
	if diff := cmp.Diff(derive(moved), want); diff != "" {
		t.Errorf("moved (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(derive(moved), want); diff != "" {
		t.Errorf("moved, derived again (-got +want):\n%s", diff)
	}
	f.set(t, "archive", "i1", "", nil)
	deleted := sources.Change{Collection: "archive", ID: "i1", Op: sources.OpDelete, Version: "deleted"}
	if diff := cmp.Diff(derive(deleted), []string{"update assignments/" + a2, "update planning/p2", "update events/e2"}); diff != "" {
		t.Errorf("deleted (-got +want):\n%s", diff)
	}
	if got := refs.ttls["archive/i1"]; got <= 0 {
		t.Errorf("a deleted document's references are kept for %v, want a while", got)
	}
	// Documents whose links are all by _id keep nothing.
	derive(sources.Change{Collection: "assignments", ID: "a1", Op: sources.OpUpdate, Version: "v1"})
	if _, ok := refs.m["assignments/a1"]; ok {
		t.Error("kept references of an assignment, which nothing links to by a field of its own")
	}
}

// countingRefs is a RefStore in a map that records the TTLs.
type countingRefs struct {
	mu   sync.Mutex
	m    map[string][]byte
	ttls map[string]time.Duration
	fail error
}

func (r *countingRefs) Refs(_ context.Context, coll, id string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return nil, r.fail
	}
	return r.m[coll+"/"+id], nil
}

func (r *countingRefs) SaveRefs(_ context.Context, coll, id string, b []byte, ttl time.Duration) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ttls == nil {
		r.ttls = map[string]time.Duration{}
	}
	if b == nil {
		delete(r.m, coll+"/"+id)
	} else {
		r.m[coll+"/"+id] = b
	}
	r.ttls[coll+"/"+id] = ttl
	return nil
}

// Past the bound, a flush of the collection stands for its documents'
// entries; the others are listed still.
func TestDependentsBound(t *testing.T) {
	f := roomStore(t, linkedRoom)
	for i := range 3 {
		f.data["archive"] = append(f.data["archive"], sources.D("_id", fmt.Sprintf("x%d", i), "assignment_id", "a1"))
	}
	d := enrich.NewDeriver(f, enrich.DeriveOptions{Bound: 3})
	got, err := d.Dependents(context.Background(), sources.Change{Collection: "assignments", ID: "a1", Op: sources.OpUpdate})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(entries(got), []string{"flush archive", "update planning/p1", "update events/e1"}); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
	for _, l := range f.calls {
		if l.Limit != 4 {
			t.Errorf("lookup %s.%s with limit %d, want the bound and one", l.Collection, l.Field, l.Limit)
		}
	}
}

// Derive puts each change's dependents after it, and leaves out a
// derived change that a later one of the same document supersedes. A
// failed lookup fails it.
func TestDerive(t *testing.T) {
	f := roomStore(t, linkedRoom)
	d := enrich.NewDeriver(f, enrich.DeriveOptions{})
	got, err := d.Derive(context.Background(), []sources.Change{
		{Collection: "assignments", ID: "a1", Op: sources.OpUpdate, Version: "1"},
		{Collection: "planning", ID: "p1", Op: sources.OpUpdate, Version: "2"},
		{Collection: "desks", ID: "d1", Op: sources.OpUpdate, Version: "3"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"update assignments/a1", "update planning/p1", "update archive/i1", "update assignments/a1", "update events/e1", "update desks/d1"}
	if diff := cmp.Diff(entries(got), want); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}

	down := errors.New("mongo: down")
	f.fail = func(sources.Lookup) error { return down }
	if _, err := d.Derive(context.Background(), []sources.Change{{Collection: "assignments", ID: "a1", Op: sources.OpUpdate}}); !errors.Is(err, down) {
		t.Errorf("a failed lookup: %v, want it", err)
	}
	f.fail = nil
	refs := &countingRefs{m: map[string][]byte{}, fail: down}
	d = enrich.NewDeriver(f, enrich.DeriveOptions{Refs: refs})
	if _, err := d.Derive(context.Background(), []sources.Change{{Collection: "archive", ID: "i1", Op: sources.OpUpdate}}); !errors.Is(err, down) {
		t.Errorf("failed references: %v, want it", err)
	}
}

// The Deriver is complete: whatever one edit changes in another
// document's served representation (detail shaping and _links, with the
// enrichers as they are), the edit derives an entry for that document,
// whether the Deriver has the document as it was (Before) or only what
// it kept when it derived the change before. An edge the enrichers follow
// and the graph lacks fails here.
func TestDerivedEntriesCoverEveryEmbedding(t *testing.T) {
	base := loadStore(t, "testdata/linked")
	ids := func(coll string) []any {
		var out []any
		for _, d := range base.data[coll] {
			out = append(out, mustGet(d, "_id"))
		}
		return out
	}
	later := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	fields := map[string]map[string][]any{
		"archive": {"assignment_id": append(ids("assignments"), ""), "state": {"killed"}, "pubstatus": {"canceled"},
			"_updated": {later}, "profile": ids("content_types")},
		"assignments": {"assigned_to.state": {"cancelled"}, "planning_item": ids("planning"), "priority": {int64(9)},
			"planning.scheduled": {later}, "planning.g2_content_type": {"video"}, "coverage_item": {"urn:cov:7", "urn:cov:6"},
			"scheduled_update_id": {"urn:su:2"}, "assigned_to.desk": {"d9"}},
		"planning": {"event_item": append(ids("events"), ""), "_updated": {later},
			"coverages": {[]any{sources.D("coverage_id", "urn:cov:6", "assigned_to", sources.D("assignment_id", "60e403bc8361feb5664719b2"))}}},
		"events":        {"guid": {"urn:event:3", "urn:event:9"}, "name": {"renamed"}},
		"content_types": {"label": {"Renamed"}, "output_name": {"Out"}},
	}
	served := func(f *fakeLooker) map[string]string {
		out := map[string]string{}
		for _, r := range []string{"items", "assignments", "planning", "events"} {
			res := resource(t, r)
			docs := cloneDocs(f.data[res.Collection])
			links, _, err := enrich.New(f, enrich.Options{}).Enrich(context.Background(), res, docs, true)
			if err != nil {
				t.Fatal(err)
			}
			for i, d := range docs {
				id, _ := sources.IDString(mustGet(d, "_id"))
				out[res.Collection+"/"+id] = string(codec.AppendJSON(nil, d)) + string(codec.AppendJSON(nil, links[i]))
			}
		}
		return out
	}
	clone := func() *fakeLooker {
		f := &fakeLooker{data: map[string][]*sources.Doc{}}
		for c, docs := range base.data {
			f.data[c] = cloneDocs(docs)
		}
		return f
	}
	was := served(base)
	edits := 0
	for _, coll := range slices.Sorted(maps.Keys(fields)) {
		for _, doc := range base.data[coll] {
			id, _ := sources.IDString(mustGet(doc, "_id"))
			type edit struct {
				field string
				value any
			}
			var all []edit
			for _, field := range slices.Sorted(maps.Keys(fields[coll])) {
				for _, v := range fields[coll][field] {
					all = append(all, edit{field, v})
				}
			}
			all = append(all, edit{}) // deleted
			for _, ed := range all {
				name := fmt.Sprintf("%s/%s %s=%v", coll, id, ed.field, ed.value)
				f := clone()
				before := f.set(t, coll, id, ed.field, ed.value)
				ch := sources.Change{Collection: coll, ID: id, Op: sources.OpUpdate, Version: "v2"}
				if ed.field == "" {
					ch.Op, ch.Version = sources.OpDelete, "deleted"
				}
				now := served(f)
				var changed []string
				for k, v := range now {
					if w, ok := was[k]; ok && w != v && k != coll+"/"+id {
						changed = append(changed, k)
					}
				}
				edits++
				// With Before, as the sandbox gives it.
				withBefore := ch
				withBefore.Before = before
				check(t, name+" (Before)", enrich.NewDeriver(f, enrich.DeriveOptions{}), withBefore, changed)
				// With what was kept when the document changed before.
				refs := &countingRefs{m: map[string][]byte{}}
				if _, err := enrich.NewDeriver(clone(), enrich.DeriveOptions{Refs: refs}).Dependents(context.Background(),
					sources.Change{Collection: coll, ID: id, Op: sources.OpUpdate, Version: "v1"}); err != nil {
					t.Fatal(err)
				}
				check(t, name+" (kept)", enrich.NewDeriver(f, enrich.DeriveOptions{Refs: refs}), ch, changed)
			}
		}
	}
	t.Logf("%d edits", edits)
}

// check fails when an edit changed a document the Deriver does not name.
func check(t *testing.T, name string, d *enrich.Deriver, ch sources.Change, changed []string) {
	t.Helper()
	got, err := d.Dependents(context.Background(), ch)
	if err != nil {
		t.Fatal(err)
	}
	named := map[string]bool{}
	for _, g := range got {
		if g.Op == sources.OpFlush {
			t.Errorf("%s: a flush of %s, want entries", name, g.Collection)
		}
		named[g.Collection+"/"+g.ID] = true
	}
	for _, k := range changed {
		if !named[k] {
			t.Errorf("%s changes %s, which gets no entry (entries: %v)", name, k, entries(got))
		}
	}
}

// DeriveLookups is the list of every lookup a Deriver makes: deriving a
// change of every document of every collection makes each one, and
// nothing else.
func TestDeriveLookupsListsEveryLookup(t *testing.T) {
	store := loadStore(t, "testdata/linked")
	d := enrich.NewDeriver(store, enrich.DeriveOptions{})
	for coll, docs := range store.data {
		for _, doc := range docs {
			id, _ := sources.IDString(mustGet(doc, "_id"))
			if _, err := d.Dependents(context.Background(), sources.Change{Collection: coll, ID: id, Op: sources.OpUpdate}); err != nil {
				t.Fatal(err)
			}
		}
	}
	sameLookups(t, store.calls, enrich.DeriveLookups(), "the Deriver", "DeriveLookups")
}
