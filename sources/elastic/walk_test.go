package elastic_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	essrc "github.com/prodapi/prodapi/sources/elastic"
	"github.com/prodapi/prodapi/sources/elastic/estest"
	"github.com/prodapi/prodapi/test/testkit"
)

// walkFixture is a fake of version v and a store on it, both on clk,
// with points in time kept alive for keepAlive.
func walkFixture(t *testing.T, v estest.Version, clk *testkit.Clock, keepAlive time.Duration) (*estest.Server, *essrc.Store) {
	t.Helper()
	fake := estest.New(t, estest.Options{Version: v, Docs: newsroom(), Now: clk.Now})
	client, err := elasticsearch.NewClient(essrc.Config(fake.URL, 0))
	if err != nil {
		t.Fatal(err)
	}
	return fake, essrc.New(client, essrc.Options{Index: "superdesk", PITKeepAlive: keepAlive, Now: clk.Now})
}

func walkQuery(t *testing.T, res, body string, after *sources.Position) *sources.Query {
	return &sources.Query{Resource: resource(res), Page: 1, MaxResults: 1, Search: decode(t, body),
		Cursor: &sources.Cursor{After: after}}
}

// A walk's pages ask for one hit more than they show, sorted by the
// body's keys and then the tiebreaker: guid where the resource has one,
// _id on 7.x, and on 8.x, which cannot sort on _id, the shard order of a
// point in time the first page opens; the position carries the point in
// time and when it lapses.
func TestWalkRequests(t *testing.T) {
	const contacts = `{"query":{"bool":{}},"sort":[{"last_name.keyword":{"order":"asc"}}],"size":1,"track_total_hits":10000}`
	const items = `{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":1,"track_total_hits":10000}`
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			clk := testkit.NewClock(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC))
			fake, store := walkFixture(t, v, clk, 10*time.Minute)

			fake.Clear()
			first, err := store.Find(t.Context(), walkQuery(t, "items", items, nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(first.Docs); len(got) != 1 || got[0] != "urn:newsml:2" || first.Next == nil || first.Total != 3 {
				t.Fatalf("first page of items: %v, next %+v, total %d", got, first.Next, first.Total)
			}
			if first.Next.PIT != "" || !first.Next.Expires.IsZero() {
				t.Errorf("a guid walk holds a point in time: %+v", first.Next)
			}
			want := `{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}},{"guid":{"order":"asc"}}],"size":2,"track_total_hits":10000}`
			if s := fake.Searches(); len(s) != 1 || s[0].Path != "/superdesk_archive/_search" || canonical(t, s[0].Body) != canonical(t, []byte(want)) {
				t.Errorf("searches %v, want one of %s", s, want)
			}
			fake.Clear()
			second, err := store.Find(t.Context(), walkQuery(t, "items", items, first.Next))
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(second.Docs); len(got) != 1 || got[0] != "urn:newsml:1" {
				t.Errorf("second page %v", got)
			}
			if body := string(fake.Searches()[0].Body); !strings.Contains(body, `"search_after":[`) {
				t.Errorf("second page's body %s has no search_after", body)
			}

			fake.Clear()
			page, err := store.Find(t.Context(), walkQuery(t, "contacts", contacts, nil))
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(page.Docs); len(got) != 1 || got[0] != "5f0c7c2e2b0b7a0a1c5e9b02" || page.Next == nil {
				t.Fatalf("first page of contacts: %v, next %+v", got, page.Next)
			}
			searches := fake.Searches()
			if v.Major() < 8 {
				if page.Next.PIT != "" || len(searches) != 1 || !strings.Contains(string(searches[0].Body), `{"_id":{"order":"asc"}}`) {
					t.Errorf("7.x walk: position %+v, searches %v", page.Next, searches)
				}
				return
			}
			if page.Next.PIT == "" || !page.Next.Expires.Equal(clk.Now().Add(10*time.Minute)) {
				t.Errorf("8.x walk position %+v, want a point in time lapsing in 10 minutes", page.Next)
			}
			reqs := fake.Requests()
			if len(reqs) < 2 || reqs[len(reqs)-2].Path != "/superdesk_contacts/_pit" || reqs[len(reqs)-2].Query.Get("keep_alive") != "600000ms" {
				t.Errorf("requests %v, want a point in time opened on the index", reqs)
			}
			if len(searches) != 1 || searches[0].Path != "/_search" || !strings.Contains(string(searches[0].Body), `{"_shard_doc":{"order":"asc"}}`) ||
				!strings.Contains(string(searches[0].Body), `"pit":{"id":"`+page.Next.PIT+`","keep_alive":"600000ms"}`) {
				t.Errorf("searches %v, want one of the point in time by shard order", searches)
			}
			fake.Clear()
			last, err := store.Find(t.Context(), walkQuery(t, "contacts", contacts, page.Next))
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(last.Docs); len(got) != 1 || got[0] != "5f0c7c2e2b0b7a0a1c5e9b01" || last.Next != nil {
				t.Errorf("last page %v, next %+v", got, last.Next)
			}
			for _, r := range fake.Requests() {
				if r.Path != "/_search" {
					t.Errorf("the second page asked %s, want searches of its point in time only", r.Path)
				}
			}
		})
	}
}

