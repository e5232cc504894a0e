package elastic_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8"

	"github.com/prodapi/prodapi/sources"
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
			if reqs := fake.Requests(); len(reqs) != 1 {
				t.Errorf("the second page opened another point in time: %v", reqs)
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
