package enrich_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/enrich"
	"github.com/prodapi/prodapi/sources"
)

// storeOf builds a fake looker from JSON arrays by collection.
func storeOf(t testing.TB, collections map[string]string) *fakeLooker {
	t.Helper()
	f := &fakeLooker{data: map[string][]*sources.Doc{}}
	for c, s := range collections {
		for _, v := range parse(t, s).([]any) {
			f.data[c] = append(f.data[c], v.(*sources.Doc))
		}
	}
	return f
}

func pageOf(t testing.TB, s string) []*sources.Doc {
	t.Helper()
	var docs []*sources.Doc
	for _, v := range parse(t, s).([]any) {
		d, _ := v.(*sources.Doc)
		docs = append(docs, d)
	}
	return docs
}

// linksJSON renders the links of a page, null for a document without.
func linksJSON(links []*sources.Doc) string {
	a := make([]any, len(links))
	for i, l := range links {
		if l != nil {
			a[i] = l
		}
	}
	return indent(a)
}

// TestRobustness feeds documents the original answered 500 for, or that
// real data may hold: nothing panics, nothing fails, the rest is served.
func TestRobustness(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resource string
		store    map[string]string
		page     string
		want     string // links per document
		wantDocs string // shaped page, when it matters
	}{
		{"item: assignment found, planning missing", "items",
			map[string]string{"assignments": `[{"_id":"a1","planning_item":"p-missing","assigned_to":{"state":"assigned"}}]`},
			`[{"_id":"i1","assignment_id":"a1"}]`,
			`[{"assignment":{"title":"Assignment","href":"assignments/a1","state":"assigned","scheduled":null,"content_type":null},
			   "planning":{"title":"Planning","href":"planning/p-missing"}}]`, ""},
		{"item: assignment without planning_item, with null assigned_to and planning", "items",
			map[string]string{"assignments": `[{"_id":"a1","assigned_to":null,"planning":null}]`},
			`[{"_id":"i1","assignment_id":"a1"}]`,
			`[{"assignment":{"title":"Assignment","href":"assignments/a1","state":null,"scheduled":null,"content_type":null}}]`, ""},
		{"item: assignment missing, falsy or odd assignment_id", "items", nil,
			`[{"_id":"i1","assignment_id":"gone"},{"_id":"i2","assignment_id":null},{"_id":"i3","assignment_id":""},{"_id":"i4","assignment_id":0},{"_id":"i5","assignment_id":{"x":1}},null]`,
			`[null,null,null,null,null,null]`, ""},
		{"item: ObjectID ids everywhere", "items",
			map[string]string{
				"assignments": `[{"_id":{"$oid":"60e403bc8361feb5664719b1"},"planning_item":{"$oid":"60e403bc8361feb5664719c1"},"planning":{"scheduled":{"$date":"2021-07-07T02:00:00Z"}}}]`,
				"planning":    `[{"_id":{"$oid":"60e403bc8361feb5664719c1"},"event_item":{"$oid":"60e403bc8361feb5664719d1"}}]`},
			`[{"_id":"i1","assignment_id":"60E403BC8361FEB5664719B1"}]`,
			`[{"assignment":{"title":"Assignment","href":"assignments/60e403bc8361feb5664719b1","state":null,"scheduled":"2021-07-07T02:00:00+0000","content_type":null},
			   "planning":{"title":"Planning","href":"planning/60e403bc8361feb5664719c1"},
			   "event":{"title":"Event","href":"events/60e403bc8361feb5664719d1"}}]`, ""},
		{"assignment: no planning_item, no _id, odd assigned_to", "assignments",
			map[string]string{"archive": `[{"_id":"x","assignment_id":"a1"}]`},
			`[{"assigned_to":"str"},{"_id":"a1","planning_item":null,"assigned_to":"str"},{"_id":"a2","planning_item":"p1"}]`,
			`[null,
			  {"content":[{"title":"Item","href":"items/x","state":null,"pubstatus":null}]},
			  {"planning":{"title":"Planning","href":"planning/p1"}}]`, ""},
		{"planning: null and odd coverages", "planning",
			map[string]string{"assignments": `[{"_id":"a1","coverage_item":"c1","assigned_to":{"state":"done"},"priority":1}]`},
			`[{"_id":"p1","coverages":null},
			  {"_id":"p2","coverages":"str"},
			  {"_id":"p3","coverages":[null,"str",{"coverage_id":"c1","assigned_to":"str"},{"coverage_id":"c1","assigned_to":{"assignment_id":"a1"},"scheduled_updates":null},{"coverage_id":"c1","scheduled_updates":[null,"s",{"assigned_to":"x"},{"assigned_to":[]}]}]},
			  {"_id":"p4"}]`,
			`[null,null,{"assignments":[{"title":"Assignment","href":"assignments/a1","state":"done","scheduled":null,"content_type":null}]},null]`,
			`[{"_id":"p1","coverages":null},
			  {"_id":"p2","coverages":"str"},
			  {"_id":"p3","coverages":[null,"str",{"coverage_id":"c1","assigned_to":"str","scheduled_updates":[]},
			    {"coverage_id":"c1","assigned_to":{"assignment_id":"a1","desk":null,"user":null,"contact":null,"state":"done","assignor_user":null,"assignor_desk":null,"assigned_date_desk":null,"assigned_date_user":null,"coverage_provider":null,"priority":1},"scheduled_updates":null},
			    {"coverage_id":"c1","scheduled_updates":[null,"s",{"assigned_to":"x"},{"assigned_to":{}}],"assigned_to":{}}]},
			  {"_id":"p4","coverages":[]}]`},
		{"planning: coverage without coverage_id still defaults", "planning", nil,
			`[{"_id":"p1","event_item":{"$oid":"60e403bc8361feb5664719d1"},"coverages":[{"assigned_to":null},{"planning":{}}]}]`,
			`[{"event":{"title":"Event","href":"events/60e403bc8361feb5664719d1"}}]`,
			`[{"_id":"p1","event_item":"60e403bc8361feb5664719d1","coverages":[{"assigned_to":{},"scheduled_updates":[]},{"planning":{},"assigned_to":{},"scheduled_updates":[]}]}]`},
		{"planning: ids named but no assignment found gives an empty list, as the original", "planning", nil,
			`[{"_id":"p1","coverages":[{"coverage_id":"c1","assigned_to":{"assignment_id":"gone"}}]}]`,
			`[{"assignments":[]}]`, ""},
		{"event: no guid, odd guid, planning with null coverages", "events",
			map[string]string{"planning": `[{"_id":"p1","event_item":"e1","coverages":null},{"_id":"p2","event_item":null},{"_id":"p3"}]`},
			`[{"_id":"e0"},{"_id":"e1","guid":"e1"},{"_id":"e2","guid":null},{"_id":"e3","guid":{"a":1}}]`,
			`[null,{"plannings":[{"title":"Planning","href":"planning/p1"}]},null,null]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := storeOf(t, tc.store)
			docs := pageOf(t, tc.page)
			e := enrich.New(store, enrich.Options{})
			links, missing, err := e.Enrich(context.Background(), resource(t, tc.resource), docs, false)
			if err != nil || len(missing) > 0 {
				t.Fatalf("Enrich: missing %v, err %v", missing, err)
			}
			if diff := cmp.Diff(linksJSON(links), indent(parse(t, tc.want))); diff != "" {
				t.Errorf("links (-got +want):\n%s", diff)
			}
			if tc.wantDocs != "" {
				got := make([]any, len(docs))
				for i, d := range docs {
					got[i] = d
				}
				if diff := cmp.Diff(indent(got), indent(parse(t, tc.wantDocs))); diff != "" {
					t.Errorf("documents (-got +want):\n%s", diff)
				}
			}
		})
	}
}

// TestNilResource: a nil resource or an empty page is no work.
func TestNilResource(t *testing.T) {
	store := &fakeLooker{}
	e := enrich.New(store, enrich.Options{})
	for _, res := range []*sources.Resource{nil, resource(t, "planning")} {
		links, missing, err := e.Enrich(context.Background(), res, nil, false)
		if len(links) != 0 || len(missing) > 0 || err != nil {
			t.Errorf("Enrich(%v, no docs) = %v, %v, %v", res, links, missing, err)
		}
	}
	if store.count() != 0 {
		t.Errorf("%d lookups, want none", store.count())
	}
}

var errDown = fmt.Errorf("fake: %w", sources.ErrUnavailable)

// TestDegrade fails one lookup at a time: the response loses what that
// lookup gives, keeps the rest, names that step missing, and one Warn line
// names the resource and the step.
func TestDegrade(t *testing.T) {
	for _, tc := range []struct {
		name     string
		resource string
		input    string
		fail     string // "collection.field" of the failing lookup
		step     string
		check    func(t *testing.T, docs, links []*sources.Doc)
	}{
		{"items content types", "items", "archive.json", "content_types._id", "content_types", func(t *testing.T, docs, links []*sources.Doc) {
			wantString(t, docs[0], "profile", "5d553c333031e2855a2e0001")
			wantKeys(t, links[0], "assignment", "planning", "event")
		}},
		{"items assignments", "items", "archive.json", "assignments._id", "assignments", func(t *testing.T, docs, links []*sources.Doc) {
			wantString(t, docs[0], "profile", "BelgaText1")
			wantKeys(t, links[0])
		}},
		{"items planning", "items", "archive.json", "planning._id", "planning", func(t *testing.T, docs, links []*sources.Doc) {
			wantKeys(t, links[0], "assignment", "planning")
		}},
		{"assignments planning", "assignments", "assignments.json", "planning._id", "planning", func(t *testing.T, docs, links []*sources.Doc) {
			wantKeys(t, links[0], "planning", "content")
		}},
		{"assignments content", "assignments", "assignments.json", "archive.assignment_id", "content", func(t *testing.T, docs, links []*sources.Doc) {
			wantKeys(t, links[0], "planning", "event")
		}},
		{"planning coverage sync", "planning", "planning.json", "assignments.coverage_item", "coverage sync", func(t *testing.T, docs, links []*sources.Doc) {
			v, _ := docs[0].Path("coverages")
			cov := v.([]any)[0].(*sources.Doc)
			wantString(t, cov.Fields()[1].Value.(*sources.Doc), "state", "assigned") // not synced
			wantKeys(t, cov, "coverage_id", "assigned_to", "scheduled_updates")
			wantKeys(t, links[0], "event", "assignments")
		}},
		{"planning scheduled update sync", "planning", "planning.json", "assignments.scheduled_update_id", "scheduled update sync", func(t *testing.T, docs, links []*sources.Doc) {
			v, _ := docs[0].Path("coverages")
			cov := v.([]any)[0].(*sources.Doc)
			wantString(t, cov.Fields()[1].Value.(*sources.Doc), "state", "in_progress") // synced
			wantKeys(t, links[0], "event", "assignments")
		}},
		{"planning assignment links", "planning", "planning.json", "assignments._id", "assignment links", func(t *testing.T, docs, links []*sources.Doc) {
			wantKeys(t, links[0], "event")
		}},
		{"planning assignment content", "planning", "planning.json", "archive.assignment_id", "assignment content", func(t *testing.T, docs, links []*sources.Doc) {
			wantKeys(t, links[0], "event", "assignments")
			v, _ := links[0].Get("assignments")
			wantKeys(t, v.([]any)[0].(*sources.Doc), "title", "href", "state", "scheduled", "content_type")
		}},
		{"events plannings", "events", "events.json", "planning.event_item", "plannings", func(t *testing.T, docs, links []*sources.Doc) {
			wantKeys(t, links[0])
		}},
		{"events assignment links", "events", "events.json", "assignments._id", "assignment links", func(t *testing.T, docs, links []*sources.Doc) {
			wantKeys(t, links[0], "plannings")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			store := loadStore(t, "testdata/linked")
			store.fail = func(l sources.Lookup) error {
				if l.Collection+"."+l.Field == tc.fail {
					return errDown
				}
				return nil
			}
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			e := enrich.New(store, enrich.Options{Logger: log})
			docs := loadDocs(t, "testdata/linked/"+tc.input)
			links, missing, err := e.Enrich(context.Background(), resource(t, tc.resource), docs, false)
			if err != nil {
				t.Fatalf("Enrich: %v", err)
			}
			if !slices.Equal(missing, []string{tc.step}) {
				t.Errorf("missing = %q, want [%q]", missing, tc.step)
			}
			tc.check(t, docs, links)
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") ||
				!strings.Contains(lines[0], "resource="+tc.resource) || !strings.Contains(lines[0], fmt.Sprintf("step=%q", tc.step)) &&
				!strings.Contains(lines[0], "step="+tc.step+" ") {
				t.Errorf("log = %q, want one Warn line for resource %s step %s", logs.String(), tc.resource, tc.step)
			}
		})
	}
}

func wantString(t *testing.T, d *sources.Doc, key, want string) {
	t.Helper()
	if got, _ := d.Get(key); got != want {
		t.Errorf("%s = %v, want %q", key, got, want)
	}
}

func wantKeys(t *testing.T, d *sources.Doc, want ...string) {
	t.Helper()
	if diff := cmp.Diff(d.Keys(), want, cmpEmpty); diff != "" {
		t.Errorf("keys (-got +want):\n%s", diff)
	}
}

var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") })

// TestContextEnds: when the request's context ends, Enrich fails with its
// error; when only the per-lookup timeout runs out, it degrades.
func TestContextEnds(t *testing.T) {
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		store := loadStore(t, "testdata/linked")
		e := enrich.New(store, enrich.Options{})
		links, missing, err := e.Enrich(ctx, resource(t, "planning"), loadDocs(t, "testdata/linked/planning.json"), false)
		if !errors.Is(err, context.Canceled) || links != nil || len(missing) > 0 {
			t.Errorf("Enrich = %v, %v, %v; want context.Canceled", links, missing, err)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
		defer cancel()
		store := loadStore(t, "testdata/linked")
		store.block = true
		e := enrich.New(store, enrich.Options{})
		_, _, err := e.Enrich(ctx, resource(t, "items"), loadDocs(t, "testdata/linked/archive.json"), false)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("err = %v, want context.DeadlineExceeded", err)
		}
	})
	t.Run("per-lookup timeout degrades", func(t *testing.T) {
		store := loadStore(t, "testdata/linked")
		store.block = true // every lookup waits for its own deadline
		e := enrich.New(store, enrich.Options{Timeout: time.Nanosecond})
		docs := loadDocs(t, "testdata/linked/events.json")
		links, missing, err := e.Enrich(context.Background(), resource(t, "events"), docs, false)
		if err != nil || len(missing) == 0 {
			t.Fatalf("Enrich: missing %v, err %v; want missing, no error", missing, err)
		}
		if got := linksJSON(links); got != indent(parse(t, "[null,null,null]")) {
			t.Errorf("links = %s, want none", got)
		}
	})
}

// TestLinkLimit: every link list stops at LinkLimit, and lookups ask for
// no more than the lists can use.
func TestLinkLimit(t *testing.T) {
	store := storeOf(t, map[string]string{
		"archive": `[{"_id":"i1","assignment_id":"a1","_updated":{"$date":"2021-01-01T00:00:00Z"}},
		             {"_id":"i2","assignment_id":"a1","_updated":{"$date":"2021-01-03T00:00:00Z"}},
		             {"_id":"i3","assignment_id":"a1","_updated":{"$date":"2021-01-02T00:00:00Z"}}]`,
		"planning": `[{"_id":"p1","event_item":"e1","_updated":{"$date":"2021-01-01T00:00:00Z"}},
		              {"_id":"p2","event_item":"e1","_updated":{"$date":"2021-01-03T00:00:00Z"},
		               "coverages":[{"assigned_to":{"assignment_id":"a3"}},{"assigned_to":{"assignment_id":"a2"}},{"assigned_to":{"assignment_id":"a1"}}]},
		              {"_id":"p3","event_item":"e1","_updated":{"$date":"2021-01-02T00:00:00Z"}}]`,
		"assignments": `[{"_id":"a1","planning":{"scheduled":"2021-01-03T00:00:00+0000"}},
		                 {"_id":"a2","planning":{"scheduled":"2021-01-01T00:00:00+0000"}},
		                 {"_id":"a3","planning":{"scheduled":"2021-01-02T00:00:00+0000"}}]`,
	})
	e := enrich.New(store, enrich.Options{LinkLimit: 2})
	hrefs := func(l *sources.Doc, key string) []string {
		v, _ := l.Get(key)
		var s []string
		for _, x := range v.([]any) {
			h, _ := x.(*sources.Doc).Get("href")
			s = append(s, h.(string))
		}
		return s
	}

	links, _, err := e.Enrich(context.Background(), resource(t, "assignments"), pageOf(t, `[{"_id":"a1"}]`), false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(hrefs(links[0], "content"), []string{"items/i2", "items/i3"}); diff != "" {
		t.Errorf("assignment content (-got +want):\n%s", diff)
	}

	links, _, err = e.Enrich(context.Background(), resource(t, "events"), pageOf(t, `[{"_id":"e1","guid":"e1"}]`), false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(hrefs(links[0], "plannings"), []string{"planning/p2", "planning/p3"}); diff != "" {
		t.Errorf("event plannings (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(hrefs(links[0], "assignments"), []string{"assignments/a2", "assignments/a3"}); diff != "" {
		t.Errorf("event assignments (-got +want):\n%s", diff)
	}

	for _, l := range store.calls {
		if l.Limit == 0 && l.Search {
			t.Errorf("search lookup %s.%s without a limit", l.Collection, l.Field)
		}
		if l.Limit > 2*len(l.Values) {
			t.Errorf("lookup %s.%s asks for %d documents for %d values at LinkLimit 2", l.Collection, l.Field, l.Limit, len(l.Values))
		}
	}
}