// On 8.x, a walk whose point in time has lapsed cannot go on: an
// ErrCursor (a 400 telling the client to start again), as is a position
// made on 7.x.
func TestWalkPointInTimeLapses(t *testing.T) {
	const body = `{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":1,"track_total_hits":10000}`
	clk := testkit.NewClock(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC))
	fake, store := walkFixture(t, estest.V8, clk, time.Minute)
	first, err := store.Find(t.Context(), walkQuery(t, "assignments", body, nil))
	if err != nil || first.Next == nil {
		t.Fatalf("first page: %+v, %v", first, err)
	}
	clk.Advance(59 * time.Second)
	second, err := store.Find(t.Context(), walkQuery(t, "assignments", body, first.Next))
	if err != nil || second.Next == nil {
		t.Fatalf("a page within the keep-alive: %+v, %v", second, err)
	}
	clk.Advance(time.Minute)
	_, err = store.Find(t.Context(), walkQuery(t, "assignments", body, second.Next))
	if !errors.Is(err, sources.ErrCursor) || !errors.Is(err, sources.ErrInvalid) {
		t.Errorf("a page after the keep-alive: %v, want ErrCursor", err)
	}

	third, err := store.Find(t.Context(), walkQuery(t, "assignments", body, nil))
	if err != nil {
		t.Fatal(err)
	}
	fake.ExpirePITs() // a node restart
	if _, err := store.Find(t.Context(), walkQuery(t, "assignments", body, third.Next)); !errors.Is(err, sources.ErrCursor) {
		t.Errorf("a page of a point in time no node knows: %v, want ErrCursor", err)
	}
	from7 := &sources.Position{Values: []any{int64(1705316400000), "5f0c7c2e2b0b7a0a1c5e9a02"}}
	if _, err := store.Find(t.Context(), walkQuery(t, "assignments", body, from7)); !errors.Is(err, sources.ErrCursor) {
		t.Errorf("a 7.x position on 8.x: %v, want ErrCursor", err)
	}
}

// A walk of a missing index is an empty page, as any list of it is, and
// opens no point in time.
func TestWalkMissingIndex(t *testing.T) {
	for _, v := range versions {
		clk := testkit.NewClock(time.Now())
		fake, store := walkFixture(t, v, clk, time.Minute)
		res, err := store.Find(t.Context(), walkQuery(t, "planning", `{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":1}`, nil))
		if err != nil || len(res.Docs) != 0 || res.Next != nil {
			t.Errorf("%s: walk of a missing index: %+v, %v", v, res, err)
		}
		res, err = store.Find(t.Context(), walkQuery(t, "planning", `{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":1}`, nil))
		if err != nil || len(res.Docs) != 0 {
			t.Errorf("%s: %+v, %v", v, res, err)
		}
		if n := fake.OpenPITs(); n != 0 {
			t.Errorf("%s: %d points in time open", v, n)
		}
	}
}

// 8.x refuses to sort on _id, as the real server does by default.
func TestFakeRefusesIDSortOn8(t *testing.T) {
	for _, v := range versions {
		_, store := walkFixture(t, v, testkit.NewClock(time.Now()), time.Minute)
		q := &sources.Query{Resource: resource("contacts"), Page: 1, MaxResults: 2,
			Search: decode(t, `{"query":{"bool":{}},"sort":[{"_id":{"order":"asc"}}],"size":2}`)}
		_, err := store.Find(t.Context(), q)
		if got := errors.Is(err, sources.ErrInvalid); got != (v.Major() >= 8) {
			t.Errorf("%s: a sort on _id: %v", v, err)
		}
	}
}

func ids(docs []*sources.Doc) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		v, _ := d.Get("_id")
		out[i], _ = sources.IDString(v)
	}
	return out
}

// searchBodies are the bodies of the searches the fake answered since it
// was last cleared, canonical.
func searchBodies(t *testing.T, fake *estest.Server) []string {
	t.Helper()
	var out []string
	for _, s := range fake.Searches() {
		out = append(out, canonical(t, s.Body))
	}
	return out
}

