package cache

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/sources"
)

func TestApplyChanges(t *testing.T) {
	e := newEnv(t, withDocs)
	ctx := context.Background()
	i1, i2, items := detail(t, "items", "i1"), detail(t, "items", "i2"), list(t, "items")
	p1, planning := detail(t, "planning", "p9"), list(t, "planning")
	all := []*sources.Query{i1, i2, items, p1, planning}
	load := func() {
		for _, q := range all {
			e.load(t, q)
		}
	}
	held := func() (out []bool) {
		for _, q := range all {
			out = append(out, localHas(e.c, q))
		}
		return out
	}
	check := func(what string, want ...bool) {
		t.Helper()
		got := held()
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: %s kept = %v, want %v", what, Key(all[i]), got[i], want[i])
			}
		}
	}

	load()
	// An item corrected in the archive collection: its detail and the
	// items lists go; other items and other resources stay.
	e.clock.Advance(3 * time.Second)
	if err := e.c.Apply(ctx, []sources.Change{{Collection: "archive", ID: "i1", Op: sources.OpUpdate, At: e.clock.Now().Add(-2 * time.Second)}}); err != nil {
		t.Fatal(err)
	}
	check("archive i1 updated", false, true, false, true, true)
	if lag := e.metrics.Gauge("prodapi_cache_change_lag_seconds", "").Value(); lag != 2 {
		t.Errorf("change lag %v, want 2", lag)
	}

	load()
	// A content type changes every item's shape.
	if err := e.c.Apply(ctx, []sources.Change{{Collection: "content_types", ID: "ct", Op: sources.OpUpdate}}); err != nil {
		t.Fatal(err)
	}
	check("content type updated", false, false, false, true, true)

	load()
	// A stream that cannot resume flushes its collections' resources.
	if err := e.c.Apply(ctx, []sources.Change{{Collection: "planning", Op: sources.OpFlush}}); err != nil {
		t.Fatal(err)
	}
	check("planning flushed", true, true, true, false, false)
	if got := e.metrics.Counter("prodapi_cache_changes_total", "op").Value("flush"); got != 1 {
		t.Errorf("flushes counted %d", got)
	}
}

// A search index shows a write a moment after the database: a list
// loaded in between is invalidated once more.
func TestApplyInvalidatesSearchListsAgain(t *testing.T) {
	e := newEnv(t, withDocs)
	ring := make(chan time.Time)
	e.c.bg.after = func(time.Duration) <-chan time.Time { return ring }
	ctx := context.Background()
	items, desks := list(t, "items"), list(t, "desks")
	e.load(t, items)
	e.load(t, desks)
	if err := e.c.Apply(ctx, []sources.Change{{Collection: "archive", ID: "i1", Op: sources.OpUpdate},
		{Collection: "desks", ID: "d1", Op: sources.OpUpdate}}); err != nil {
		t.Fatal(err)
	}
	// Loaded again before the index caught up...
	e.load(t, items)
	e.load(t, desks)
	// ...and dropped by the second invalidation; desks, not searched, stay.
	ring <- time.Time{}
	e.c.bg.running.Wait()
	if localHas(e.c, items) || !localHas(e.c, desks) {
		t.Errorf("after the second invalidation: items kept %v, desks kept %v", localHas(e.c, items), localHas(e.c, desks))
	}
}

// ApplyLocal drops what Apply drops, in this process alone: nothing is
// written to Redis (no generation), so other replicas and Redis entries
// are the appender's business (its Apply).
func TestApplyLocal(t *testing.T) {
	e := newEnv(t, withDocs)
	ctx := context.Background()
	i1, i2, items := detail(t, "items", "i1"), detail(t, "items", "i2"), list(t, "items")
	p1, planning := detail(t, "planning", "p9"), list(t, "planning")
	all := []*sources.Query{i1, i2, items, p1, planning}
	for _, step := range []struct {
		what    string
		changes []sources.Change
		want    []bool
	}{
		{"archive i1 updated", []sources.Change{{Collection: "archive", ID: "i1", Op: sources.OpUpdate}}, []bool{false, true, false, true, true}},
		{"content type updated", []sources.Change{{Collection: "content_types", ID: "ct", Op: sources.OpUpdate}}, []bool{false, false, false, true, true}},
		{"planning flushed", []sources.Change{{Collection: "planning", Op: sources.OpFlush}}, []bool{true, true, true, false, false}},
	} {
		for _, q := range all {
			e.load(t, q)
		}
		// The generations: what an invalidation writes. (Other keys come
		// and go on their own: a load's lease is released off the request
		// path.)
		gens := genKeys(e.m)
		e.c.ApplyLocal(ctx, step.changes)
		var got []bool
		for _, q := range all {
			got = append(got, localHas(e.c, q))
		}
		if diff := cmp.Diff(got, step.want); diff != "" {
			t.Errorf("%s: kept (-got +want):\n%s", step.what, diff)
		}
		if keys := genKeys(e.m); !slices.Equal(keys, gens) {
			t.Errorf("%s: Redis's generations went from %q to %q: ApplyLocal wrote to them", step.what, gens, keys)
		}
	}
	if got := e.metrics.Counter("prodapi_cache_changes_total", "op").Value("update"); got != 0 {
		t.Errorf("ApplyLocal counted %d changes: the appender's Apply counts them", got)
	}
}

// genKeys are m's generation keys with their values, "key=value".
func genKeys(m *miniredis.Miniredis) []string {
	var out []string
	for _, k := range m.Keys() {
		if strings.HasPrefix(k, redistier.Prefix+"gen:") {
			v, _ := m.Get(k)
			out = append(out, k+"="+v)
		}
	}
	return out
}
