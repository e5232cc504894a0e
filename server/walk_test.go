package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/enrich"
	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/server/query"
	"github.com/prodapi/prodapi/server/render"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// A page of a list as a client reads it.
type listPage struct {
	Items []struct {
		ID string `json:"_id"`
	} `json:"_items"`
	Links map[string]struct {
		Title, Href string
	} `json:"_links"`
	Meta map[string]int `json:"_meta"`
}

func getList(t *testing.T, ts *httptest.Server, target string) (int, listPage) {
	t.Helper()
	res, err := http.Get(ts.URL + "/prodapi/v1/" + target)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var p listPage
	if err := json.NewDecoder(res.Body).Decode(&p); err != nil && res.StatusCode == 200 {
		t.Fatalf("%s: %v", target, err)
	}
	return res.StatusCode, p
}

// walkAPI follows a walk's next links from first to its last page and
// returns the ids it served, checking each page's links and _meta.
func walkAPI(t *testing.T, ts *httptest.Server, first string) []string {
	t.Helper()
	got := []string{}
	target := first
	for pages := 0; ; pages++ {
		status, p := getList(t, ts, target)
		if status != 200 {
			t.Fatalf("%s: %d", target, status)
		}
		for _, it := range p.Items {
			got = append(got, it.ID)
		}
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range p.Links {
				if !yield(k) {
					return
				}
			}
		})
		if !slices.Equal(keys, []string{"next", "parent", "self"}) && !slices.Equal(keys, []string{"parent", "self"}) {
			t.Errorf("%s: _links %v, want parent, self and next (no prev, no last)", target, keys)
		}
		if _, ok := p.Meta["page"]; ok || len(p.Meta) != 2 {
			t.Errorf("%s: _meta %v, want max_results and total only", target, p.Meta)
		}
		if self := p.Links["self"].Href; !strings.Contains(self, "cursor=") {
			t.Errorf("%s: self %q carries no cursor", target, self)
		}
		next, ok := p.Links["next"]
		if !ok {
			return got
		}
		u, err := url.Parse(next.Href)
		if err != nil || u.Query().Get("cursor") == "" || next.Title != "next page" {
			t.Fatalf("next link %+v", next)
		}
		if pages > 1000 {
			t.Fatal("the walk does not end")
		}
		target = next.Href
	}
}

// Every list of the sample newsroom walks by cursor through the API,
// following next links: each document once, in the list's order.
func TestWalkThroughTheAPI(t *testing.T) {
	ts := newSampleServer(t)
	for _, res := range sources.Resources() {
		t.Run(res.Name, func(t *testing.T) {
			_, whole := getList(t, ts, res.Name+"?max_results=500&sort=_id")
			want := []string{}
			for _, it := range whole.Items {
				want = append(want, it.ID)
			}
			if len(want) < 2 {
				t.Fatalf("the sample has %d %s", len(want), res.Name)
			}
			got := walkAPI(t, ts, res.Name+"?max_results=2&sort=_id&cursor=")
			if diff := cmp.Diff(got, want); diff != "" {
				t.Errorf("walked (-got +want):\n%s", diff)
			}
			// The default sort, ties and all: each document once.
			got = walkAPI(t, ts, res.Name+"?max_results=3&cursor=")
			slices.Sort(got)
			slices.Sort(want)
			if diff := cmp.Diff(got, want); diff != "" {
				t.Errorf("walked by the default sort (-got +want, sorted):\n%s", diff)
			}
		})
	}
}

// A refused cursor is a 400 in the envelope, decided before the loader
// is asked; a walk the backend can no longer continue is a 400 telling the
// client to start again.
func TestWalkRefusals(t *testing.T) {
	store, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := enrich.New(store, enrich.Options{})
	var loads atomic.Int64
	var fail atomic.Bool
	renderer := render.New(store, e.Enrich)
	load := server.LoaderFunc(func(ctx context.Context, q *sources.Query) (*sources.Representation, error) {
		loads.Add(1)
		if fail.Load() {
			return nil, sources.ErrCursor
		}
		return renderer.Load(ctx, q)
	})
	ts := httptest.NewServer(server.New(load, server.Options{CursorSecret: []byte("a secret of the fleet's, at least thirty-two bytes")}).Handler())
	t.Cleanup(ts.Close)

	_, first := getList(t, ts, "desks?max_results=1&cursor=")
	next := first.Links["next"].Href
	if next == "" {
		t.Fatal("no next link")
	}
	loads.Store(0)
	for _, target := range []string{
		strings.Replace(next, "cursor=", "cursor=x", 1),
		next + "&page=2",
		next + "&sort=-name",
		strings.Replace(next, "desks?", "users?", 1),
		`items?cursor=&source={"sort":["_score"]}`,
	} {
		res, err := http.Get(ts.URL + "/prodapi/v1/" + target)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Status string `json:"_status"`
			Error  struct {
				Code    int
				Message string
			} `json:"_error"`
		}
		json.NewDecoder(res.Body).Decode(&body)
		res.Body.Close()
		if res.StatusCode != 400 || body.Status != "ERR" || body.Error.Code != 400 || !strings.HasPrefix(body.Error.Message, "cursor: ") {
			t.Errorf("%s: %d %+v, want a 400 naming cursor", target, res.StatusCode, body)
		}
	}
	if n := loads.Load(); n != 0 {
		t.Errorf("refused cursors cost %d loads", n)
	}
	fail.Store(true)
	res, err := http.Get(ts.URL + "/prodapi/v1/" + next)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 400 {
		t.Errorf("a walk that cannot continue: %d, want 400", res.StatusCode)
	}
	// Another server with the same secret (a replica) continues the walk.
	fail.Store(false)
	replica := httptest.NewServer(server.New(renderer, server.Options{CursorSecret: []byte("a secret of the fleet's, at least thirty-two bytes")}).Handler())
	t.Cleanup(replica.Close)
	if status, _ := getList(t, replica, next); status != 200 {
		t.Errorf("the replica refused the cursor: %d", status)
	}
	other := httptest.NewServer(server.New(renderer, server.Options{}).Handler())
	t.Cleanup(other.Close)
	if status, _ := getList(t, other, next); status != 400 {
		t.Errorf("a server of another secret took the cursor: %d", status)
	}
}

// A cursor is judged each time it comes: the same request, accepted
// once, is refused once its cursor has expired (the parsed-query memo
// does not keep walks' pages).
func TestWalkCursorExpiresOnRepeat(t *testing.T) {
	store, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var now atomic.Int64
	now.Store(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC).Unix())
	clock := func() time.Time { return time.Unix(now.Load(), 0) }
	ts := httptest.NewServer(server.New(render.New(store, enrich.New(store, enrich.Options{}).Enrich),
		server.Options{Now: clock, CursorSecret: []byte("a secret of the fleet's, at least thirty-two bytes")}).Handler())
	t.Cleanup(ts.Close)
	_, first := getList(t, ts, "users?max_results=1&cursor=")
	next := first.Links["next"].Href
	for range 2 {
		if status, _ := getList(t, ts, next); status != 200 {
			t.Fatalf("a fresh cursor: %d", status)
		}
	}
	now.Add(int64((query.CursorLifetime + time.Second).Seconds()))
	if status, _ := getList(t, ts, next); status != 400 {
		t.Errorf("the same cursor past its lifetime: %d, want 400", status)
	}
	if status, _ := getList(t, ts, "users?max_results=1&cursor="); status != 200 {
		t.Errorf("starting again: %d", status)
	}
}