// Only a walk's first page counts its hits; the position carries the
// total, which every page after it gives without counting
// (track_total_hits false). A position without a total (sealed before
// positions carried one) counts again.
func TestWalkCountsOnlyTheFirstPage(t *testing.T) {
	const items = `{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":1,"track_total_hits":10000}`
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			fake, store := walkFixture(t, v, testkit.NewClock(time.Now()), time.Minute)
			var counted []any
			q := walkQuery(t, "items", items, nil)
			for page := 1; ; page++ {
				fake.Clear()
				res, err := store.Find(t.Context(), q)
				if err != nil {
					t.Fatal(err)
				}
				if res.Total != 3 {
					t.Errorf("page %d: total %d, want 3", page, res.Total)
				}
				first := decode(t, searchBodies(t, fake)[0])
				tth, _ := first.Get("track_total_hits")
				counted = append(counted, tth)
				if res.Next == nil {
					break
				}
				if res.Next.Total != 3 {
					t.Errorf("page %d: the position carries total %d, want 3", page, res.Next.Total)
				}
				q.Cursor.After = res.Next
			}
			if diff := cmp.Diff(counted, []any{int64(10000), false, false}); diff != "" {
				t.Errorf("track_total_hits of each page (-got +want):\n%s", diff)
			}

			old := &sources.Position{Values: []any{int64(1705399200000), "urn:newsml:2"}} // no total
			fake.Clear()
			res, err := store.Find(t.Context(), walkQuery(t, "items", items, old))
			if err != nil {
				t.Fatal(err)
			}
			body := decode(t, searchBodies(t, fake)[0])
			if tth, _ := body.Get("track_total_hits"); tth != int64(10000) || res.Total != 3 || res.Next == nil || res.Next.Total != 3 {
				t.Errorf("a position without a total: track_total_hits %v, total %d, next %+v; want a count of 3", tth, res.Total, res.Next)
			}
		})
	}
}

// Past the first page, a range on the primary sort key from the
// position bounds the search to what follows it, beside search_after:
// on dates and keywords the index maps, descending or ascending, unless
// the sort or the body rules it out.
func TestWalkRange(t *testing.T) {
	const updated = int64(1705399200000) // urn:newsml:2's _updated, the newest
	for _, tc := range []struct {
		name, res, sort string
		extra           string // more of the body
		after           []any  // the first page's position, as the fake gives it
		want            string // the range clause; "" for none
	}{
		{"a date, descending", "items", `{"_updated":{"order":"desc"}}`, "", []any{updated, "urn:newsml:2"},
			`{"range":{"_updated":{"format":"epoch_millis","lte":1705399200000}}}`},
		{"a date, ascending", "items", `{"_updated":{"order":"asc"}}`, "", []any{int64(1705226400000), "urn:newsml:3"},
			`{"range":{"_updated":{"format":"epoch_millis","gte":1705226400000}}}`},
		{"a keyword", "items", `{"type":{"order":"asc"}}`, "", []any{"picture", "urn:newsml:2"},
			`{"range":{"type":{"gte":"picture"}}}`},
		{"a keyword sub-field, missing first", "contacts", `{"last_name.keyword":{"order":"desc","missing":"_first"}}`, "", nil,
			`{"range":{"last_name.keyword":{"lte":"Zed"}}}`},
		{"the largest of several values", "items", `{"_updated":{"order":"asc","mode":"max"}}`, "", []any{int64(1705226400000), "urn:newsml:3"},
			`{"range":{"_updated":{"format":"epoch_millis","gte":1705226400000}}}`},
		{"a number", "items", `{"priority":{"order":"desc","unmapped_type":"long"}}`, "", nil, ""},
		{"an average", "items", `{"_updated":{"order":"desc","mode":"avg"}}`, "", nil, ""},
		{"a missing value of its own", "items", `{"_updated":{"order":"desc","missing":0}}`, "", nil, ""},
		{"aggregations", "items", `{"_updated":{"order":"desc"}}`, `,"aggs":{"t":{"terms":{"field":"type"}}}`, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range versions {
				fake, store := walkFixture(t, v, testkit.NewClock(time.Now()), time.Minute)
				body := `{"query":{"match_all":{}},"sort":[` + tc.sort + `],"size":1` + tc.extra + `}`
				first, err := store.Find(t.Context(), walkQuery(t, tc.res, body, nil))
				if err != nil || first.Next == nil {
					t.Fatalf("%s: first page %+v, %v", v, first, err)
				}
				if tc.after != nil && v == estest.V710 {
					if diff := cmp.Diff(first.Next.Values, tc.after); diff != "" {
						t.Errorf("%s: position (-got +want):\n%s", v, diff)
					}
				}
				fake.Clear()
				if _, err := store.Find(t.Context(), walkQuery(t, tc.res, body, first.Next)); err != nil {
					t.Fatalf("%s: second page: %v", v, err)
				}
				got := decode(t, searchBodies(t, fake)[0])
				query, _ := got.Get("query")
				want := `{"match_all":{}}`
				if tc.want != "" {
					want = `{"bool":{"filter":[` + tc.want + `],"must":[{"match_all":{}}]}}`
				}
				if diff := cmp.Diff(string(codec.AppendCanonicalJSON(nil, query)), want); diff != "" {
					t.Errorf("%s: the second page's query (-got +want):\n%s", v, diff)
				}
				if !got.Has("search_after") {
					t.Errorf("%s: the second page has no search_after", v)
				}
			}
		})
	}
}

