package sourcestest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
)

// A walkCase is a cursor walk of a list, page by page, compared with the
// same list in one page. Document lists (where, sort) must come out in
// exactly the one page's order, whatever the fields hold: missing values,
// several types, arrays, empty arrays, ties broken by _id of both types.
// Search lists (body, whose size is the page size) must return each hit
// exactly once; in the one page's order when the case's sort is total
// (ordered), the tiebreaker being the backend's own otherwise.
type walkCase struct {
	name, resource string
	where          string
	sort           []sources.SortKey
	body           string
	ordered        bool
	sizes          []int // page sizes to walk with
}

func walkCases() []walkCase {
	byName := asc("name")
	return []walkCase{
		{name: "desks by name", resource: "desks", sort: byName, sizes: []int{1, 3, 4}},
		{name: "dates and a string", resource: "desks", sort: []sources.SortKey{desc("_updated")}, sizes: []int{1, 2}},
		{name: "dates and a string ascending", resource: "desks", sort: asc("_updated"), sizes: []int{1, 3}},
		{name: "a field most lack", resource: "desks", sort: asc("monitoring_default_view"), sizes: []int{1, 2}},
		{name: "a field most lack, descending", resource: "desks", sort: []sources.SortKey{desc("monitoring_default_view")}, sizes: []int{1}},
		{name: "ties broken by ids of two types", resource: "desks", sort: []sources.SortKey{desc("content_expiry")}, sizes: []int{1, 2}},
		{name: "ids of two types", resource: "desks", sort: []sources.SortKey{desc("_id")}, sizes: []int{1, 3}},
		{name: "an array of strings", resource: "desks", sort: asc("tags"), sizes: []int{1}},
		{name: "arrays of numbers", resource: "desks", sort: []sources.SortKey{desc("geo"), {Field: "name"}}, sizes: []int{1, 2}},
		{name: "arrays of numbers ascending", resource: "desks", sort: asc("loc.coordinates"), sizes: []int{1}},
		{name: "empty arrays", resource: "users", sort: asc("invisible_stages"), sizes: []int{1, 2}},
		{name: "empty arrays descending", resource: "users", sort: []sources.SortKey{desc("invisible_stages")}, sizes: []int{1}},
		{name: "a path through an array", resource: "desks", sort: []sources.SortKey{desc("members.user")}, sizes: []int{1}},
		{name: "with a filter", resource: "desks", where: `{"desk_type": "authoring"}`, sort: asc("content_expiry"), sizes: []int{1}},
		{name: "none match", resource: "desks", where: `{"name": "nobody"}`, sort: byName, sizes: []int{1}},
		{name: "sub-document field", resource: "events_history", sort: []sources.SortKey{desc("update.state")}, sizes: []int{1, 2}},
		{name: "a mixed id field", resource: "events_history", sort: asc("user_id"), sizes: []int{1}},

		{name: "items by default", resource: "items", ordered: true,
			body: `{"query": {"bool": {}}, "sort": [{"_updated": {"order": "desc"}}], "track_total_hits": 10000}`, sizes: []int{1, 4}},
		{name: "items by a keyword with ties", resource: "items", ordered: true,
			body: `{"query": {"bool": {}}, "sort": [{"type": {"order": "asc"}}], "track_total_hits": 10000}`, sizes: []int{1, 2}},
		{name: "items by a number some lack", resource: "items", ordered: true,
			body: `{"query": {"bool": {}}, "sort": [{"urgency": {"order": "desc"}}], "track_total_hits": 10000}`, sizes: []int{1, 5}},
		{name: "items by a keyword some lack", resource: "items", ordered: true,
			body: `{"query": {"bool": {}}, "sort": [{"assignment_id": {"order": "asc", "missing": "_first"}}], "track_total_hits": 10000}`, sizes: []int{1}},
		{name: "items of a query", resource: "items", ordered: true,
			body:  `{"query": {"bool": {"filter": [{"term": {"state": {"value": "published"}}}]}}, "sort": [{"_updated": {"order": "asc"}}], "track_total_hits": 10000}`,
			sizes: []int{1, 3}},
		{name: "events by dates", resource: "events", ordered: true,
			body: `{"query": {"bool": {}}, "sort": [{"dates.start": {"order": "asc"}}], "track_total_hits": 10000}`, sizes: []int{1, 3}},
		{name: "planning by default", resource: "planning", ordered: true,
			body: `{"query": {"bool": {}}, "sort": [{"_updated": {"order": "desc"}}], "track_total_hits": 10000}`, sizes: []int{1, 2}},
		{name: "contacts by last name", resource: "contacts",
			body:  `{"query": {"bool": {}}, "sort": [{"last_name.keyword": {"order": "asc", "unmapped_type": "keyword"}}], "track_total_hits": 10000}`,
			sizes: []int{1, 2}},
		{name: "contacts, ties", resource: "contacts",
			body: `{"query": {"bool": {}}, "sort": [{"is_active": {"order": "desc"}}], "track_total_hits": 10000}`, sizes: []int{1, 3}},
		{name: "assignments by default", resource: "assignments",
			body: `{"query": {"bool": {}}, "sort": [{"_updated": {"order": "desc"}}], "track_total_hits": 10000}`, sizes: []int{1, 3}},
		{name: "search, none match", resource: "assignments",
			body:  `{"query": {"bool": {"filter": [{"term": {"type": {"value": "nothing"}}}]}}, "sort": [{"_updated": {"order": "desc"}}], "track_total_hits": 10000}`,
			sizes: []int{1}},
	}
}

