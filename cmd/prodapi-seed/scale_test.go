package main

import (
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// scaled makes a newsroom of n items from the sample and reads it into
// memory.
func scaled(t *testing.T, room *newsroom, n int, seed uint64) map[string][]*sources.Doc {
	t.Helper()
	s, err := newScaler(room, n, seed)
	if err != nil {
		t.Fatal(err)
	}
	if s.broken {
		t.Errorf("-scale %d: the last copy breaks links", n)
	}
	return collect(s.corpus())
}

// collect reads every stream of c in file order.
func collect(c *corpus) map[string][]*sources.Doc {
	out := map[string][]*sources.Doc{}
	for name, coll := range c.colls {
		out[name] = slices.Collect(coll.docs(false))
	}
	return out
}

// diffDocs compares newsrooms by their Extended JSON, which tells every
// value and type apart (cmp over the trees is slow at this size); it
// names the first document that differs.
func diffDocs(got, want map[string][]*sources.Doc) string {
	for _, c := range sortedKeys(want) {
		if len(got[c]) != len(want[c]) {
			return fmt.Sprintf("%s: %d documents, want %d", c, len(got[c]), len(want[c]))
		}
		for i := range want[c] {
			if g, w := appendExtJSON(nil, got[c][i]), appendExtJSON(nil, want[c][i]); string(g) != string(w) {
				return fmt.Sprintf("%s %d:\n got %s\nwant %s", c, i, g, w)
			}
		}
	}
	if len(got) != len(want) {
		return fmt.Sprintf("collections %v, want %v", sortedKeys(got), sortedKeys(want))
	}
	return ""
}

func asDoc(v any) *sources.Doc { d, _ := v.(*sources.Doc); return d }

func asList(v any) []any { l, _ := v.([]any); return l }

// brokenLinks lists every link of the newsroom whose target is missing,
// or does not link back where Superdesk's links go both ways: items to
// their assignment, package members, packages, rewrites, embedded
// pictures, renditions' media, desks and users; assignments to their
// planning, coverage and scheduled update; planning to its event,
// related events and, through coverages, assignments; events to their
// files and contacts; event history to its event.
//
// copyOf, when not nil, tells which copy a document is of, by its _id:
// a link from one copy to another is broken too.
func brokenLinks(colls map[string][]*sources.Doc, assets []asset, copyOf func(id string) int) []string {
	by := map[string]map[string]*sources.Doc{}
	for c, docs := range colls {
		by[c] = map[string]*sources.Doc{}
		for _, d := range docs {
			by[c][idOf(d)] = d
		}
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	var from string // the _id of the document whose links are checked
	need := func(what, coll string, v any) *sources.Doc {
		id, _ := sources.IDString(v)
		d := by[coll][id]
		switch {
		case d == nil:
			bad("%s: no %s %v", what, coll, v)
		case copyOf != nil && slices.Contains(copiedCollections, coll) && copyOf(id) != copyOf(from):
			bad("%s: %s %v is of copy %d, not %d", what, coll, v, copyOf(id), copyOf(from))
		}
		return d
	}
	media := map[string]bool{}
	for _, a := range assets {
		media[strings.TrimSuffix(a.name, path.Ext(a.name))] = true
	}
	for _, d := range colls["archive"] {
		from = idOf(d)
		what := "item " + idOf(d)
		if v, _ := d.Get("assignment_id"); v != nil {
			need(what+" assignment_id", "assignments", v)
		}
		for _, f := range []string{"rewrite_of", "rewritten_by"} {
			if v, ok := d.Get(f); ok {
				need(what+" "+f, "archive", v)
			}
		}
		if v, ok := d.Get("linked_in_packages"); ok {
			for _, l := range asList(v) {
				pkg, _ := asDoc(l).Get("package")
				if p := need(what+" linked_in_packages", "archive", pkg); p != nil && !slices.Contains(members(p), idOf(d)) {
					bad("%s: package %v does not list it", what, pkg)
				}
			}
		}
		for _, m := range members(d) {
			need(what+" groups", "archive", m)
		}
		if v, ok := d.Get("associations"); ok {
			for _, a := range asDoc(v).Fields() {
				if pic := asDoc(a.Value); pic != nil {
					id, _ := pic.Get("_id")
					need(what+" associations."+a.Key, "archive", id)
				}
			}
		}
		if v, ok := d.Get("renditions"); ok {
			for _, r := range asDoc(v).Fields() {
				m, _ := asDoc(r.Value).Get("media")
				id, _ := sources.IDString(m)
				if !media[strings.TrimSuffix(id, path.Ext(id))] {
					bad("%s: rendition %s: no asset %v", what, r.Key, m)
				}
			}
		}
		desk, _ := d.Path("task.desk")
		need(what+" task.desk", "desks", desk)
		if user, _ := d.Path("task.user"); user != nil {
			need(what+" task.user", "users", user)
		}
	}
	for _, a := range colls["assignments"] {
		from = idOf(a)
		what := "assignment " + idOf(a)
		pid, _ := a.Get("planning_item")
		p := need(what+" planning_item", "planning", pid)
		cid, _ := a.Get("coverage_item")
		suid, scheduled := a.Get("scheduled_update_id")
		var cov *sources.Doc
		if p != nil {
			cs, _ := p.Get("coverages")
			for _, c := range asList(cs) {
				if id, _ := asDoc(c).Get("coverage_id"); id == cid {
					cov = asDoc(c)
				}
			}
			if cov == nil {
				bad("%s: planning %v has no coverage %v", what, pid, cid)
			}
		}
		owner := cov
		if cov != nil && scheduled {
			owner = nil
			us, _ := cov.Get("scheduled_updates")
			for _, u := range asList(us) {
				if id, _ := asDoc(u).Get("scheduled_update_id"); id == suid {
					owner = asDoc(u)
				}
			}
			if owner == nil {
				bad("%s: coverage %v has no scheduled update %v", what, cid, suid)
			}
		}
		if owner != nil {
			if back, _ := owner.Path("assigned_to.assignment_id"); back != idOf(a) {
				bad("%s: its coverage names assignment %v", what, back)
			}
		}
		desk, _ := a.Path("assigned_to.desk")
		need(what+" assigned_to.desk", "desks", desk)
		if user, _ := a.Path("assigned_to.user"); user != nil {
			need(what+" assigned_to.user", "users", user)
		}
	}
	for _, p := range colls["planning"] {
		from = idOf(p)
		what := "planning " + idOf(p)
		if ev, _ := p.Get("event_item"); ev != nil {
			need(what+" event_item", "events", ev)
		}
		if rel, ok := p.Get("related_events"); ok {
			for _, r := range asList(rel) {
				id, _ := asDoc(r).Get("_id")
				need(what+" related_events", "events", id)
			}
		}
		cs, _ := p.Get("coverages")
		for _, c := range asList(cs) {
			cov := asDoc(c)
			cid, _ := cov.Get("coverage_id")
			if aid, _ := cov.Path("assigned_to.assignment_id"); aid != nil && aid != "" {
				if a := need(what+" coverage assignment", "assignments", aid); a != nil {
					if got, _ := a.Get("planning_item"); got != idOf(p) {
						bad("%s: assignment %v names planning %v", what, aid, got)
					}
					if got, _ := a.Get("coverage_item"); got != cid {
						bad("%s: assignment %v names coverage %v, want %v", what, aid, got, cid)
					}
				}
			}
			us, _ := cov.Get("scheduled_updates")
			for _, u := range asList(us) {
				up := asDoc(u)
				if got, _ := up.Get("planning_id"); got != idOf(p) {
					bad("%s: scheduled update names planning %v", what, got)
				}
				if got, _ := up.Get("coverage_id"); got != cid {
					bad("%s: scheduled update names coverage %v, want %v", what, got, cid)
				}
				if aid, _ := up.Path("assigned_to.assignment_id"); aid != nil && aid != "" {
					need(what+" scheduled update assignment", "assignments", aid)
				}
			}
		}
	}
	for _, e := range colls["events"] {
		from = idOf(e)
		what := "event " + idOf(e)
		for _, f := range []struct{ field, coll string }{{"files", "events_files"}, {"event_contact_info", "contacts"}} {
			v, _ := e.Get(f.field)
			for _, id := range asList(v) {
				need(what+" "+f.field, f.coll, id)
			}
		}
		if rel, ok := e.Get("related_events"); ok {
			for _, r := range asList(rel) {
				id, _ := asDoc(r).Get("_id")
				need(what+" related_events", "events", id)
			}
		}
	}
	for _, h := range colls["events_history"] {
		from = idOf(h)
		ev, _ := h.Get("event_id")
		need("event history "+idOf(h)+" event_id", "events", ev)
	}
	return problems
}

// copyNumber is the copy an id is of, by the mark copies put in it: the
// last twelve digits of a UUID, bytes 4 to 8 of an ObjectId; 0 when
// there is none (the sample's own ids).
func copyNumber(id string) int {
	if oid, ok := sources.ParseObjectID(id); ok {
		k := int(oid[4])<<32 | int(oid[5])<<24 | int(oid[6])<<16 | int(oid[7])<<8 | int(oid[8])
		if k < 1<<24 {
			return k
		}
		return 0
	}
	if len(id) < 12 {
		return 0
	}
	k, err := strconv.Atoi(id[len(id)-12:])
	if err != nil {
		return 0
	}
	return k
}

// members are the items a package's groups list.
func members(d *sources.Doc) []string {
	var out []string
	groups, _ := d.Get("groups")
	for _, g := range asList(groups) {
		refs, _ := asDoc(g).Get("refs")
		for _, r := range asList(refs) {
			if id, ok := asDoc(r).String("residRef"); ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// The link checker finds nothing wrong with the sample, and finds what
// is broken in it.
func TestBrokenLinks(t *testing.T) {
	t.Parallel()
	room := sampleRoom(t)
	if problems := brokenLinks(room.colls, room.assets, nil); len(problems) > 0 {
		t.Fatalf("the sample's links:\n%s", strings.Join(problems, "\n"))
	}
	for _, tc := range []struct {
		name   string
		mutate func(colls map[string][]*sources.Doc)
		want   string
	}{
		{"an assignment gone", func(c map[string][]*sources.Doc) { c["assignments"] = c["assignments"][1:] }, "no assignments"},
		{"an event gone", func(c map[string][]*sources.Doc) { c["events"] = c["events"][1:] }, "no events"},
		{"a planning gone", func(c map[string][]*sources.Doc) { c["planning"] = c["planning"][1:] }, "no planning"},
		{"an item gone", func(c map[string][]*sources.Doc) {
			c["archive"] = slices.DeleteFunc(slices.Clone(c["archive"]), func(d *sources.Doc) bool { return d.Has("groups") })
		}, "linked_in_packages: no archive"},
		{"a coverage renamed", func(c map[string][]*sources.Doc) {
			p := c["planning"][0].Clone()
			cs, _ := p.Get("coverages")
			asDoc(asList(cs)[0]).Set("coverage_id", "elsewhere")
			c["planning"] = append([]*sources.Doc{p}, c["planning"][1:]...)
		}, "has no coverage"},
	} {
		colls := map[string][]*sources.Doc{}
		for k, v := range room.colls {
			colls[k] = slices.Clone(v)
		}
		tc.mutate(colls)
		problems := brokenLinks(colls, room.assets, nil)
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, tc.want) }) {
			t.Errorf("%s: problems %q, want one saying %q", tc.name, problems, tc.want)
		}
	}
}

// A scaled newsroom's links all hold, whatever the number of items: the
// last copy takes whole groups of linked items.
func TestScaleKeepsLinks(t *testing.T) {
	t.Parallel()
	room := sampleRoom(t)
	per := len(room.colls["archive"])
	check := func(s *scaler) {
		t.Helper()
		if s.broken {
			t.Errorf("-scale %d: the last copy breaks links", s.items)
		}
		if problems := brokenLinks(collect(s.corpus()), room.assets, copyNumber); len(problems) > 0 {
			t.Errorf("-scale %d: %d broken links:\n%s", s.items, len(problems), strings.Join(problems[:min(len(problems), 10)], "\n"))
		}
	}
	// Every size of the last copy, over one or two copies, on one
	// compiled template (compiling is the slow part).
	s, err := newScaler(room, 2*per, 1)
	if err != nil {
		t.Fatal(err)
	}
	links := s.itemLinks()
	for n := 1; n <= 2*per; n++ {
		c := *s
		c.items, c.copies = n, (n+per-1)/per
		c.last, c.broken = lastCopy(room.colls["archive"], links, n-(c.copies-1)*per)
		check(&c)
	}
	for _, n := range []int{1000, 2500} {
		s, err := newScaler(room, n, 1)
		if err != nil {
			t.Fatal(err)
		}
		check(s)
	}
}

// Items number exactly N; the collections linked with them have as many
// whole copies as the items need; the rest is kept as it is.
func TestScaleProportions(t *testing.T) {
	t.Parallel()
	room := sampleRoom(t)
	per := len(room.colls["archive"])
	for _, n := range []int{1, 40, 41, 42, 1000} {
		s, err := newScaler(room, n, 1)
		if err != nil {
			t.Fatal(err)
		}
		copies := (n + per - 1) / per
		want := map[string]int{}
		for c, docs := range room.colls {
			want[c] = len(docs)
			if slices.Contains(copiedCollections, c) {
				want[c] *= copies
			}
		}
		want["archive"] = n
		corp := s.corpus()
		if diff := cmp.Diff(corp.counts(), want); diff != "" {
			t.Errorf("-scale %d: counts (-got +want):\n%s", n, diff)
		}
		got := map[string]int{}
		for c, docs := range collect(corp) {
			got[c] = len(docs)
		}
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("-scale %d: documents streamed (-got +want):\n%s", n, diff)
		}
		if len(corp.assets) != len(room.assets) {
			t.Errorf("-scale %d: %d assets, want the sample's %d", n, len(corp.assets), len(room.assets))
		}
	}
}

// Copy 0 is the sample itself: -scale 41 makes the sample.
func TestScaleOfTheSampleSize(t *testing.T) {
	t.Parallel()
	room := sampleRoom(t)
	got := scaled(t, room, len(room.colls["archive"]), 7)
	if diff := diffDocs(got, room.colls); diff != "" {
		t.Errorf("-scale 41 is not the sample: %s", diff)
	}
}

// Every id is unique in a scaled newsroom: _id and guid in every copied
// collection, items' unique_id, unique_name, event_id and _etag,
// coverage and scheduled-update ids.
func TestScaleUniqueIDs(t *testing.T) {
	t.Parallel()
	room := sampleRoom(t)
	colls := scaled(t, room, 2000, 1)
	for _, c := range copiedCollections {
		fields := []string{"_id", "guid", "_etag"}
		if c == "archive" {
			fields = append(fields, "unique_id", "unique_name", "event_id")
		}
		for _, f := range fields {
			seen := map[any]bool{}
			for _, d := range colls[c] {
				v, ok := d.Get(f)
				if !ok {
					continue
				}
				if seen[v] {
					t.Errorf("%s: %s %v twice", c, f, v)
				}
				seen[v] = true
			}
		}
	}
	coverages, updates := map[any]bool{}, map[any]bool{}
	for _, p := range colls["planning"] {
		cs, _ := p.Get("coverages")
		for _, c := range asList(cs) {
			id, _ := asDoc(c).Get("coverage_id")
			if coverages[id] {
				t.Errorf("planning: coverage_id %v twice", id)
			}
			coverages[id] = true
			us, _ := asDoc(c).Get("scheduled_updates")
			for _, u := range asList(us) {
				id, _ := asDoc(u).Get("scheduled_update_id")
				if updates[id] {
					t.Errorf("planning: scheduled_update_id %v twice", id)
				}
				updates[id] = true
			}
		}
	}
	if len(coverages) == 0 || len(updates) == 0 {
		t.Errorf("%d coverages and %d scheduled updates seen", len(coverages), len(updates))
	}
}

// The same N and seed make the same newsroom; another seed moves the
// copies' times, never their ids.
func TestScaleIsDeterministic(t *testing.T) {
	t.Parallel()
	room := sampleRoom(t)
	a := scaled(t, room, 300, 1)
	if diff := diffDocs(scaled(t, room, 300, 1), a); diff != "" {
		t.Errorf("two runs differ: %s", diff)
	}
	b := scaled(t, room, 300, 2)
	for c, docs := range a {
		for i, d := range docs {
			if idOf(d) != idOf(b[c][i]) {
				t.Fatalf("%s %d: id %s with seed 1, %s with seed 2", c, i, idOf(d), idOf(b[c][i]))
			}
		}
	}
	// A newsroom's copies are those of any larger one.
	bigger := scaled(t, room, 1000, 1)
	for _, c := range []string{"planning", "events", "assignments"} {
		got := map[string][]*sources.Doc{c: bigger[c][:len(a[c])]}
		if diff := diffDocs(got, map[string][]*sources.Doc{c: a[c]}); diff != "" {
			t.Errorf("-scale 300 is not a prefix of -scale 1000: %s", diff)
		}
	}
	moved := 0
	for i, d := range a["archive"] {
		x, _ := d.Get("_updated")
		y, _ := b["archive"][i].Get("_updated")
		if !x.(time.Time).Equal(y.(time.Time)) {
			moved++
		}
	}
	if per := len(room.colls["archive"]); moved < len(a["archive"])-per-per {
		t.Errorf("seed 2 moved %d items' _updated of %d, want all but the sample's", moved, len(a["archive"]))
	}
}

// Copies move back in time, an hour or so each, so lists sorted by
// _updated or versioncreated mix the copies; times within a copy keep
// their order.
func TestScaleSpreadsTime(t *testing.T) {
	t.Parallel()
	room := sampleRoom(t)
	per := len(room.colls["archive"])
	n := 100 * per
	colls := scaled(t, room, n, 1)
	for _, f := range []string{"_updated", "versioncreated"} {
		distinct := map[time.Time]bool{}
		var lo, hi time.Time
		for i, d := range colls["archive"] {
			v, _ := d.Get(f)
			at := v.(time.Time)
			distinct[at] = true
			if i == 0 || at.Before(lo) {
				lo = at
			}
			if i == 0 || at.After(hi) {
				hi = at
			}
			tmpl, _ := room.colls["archive"][i%per].Get(f)
			k := i / per
			shift := tmpl.(time.Time).Sub(at)
			if shift < time.Duration(k)*copySpacing || shift >= time.Duration(k+1)*copySpacing {
				t.Fatalf("copy %d moved %s by %s, want %d to %d hours", k, f, shift, k, k+1)
			}
		}
		if span := hi.Sub(lo); span < 99*copySpacing {
			t.Errorf("%s spans %s over 100 copies, want at least 99 hours", f, span)
		}
		if len(distinct) < n*9/10 {
			t.Errorf("%s: %d distinct values among %d items, want most", f, len(distinct), n)
		}
	}
}

// What -scale cannot copy uniquely it refuses, saying why.
func TestScaleRefuses(t *testing.T) {
	t.Parallel()
	write := func(files map[string]string) *newsroom {
		dir := t.TempDir()
		for name, body := range files {
			if err := os.WriteFile(dir+"/"+name, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		room, err := loadNewsroom(t.Context(), os.DirFS(dir))
		if err != nil {
			t.Fatal(err)
		}
		return room
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		n     int
		want  string
	}{
		{"no items", map[string]string{"desks.json": `[{"_id": "d"}]`}, 10, "no items"},
		{"an id with nothing to vary", map[string]string{"archive.json": `[{"_id": "story-1"}]`}, 10, `its _id has no UUID or ObjectId`},
		{"UUIDs alike but for their end", map[string]string{"archive.json": `[
			{"_id": "urn:x:9f6d26b2-d4ae-4af5-bb68-eb68bda03923"}, {"_id": "urn:x:9f6d26b2-d4ae-4af5-bb68-000000000000"}]`}, 10, "differ only in their last twelve digits"},
		{"a copy scaled again", map[string]string{"archive.json": `[{"_id": "urn:x:9f6d26b2-d4ae-4af5-bb68-000000000003"}]`}, 10, "what copy 3 of another would be"},
		{"an ObjectId copied before", map[string]string{"archive.json": `[{"_id": "urn:x:9f6d26b2-d4ae-4af5-bb68-eb68bda03923"}]`,
			"assignments.json": `[{"_id": {"$oid": "6af58e98957184d45484e9b5"}}, {"_id": {"$oid": "6af58e980000000002000000"}}]`}, 10, "what copy 2 of"},
		{"too many", map[string]string{"archive.json": `[{"_id": "urn:x:9f6d26b2-d4ae-4af5-bb68-eb68bda03923"}]`}, maxScale + 1, "-scale must be between"},
	} {
		_, err := newScaler(write(tc.files), tc.n, 1)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error saying %q", tc.name, err, tc.want)
		}
	}
}

// Written with -out, a scaled newsroom reads back through the sandbox
// as it was made (the sandbox refuses duplicate ids), media included.
func TestWriteSandbox(t *testing.T) {
	t.Parallel()
	room := sampleRoom(t)
	s, err := newScaler(room, 150, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir() + "/newsroom"
	var log syncBuffer
	l := loader{lim: limits{docs: 1, bytes: 1}, logger: jsonLogger(&log)}
	if err := writeSandbox(t.Context(), dir, s.corpus(), l); err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.Open(dir, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := collect(s.corpus())
	got := map[string]int{}
	for c, n := range sb.Counts() {
		if n > 0 {
			got[c] = n
		}
	}
	if diff := cmp.Diff(got, s.corpus().counts()); diff != "" {
		t.Errorf("counts (-sandbox +made):\n%s", diff)
	}
	read, err := loadNewsroom(t.Context(), os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffDocs(read.colls, want); diff != "" {
		t.Errorf("read back: %s", diff)
	}
	for _, a := range room.assets {
		got, err := sb.Asset(t.Context(), a.name)
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		got.Content.Close()
		if got.MD5 != a.md5 || !got.Modified.Equal(a.modified) || got.ContentType != a.contentType {
			t.Errorf("%s: md5 %s, modified %s, type %s; want %s, %s, %s", a.name, got.MD5, got.Modified, got.ContentType, a.md5, a.modified, a.contentType)
		}
	}
	if !strings.Contains(log.String(), `"msg":"out: file written","file":"archive.json","documents":150`) {
		t.Errorf("log:\n%s", log.String())
	}
	// A directory that holds something is refused.
	if err := writeSandbox(t.Context(), dir, s.corpus(), l); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("writing into a full directory: %v", err)
	}
}

func TestAppendExtJSON(t *testing.T) {
	t.Parallel()
	oid, _ := sources.ParseObjectID("67c42d4c957184d45484e656")
	when := time.Date(2026, 11, 20, 9, 15, 0, 123000000, time.UTC)
	in := sources.D("_id", oid, "n", int64(7), "big", int64(1)<<40, "f", 2.0, "x", 0.5, "when", when, "none", nil, "yes", true,
		"s", "quote \" and \u00e9", "list", []any{"a", int64(1), sources.D("b", when)}, "empty", sources.NewDoc(), "nothing", []any{})
	got := string(appendExtJSON(nil, in))
	want := `{"_id":{"$oid":"67c42d4c957184d45484e656"},"n":7,"big":1099511627776,"f":2.0,"x":0.5,` +
		`"when":{"$date":"2026-11-20T09:15:00.123Z"},"none":null,"yes":true,"s":"quote \" and é",` +
		`"list":["a",1,{"b":{"$date":"2026-11-20T09:15:00.123Z"}}],"empty":{},"nothing":[]}`
	if got != want {
		t.Errorf("appendExtJSON:\n got %s\nwant %s", got, want)
	}
}