// missingKeySorts are sorts on keys some items lack: a date and a
// keyword, those without it last (the default) or first.
var missingKeySorts = []string{
	`{"versioncreated":{"order":"desc"}}`,
	`{"versioncreated":{"order":"asc"}}`,
	`{"versioncreated":{"order":"desc","missing":"_first"}}`,
	`{"assignment_id":{"order":"asc"}}`,
	`{"assignment_id":{"order":"desc","missing":"_first"}}`,
}

// A walk on a key some documents lack returns each document exactly
// once, in the order of the list in one page, bounded by a range or not,
// in pages of every size: those without the key come after (or before,
// missing: _first) all the others, which a range on the key would leave
// out.
func TestWalkKeyMissing(t *testing.T) {
	for _, sort := range missingKeySorts {
		for _, v := range versions {
			fake, store := walkFixture(t, v, testkit.NewClock(time.Now()), time.Minute)
			walkEach(t, fake, store, "items", sort, string(v))
		}
	}
}

// walkEach walks res sorted by sort (ties broken by guid) in pages of 1
// to 3 and checks each walk against the list in one page; with a fake,
// it returns the bodies of the searches of the walk by 1.
func walkEach(t *testing.T, fake *estest.Server, store *essrc.Store, res, sort, name string) []string {
	t.Helper()
	whole := `{"query":{"bool":{}},"sort":[` + sort + `,{"guid":{"order":"asc"}}],"size":100}`
	one, err := store.Find(t.Context(), &sources.Query{Resource: resource(res), Page: 1, MaxResults: 100, Search: decode(t, whole)})
	if err != nil {
		t.Fatalf("%s %s: %v", name, sort, err)
	}
	var bodies []string
	for size := 1; size <= 3; size++ {
		if fake != nil {
			fake.Clear()
		}
		body := `{"query":{"bool":{}},"sort":[` + sort + `],"size":` + strconv.Itoa(size) + `,"track_total_hits":10000}`
		q := walkQuery(t, res, body, nil)
		q.MaxResults = size
		var got []string
		for page := 0; ; page++ {
			r, err := store.Find(t.Context(), q)
			if err != nil {
				t.Fatalf("%s %s by %d, page %d: %v", name, sort, size, page+1, err)
			}
			got = append(got, ids(r.Docs)...)
			if r.Next == nil {
				break
			}
			if page > 10 {
				t.Fatalf("%s %s by %d: no end (%v)", name, sort, size, got)
			}
			q.Cursor.After = r.Next
		}
		if diff := cmp.Diff(got, ids(one.Docs)); diff != "" {
			t.Errorf("%s %s by %d (-walked +one page):\n%s", name, sort, size, diff)
		}
		if size == 1 && fake != nil {
			bodies = searchBodies(t, fake)
		}
	}
	return bodies
}

// Past the first page, a walk tells Cursor.Early the next position from
// the answer's bytes, before it decodes them: the position Find then
// returns. Not on the first page (its total is in the answer), nor on
// the last.
func TestWalkTellsTheNextPositionEarly(t *testing.T) {
	const items = `{"query":{"bool":{}},"sort":[{"_updated":{"order":"desc"}}],"size":1,"track_total_hits":10000}`
	for _, v := range versions {
		t.Run(string(v), func(t *testing.T) {
			_, store := walkFixture(t, v, testkit.NewClock(time.Now()), time.Minute)
			q := walkQuery(t, "items", items, nil)
			var told []sources.Position
			q.Cursor.Early = func(p sources.Position) { told = append(told, p) }
			for page := 1; ; page++ {
				told = nil
				res, err := store.Find(t.Context(), q)
				if err != nil {
					t.Fatal(err)
				}
				var want []sources.Position
				if page > 1 && res.Next != nil {
					want = []sources.Position{*res.Next}
				}
				if diff := cmp.Diff(told, want); diff != "" {
					t.Errorf("page %d: told early (-got +want):\n%s", page, diff)
				}
				if res.Next == nil {
					if page != 3 {
						t.Errorf("%d pages, want 3", page)
					}
					break
				}
				q.Cursor.After = res.Next
			}
		})
	}
}
