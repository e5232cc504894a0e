package enrich_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/enrich"
	"github.com/prodapi/prodapi/sources"
)

// newsroom builds a store where every link of every kind exists, and pages
// of n documents of each resource over it: item i names assignment i,
// which fulfils coverage i of planning i (with a scheduled update handled
// by assignment i+n), which covers event i; two archive items fulfil each
// assignment.
func newsroom(n int) (store *fakeLooker, pages map[string][]*sources.Doc) {
	day := time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)
	oid := func(kind, i int) sources.ObjectID {
		id, _ := sources.ParseObjectID(fmt.Sprintf("%08x%08x%08x", 0x60e403bc, kind, i))
		return id
	}
	store = &fakeLooker{data: map[string][]*sources.Doc{}}
	pages = map[string][]*sources.Doc{}
	add := func(c string, d *sources.Doc) { store.data[c] = append(store.data[c], d) }
	for k := range 3 {
		add("content_types", sources.D("_id", oid(9, k), "label", fmt.Sprintf("Type %d", k)))
	}
	for i := range n {
		planning := fmt.Sprintf("urn:planning:%d", i)
		event := fmt.Sprintf("urn:event:%d", i)
		cov := fmt.Sprintf("urn:coverage:%d", i)
		upd := fmt.Sprintf("urn:update:%d", i)
		a, u := oid(1, i), oid(1, i+n)
		for _, x := range []struct {
			id      sources.ObjectID
			cov     string
			updKey  string
			updated time.Time
		}{{a, cov, "", day}, {u, cov, upd, day.Add(time.Hour)}} {
			d := sources.D("_id", x.id, "planning_item", planning, "coverage_item", x.cov,
				"assigned_to", sources.D("desk", "d", "user", "u", "state", "assigned"),
				"planning", sources.D("scheduled", day.Add(time.Duration(i)*time.Minute), "g2_content_type", "text"),
				"priority", int64(2), "_updated", x.updated)
			if x.updKey != "" {
				d.Set("scheduled_update_id", x.updKey)
			}
			add("assignments", d)
		}
		for j := range 2 {
			add("archive", sources.D("_id", fmt.Sprintf("urn:item:%d:%d", i, j), "guid", fmt.Sprintf("urn:item:%d:%d", i, j),
				"state", "published", "pubstatus", "usable", "assignment_id", a.Hex(), "_updated", day.Add(time.Duration(j)*time.Hour)))
		}
		p := sources.D("_id", planning, "guid", planning, "event_item", event, "_updated", day, "flags", sources.D(),
			"coverages", []any{sources.D("coverage_id", cov,
				"planning", sources.D("scheduled", day),
				"assigned_to", sources.D("assignment_id", a.Hex(), "state", "assigned"),
				"scheduled_updates", []any{sources.D("scheduled_update_id", upd,
					"assigned_to", sources.D("assignment_id", u.Hex(), "state", "assigned"))})})
		add("planning", p)
		add("events", sources.D("_id", event, "guid", event, "name", "Event", "_planning_schedule", []any{}))
		pages["items"] = append(pages["items"], sources.D("_id", fmt.Sprintf("urn:page:%d", i), "guid", fmt.Sprintf("urn:page:%d", i),
			"profile", oid(9, i%4).Hex(), "assignment_id", a.Hex(), "body_html", "<p>x</p>",
			"renditions", sources.D("original", sources.D("media", oid(7, i).Hex(), "mimetype", "image/jpeg", "href", "http://old/x.jpg")),
			"_etag", "e", "lock_user", nil))
	}
	pages["assignments"] = store.data["assignments"][:n]
	pages["planning"] = store.data["planning"]
	pages["events"] = store.data["events"]
	return store, pages
}

// TestQueryBound: a page costs the same number of lookups whatever its
// size, within the bound doc.go gives, and each step runs exactly once.
func TestQueryBound(t *testing.T) {
	for _, tc := range []struct {
		resource string
		bound    int
		want     []string
	}{
		{"items", 3, []string{"assignments._id", "content_types._id", "planning._id"}},
		{"assignments", 3, []string{"archive.assignment_id", "planning._id"}},
		{"planning", 4, []string{"archive.assignment_id", "assignments._id", "assignments.coverage_item", "assignments.scheduled_update_id"}},
		{"events", 4, []string{"archive.assignment_id", "assignments._id", "planning.event_item"}},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			for _, n := range []int{1, 5, 100, 500} {
				store, pages := newsroom(n)
				docs := cloneDocs(pages[tc.resource])
				e := enrich.New(store, enrich.Options{})
				links, missing, err := e.Enrich(context.Background(), resource(t, tc.resource), docs, false)
				if err != nil || len(missing) > 0 {
					t.Fatalf("n=%d: missing %v, err %v", n, missing, err)
				}
				if got := store.count(); got > tc.bound {
					t.Errorf("n=%d: %d lookups, bound %d", n, got, tc.bound)
				}
				if diff := cmp.Diff(store.lookups(), tc.want); diff != "" {
					t.Errorf("n=%d: lookups (-got +want):\n%s", n, diff)
				}
				for i, l := range links {
					if l.Len() == 0 {
						t.Fatalf("n=%d: document %d got no links; the page does not exercise every step", n, i)
					}
				}
			}
		})
	}
}

// TestNoLookupWithoutValues: steps with nothing to look up make no query.
func TestNoLookupWithoutValues(t *testing.T) {
	for _, tc := range []struct {
		resource, page string
	}{
		{"items", `[{"_id":"i","profile":"belga_text"},{"_id":"j","assignment_id":null}]`},
		{"assignments", `[{"planning_item":null}]`},
		{"planning", `[{"_id":"p"},{"_id":"q","coverages":[{"assigned_to":{}}]}]`},
		{"events", `[{"_id":"e"}]`},
		{"desks", `[{"_id":"d"}]`},
		{"users", `[{"_id":"u"}]`},
		{"contacts", `[{"_id":"c"}]`},
		{"events_files", `[{"_id":"f"}]`},
		{"events_history", `[{"_id":"h"}]`},
	} {
		t.Run(tc.resource, func(t *testing.T) {
			store := &fakeLooker{}
			e := enrich.New(store, enrich.Options{})
			if _, _, err := e.Enrich(context.Background(), resource(t, tc.resource), pageOf(t, tc.page), false); err != nil {
				t.Fatal(err)
			}
			if got := store.lookups(); len(got) != 0 {
				t.Errorf("lookups %v, want none", got)
			}
		})
	}
}

// BenchmarkEnrich measures shaping and enrichment of a page with every
// link present, over the in-memory fake (whose own cost is included).
func BenchmarkEnrich(b *testing.B) {
	for _, resource := range []string{"items", "planning", "events", "assignments"} {
		for _, n := range []int{25, 100} {
			b.Run(fmt.Sprintf("%s/%d", resource, n), func(b *testing.B) {
				store, pages := newsroom(n)
				res, _ := sources.ResourceByName(resource)
				e := enrich.New(store, enrich.Options{MediaPrefix: mediaPrefix})
				b.ReportAllocs()
				for b.Loop() {
					b.StopTimer()
					docs := cloneDocs(pages[resource])
					b.StartTimer()
					if _, _, err := e.Enrich(context.Background(), res, docs, false); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