func testWalk(t *testing.T, s *suite) {
	for _, tc := range walkCases() {
		s.run(t, groupWalk, tc.name, func(t *testing.T) {
			res := resource(t, tc.resource)
			whole := tc.query(t, res, 100)
			one, err := s.store.Find(t.Context(), whole)
			if err != nil {
				t.Fatalf("the list in one page: %v", err)
			}
			want := ids(one.Docs)
			if one.Next != nil {
				t.Errorf("a list that is no walk has a next position: %+v", one.Next)
			}
			for _, size := range tc.sizes {
				t.Run(fmt.Sprint("by ", size), func(t *testing.T) {
					got := walk(t, s.store, tc.query(t, res, size), len(want), one.Total)
					if !tc.ordered && res.Search {
						got, want := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
						if diff := cmp.Diff(got, want); diff != "" {
							t.Errorf("documents walked (-got +want, sorted):\n%s", diff)
						}
						return
					}
					if diff := cmp.Diff(got, want); diff != "" {
						t.Errorf("documents walked (-got +want):\n%s", diff)
					}
				})
			}
		})
	}
}

// query is the case's list with pages of size; a guid-broken sort when
// ordered, so that the one page has the walk's order.
func (tc walkCase) query(t *testing.T, res *sources.Resource, size int) *sources.Query {
	q := &sources.Query{Resource: res, Page: 1, MaxResults: size, Sort: tc.sort}
	if tc.where != "" {
		q.Where = parse(t, tc.where)
	}
	if tc.body != "" {
		q.Search = parse(t, tc.body)
		q.Search.Set("size", int64(size))
		if tc.ordered && size == 100 {
			// One page in the walk's order: the tiebreaker last.
			sort, _ := q.Search.Get("sort")
			q.Search.Set("sort", append(slices.Clone(sort.([]any)), sources.D(res.Tiebreaker, sources.D("order", "asc"))))
		}
	}
	return q
}

// walk follows a cursor walk to its end and returns the ids it gave: the
// total on every page is the list's, every page but the last is full,
// and the last has no next position.
func walk(t *testing.T, store sources.Store, q *sources.Query, n, total int) []string {
	t.Helper()
	q.Cursor = &sources.Cursor{}
	got := []string{}
	for page := 1; ; page++ {
		res, err := store.Find(t.Context(), q)
		if err != nil {
			t.Fatalf("page %d: %v", page, err)
		}
		if res.Total != total {
			t.Errorf("page %d: total %d, want %d", page, res.Total, total)
		}
		got = append(got, ids(res.Docs)...)
		if res.Next == nil {
			if len(res.Docs) == 0 && page > 1 {
				t.Errorf("page %d is empty: the page before it should have been the last", page)
			}
			return got
		}
		if len(res.Docs) != q.MaxResults {
			t.Errorf("page %d: %d documents and a next position, want a full page of %d", page, len(res.Docs), q.MaxResults)
		}
		if page > n+1 {
			t.Fatalf("%d pages for %d documents: the walk does not end (%s)", page, n, strings.Join(got, ", "))
		}
		q.Cursor.After = res.Next
	}
}
