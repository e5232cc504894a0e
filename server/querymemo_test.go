package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prodapi/prodapi/cache"
	"github.com/prodapi/prodapi/server/query"
	"github.com/prodapi/prodapi/sources"
)

// More distinct queries than slots, twice over, details and lists of two
// resources: a memoised query is always the one a fresh parse gives, and
// a query that does not parse is refused every time.
func TestQueryMemo(t *testing.T) {
	m := newQueryMemo(nil)
	var items, desks *sources.Resource
	for _, r := range sources.Resources() {
		switch r.Name {
		case "items":
			items = r
		case "desks":
			desks = r
		}
	}
	for round := range 2 {
		for i := range 6000 {
			for _, tc := range []struct {
				res     *sources.Resource
				id, raw string
			}{
				{items, "", fmt.Sprintf("max_results=%d&page=%d", i%50+1, i%7+1)},
				{desks, "", fmt.Sprintf("max_results=%d&page=%d", i%50+1, i%7+1)},
				{items, fmt.Sprintf("urn:%d", i), ""},
			} {
				got, err := m.parse(tc.res, tc.id, tc.raw)
				want, werr := query.Parse(tc.res, tc.id, tc.raw)
				if err != nil || werr != nil {
					t.Fatalf("parse(%s, %q, %q): %v, %v", tc.res.Name, tc.id, tc.raw, err, werr)
				}
				if cache.Key(got) != cache.Key(want) {
					t.Fatalf("round %d: parse(%s, %q, %q) = %s, want %s", round, tc.res.Name, tc.id, tc.raw, cache.Key(got), cache.Key(want))
				}
			}
		}
		for range 2 {
			if _, err := m.parse(items, "", "page=21&max_results=500"); err == nil {
				t.Fatal("page 21 of 500 parsed")
			}
		}
	}
}

// The plain lists of different resources (no id, no query) keep a slot
// each: alternating between them parses nothing again.
func TestQueryMemoKeepsResourcesApart(t *testing.T) {
	m := newQueryMemo(nil)
	first := map[string]*sources.Query{}
	for _, r := range sources.Resources() {
		q, err := m.parse(r, "", "")
		if err != nil {
			t.Fatal(err)
		}
		first[r.Name] = q
	}
	for _, r := range sources.Resources() {
		if q, _ := m.parse(r, "", ""); q != first[r.Name] {
			t.Errorf("%s: the plain list was parsed again: another resource took its slot", r.Name)
		}
	}
}

// An in-process hit allocates what chi's routing does (the copy of the
// request that carries its route context, and a detail's id set as the
// request's path value) and the header values its response formats
// (Cache-Status, Age, ETag, Last-Modified, Content-Length, X-Total-Count).
// The count is exact, so this fails on any new allocation on the hit
// path.
func TestHitAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	h, tok := hitHandler(t)
	for _, tc := range []struct {
		target string
		want   float64
	}{
		{"/prodapi/v1/items/urn:newsml:x:a3a0921f", 12},
		{"/prodapi/v1/items/urn:newsml:x:a3a0921f/", 12},
		{"/prodapi/v1/items?max_results=25", 11},
		{"/prodapi/v1/items/?max_results=25", 11},
	} {
		r := httptest.NewRequest(http.MethodGet, tc.target, nil)
		r.Header.Set("Authorization", tok)
		r.Header.Set("Accept-Encoding", "gzip")
		w := &discardWriter{h: http.Header{}}
		h.ServeHTTP(w, r) // the miss
		got := testing.AllocsPerRun(1000, func() {
			clear(w.h)
			h.ServeHTTP(w, r)
		})
		if got != tc.want {
			t.Errorf("%s: %.2f allocations per hit, want %.0f", tc.target, got, tc.want)
		}
	}
}
