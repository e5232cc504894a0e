// Package sourcestest is the contract suite every sources.Store must pass:
// the sandbox, the Mongo and Elasticsearch adapters through their
// protocol-level fakes, against the FerretDB and Elasticsearch 7.10.2
// nodes test/realserver starts, and against the services of compose.yaml
// (PRODAPI_INTEGRATION).
//
// The suite runs against the fixture in testdata/contract (Dir): one
// <collection>.json per collection in MongoDB Extended JSON, with
// ObjectID, 24-hex string and URN ids, dates as {"$date"} and as strings,
// arrays of sub-documents and linked assignments, planning, events and
// items. Cases assert on ids in order and on totals, so that Mongo- and
// Elasticsearch-backed stores can pass the same suite; where the two
// genuinely differ (text analysis, mappings) cases keep to what both real
// systems do with Superdesk's mappings: term queries on keyword fields
// use whole values, full-text queries use text fields, sorts and terms
// aggregations use keyword, numeric and date fields, and every sort is
// total (no ties left to the backend).
//
// The Walk group walks lists by cursor (sources.Cursor), page by page,
// and compares them with the same list in one page: document lists in
// exactly its order through missing values, mixed types, arrays and
// ties; search lists each hit exactly once.
//
// Every MongoDB operator and every Elasticsearch query and aggregation
// type the API accepts (sources/grammar's tables) has at least one case:
// TestCasesCoverGrammar fails when one has none. Each case has a stable
// name, "group/name" (CaseNames), so a run against a real server can skip
// its known differences by name with RunOptions.
package sourcestest

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// Dir returns the contract fixture directory, for Run.
func Dir() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("testdata", "contract")
	}
	return filepath.Join(filepath.Dir(file), "testdata", "contract")
}

// Fixtures returns the documents of dir by collection, decoded as the
// sandbox decodes them (Extended JSON), for seeding fakes. Only the files
// of sources.Collections are read; missing ones are left out.
func Fixtures(dir string) (map[string][]*sources.Doc, error) {
	out := map[string][]*sources.Doc{}
	for _, c := range sources.Collections {
		data, err := os.ReadFile(filepath.Join(dir, c+".json"))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sourcestest: %w", err)
		}
		v, err := codec.DecodeJSON(data, codec.DecodeOptions{Extended: true})
		if err != nil {
			return nil, fmt.Errorf("sourcestest: %s.json: %w", c, err)
		}
		list, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("sourcestest: %s.json: want a JSON array", c)
		}
		docs := make([]*sources.Doc, 0, len(list))
		for i, e := range list {
			d, ok := e.(*sources.Doc)
			if !ok {
				return nil, fmt.Errorf("sourcestest: %s.json: element %d is not a document", c, i)
			}
			docs = append(docs, d)
		}
		out[c] = docs
	}
	return out, nil
}

// GeoIndexes returns the geospatial indexes a real MongoDB needs before
// the $near and $nearSphere cases can run, by collection and field: "2d"
// for the legacy coordinate pairs, "2dsphere" for the GeoJSON points. The
// fakes and the sandbox need none.
func GeoIndexes() map[string]map[string]string {
	return map[string]map[string]string{"desks": {"geo": "2d", "loc": "2dsphere"}}
}

// Run runs the contract suite. open returns a Store holding exactly the
// documents of the fixture directory dir (Dir(), or a copy of it): the
// sandbox loaded from it, or a fake Mongo/Elasticsearch seeded with
// Fixtures(dir).
func Run(t *testing.T, dir string, open func(t *testing.T, dir string) sources.Store) {
	t.Helper()
	RunOptions(t, dir, open, Options{})
}

// Options adjust a run of the suite. The zero value runs every case.
type Options struct {
	// Skip names the cases a store is known to answer differently from
	// MongoDB or Elasticsearch (a real server's documented gap, say), each
	// with the reason, which the skipped subtest logs. A name is the
	// case's group and name as CaseNames lists them, such as
	// "FindDocuments/$geoWithin $box". A name that matches no case fails
	// the run, so a list of differences cannot go stale.
	Skip map[string]string
}

// RunOptions is Run with options.
func RunOptions(t *testing.T, dir string, open func(t *testing.T, dir string) sources.Store, opts Options) {
	t.Helper()
	for _, n := range unknownSkips(opts.Skip) {
		t.Errorf("sourcestest: Options.Skip names %q, which is no case", n)
	}
	s := &suite{store: open(t, dir), skip: opts.Skip}
	t.Run(groupGet, func(t *testing.T) { testGet(t, s) })
	t.Run(groupFindDocuments, func(t *testing.T) { testFindDocuments(t, s) })
	t.Run(groupFindSearch, func(t *testing.T) { testFindSearch(t, s) })
	t.Run(groupLookup, func(t *testing.T) { testLookup(t, s) })
	t.Run(groupWalk, func(t *testing.T) { testWalk(t, s) })
}

// The groups of cases, the first part of a case's name.
const (
	groupGet           = "Get"
	groupFindDocuments = "FindDocuments"
	groupFindSearch    = "FindSearch"
	groupLookup        = "Lookup"
	groupWalk          = "Walk"
)

// CaseNames returns the name of every case of the suite, "group/name",
// in the order they run: the names Options.Skip takes.
func CaseNames() []string {
	var out []string
	for _, c := range getCases() {
		out = append(out, groupGet+"/"+c.name)
	}
	for _, c := range notFoundCases() {
		out = append(out, groupGet+"/"+c.name())
	}
	for _, c := range findCases() {
		out = append(out, groupFindDocuments+"/"+c.name)
	}
	for _, c := range searchCases() {
		out = append(out, groupFindSearch+"/"+c.name)
	}
	for _, c := range lookupCases() {
		out = append(out, groupLookup+"/"+c.name)
	}
	for _, c := range walkCases() {
		out = append(out, groupWalk+"/"+c.name)
	}
	return out
}

// unknownSkips returns the names of skip that name no case, sorted.
func unknownSkips(skip map[string]string) []string {
	var out []string
	names := CaseNames()
	for _, n := range slices.Sorted(maps.Keys(skip)) {
		if !slices.Contains(names, n) {
			out = append(out, n)
		}
	}
	return out
}

// A suite is one run: the store under test and the cases to skip.
type suite struct {
	store sources.Store
	skip  map[string]string
}

// run runs one case as a subtest named for it, unless it is skipped.
func (s *suite) run(t *testing.T, group, name string, f func(t *testing.T)) {
	t.Helper()
	t.Run(name, func(t *testing.T) {
		if reason, ok := s.skip[group+"/"+name]; ok {
			t.Skipf("a known difference: %s", reason)
		}
		f(t)
	})
}

// Ids of the fixture.
const (
	d1 = "66a000000000000000000001" // Arts, ObjectID
	d2 = "66a000000000000000000002" // PROD, a 24-hex string id
	d3 = "66a000000000000000000003" // Sports, ObjectID
	d4 = "desk-politics"            // politics, a string id

	u1 = "66b000000000000000000001" // admin
	u2 = "66b000000000000000000002" // jdoe
	u3 = "66b000000000000000000003" // bsmith, a 24-hex string id

	as1 = "66e000000000000000000001"
	as2 = "66e000000000000000000002" // a 24-hex string id
	as3 = "66e000000000000000000003"
	as4 = "66e000000000000000000004"

	a1 = "urn:newsml:localhost:5000:2024-01-01T10:00:00.000000:item-0001"
	a2 = "tag:localhost:5000:2024:item-0002"
	a3 = "urn:newsml:localhost:5000:2024-01-03T10:00:00.000000:item-0003"
	a4 = "urn:newsml:localhost:5000:2024-01-04T10:00:00.000000:item-0004"
	a5 = "urn:newsml:localhost:5000:2024-01-05T10:00:00.000000:item-0005"
	a6 = "urn:newsml:localhost:5000:2024-01-06T10:00:00.000000:item-0006"

	c1 = "66f000000000000000000001" // Brett Favre
	c2 = "66f000000000000000000002" // Anna Novak, a 24-hex string id
	c3 = "66f000000000000000000003" // Zed Adams
	c4 = "66f000000000000000000004" // Pieter de Vries
	c5 = "66f000000000000000000005" // Red Cross, no last_name

	e1 = "urn:newsml:localhost:5000:2024-01-09T08:00:00.000000:event-0001"
	e2 = "urn:newsml:localhost:5000:2024-01-09T08:00:00.000000:event-0002"
	e3 = "urn:newsml:localhost:5000:2024-01-09T08:00:00.000000:event-0003"
	e4 = "urn:newsml:localhost:5000:2024-01-09T08:00:00.000000:event-0004"

	p1 = "urn:newsml:localhost:5000:2024-01-10T09:00:00.000000:planning-0001"
	p2 = "urn:newsml:localhost:5000:2024-01-10T09:00:00.000000:planning-0002"
	p3 = "urn:newsml:localhost:5000:2024-01-10T09:00:00.000000:planning-0003"

	cov1 = "urn:newsml:localhost:5000:2024-01-10T09:00:00.000000:coverage-0001"
	cov5 = "urn:newsml:localhost:5000:2024-01-10T09:00:00.000000:coverage-0005"

	h1 = "670000000000000000000001"
	h2 = "670000000000000000000002"
	h3 = "hist-3"

	f1 = "671000000000000000000001"
	f2 = "671000000000000000000002"

	ct1 = "672000000000000000000001"
	ct2 = "ct-picture"
	ct3 = "672000000000000000000003"
)

func resource(t *testing.T, name string) *sources.Resource {
	t.Helper()
	r, ok := sources.ResourceByName(name)
	if !ok {
		t.Fatalf("no resource %q", name)
	}
	return r
}

// ids returns the documents' ids as strings.
func ids(docs []*sources.Doc) []string {
	out := []string{}
	for _, d := range docs {
		v, _ := d.Get("_id")
		s, ok := sources.IDString(v)
		if !ok {
			s = fmt.Sprintf("<%T %v>", v, v)
		}
		out = append(out, s)
	}
	return out
}

// parse decodes client JSON (where, search bodies) as the server does:
// strictly, without Extended JSON.
func parse(t *testing.T, s string) *sources.Doc {
	t.Helper()
	v, err := codec.DecodeJSON([]byte(s), codec.DecodeOptions{Strict: true})
	if err != nil {
		t.Fatalf("bad test JSON %s: %v", s, err)
	}
	d, ok := v.(*sources.Doc)
	if !ok {
		t.Fatalf("test JSON %s is not an object", s)
	}
	return d
}

func oid(hex string) sources.ObjectID {
	id, ok := sources.ParseObjectID(hex)
	if !ok {
		panic("bad hex " + hex)
	}
	return id
}

func testGet(t *testing.T, s *suite) {
	for _, tc := range getCases() {
		s.run(t, groupGet, tc.name, func(t *testing.T) {
			res := resource(t, tc.resource)
			d, err := s.store.Get(t.Context(), res, tc.id)
			if err != nil {
				t.Fatalf("Get(%s, %s): %v", tc.resource, tc.id, err)
			}
			id, _ := d.Get("_id")
			if got := ids([]*sources.Doc{d})[0]; got != tc.wantID {
				t.Errorf("Get(%s, %s)._id = %s, want %s", tc.resource, tc.id, got, tc.wantID)
			}
			if _, isOID := id.(sources.ObjectID); isOID != tc.wantObjectID {
				t.Errorf("Get(%s, %s)._id is %T, want an ObjectID: %v", tc.resource, tc.id, id, tc.wantObjectID)
			}
			if tc.field != "" {
				if got, _ := d.String(tc.field); got != tc.value {
					t.Errorf("Get(%s, %s).%s = %q, want %q", tc.resource, tc.id, tc.field, got, tc.value)
				}
			}
			// The document is the caller's.
			d.Set(tc.field+"x", "changed")
			d.Delete("_id")
			again, err := s.store.Get(t.Context(), res, tc.id)
			if err != nil {
				t.Fatal(err)
			}
			if again.Has(tc.field+"x") || !again.Has("_id") {
				t.Errorf("Get(%s, %s): changing a returned document changed the store", tc.resource, tc.id)
			}
		})
	}
	for _, tc := range notFoundCases() {
		s.run(t, groupGet, tc.name(), func(t *testing.T) {
			_, err := s.store.Get(t.Context(), resource(t, tc.resource), tc.id)
			if !errors.Is(err, sources.ErrNotFound) {
				t.Errorf("Get(%s, %s) error = %v, want ErrNotFound", tc.resource, tc.id, err)
			}
		})
	}
}

type findCase struct {
	name, resource string
	where          string // JSON, "" for none
	sort           []sources.SortKey
	page, max      int // default 1, 25
	want           []string
	total          int
}

func asc(fields ...string) []sources.SortKey {
	keys := make([]sources.SortKey, len(fields))
	for i, f := range fields {
		keys[i] = sources.SortKey{Field: f}
	}
	return keys
}

func desc(field string) sources.SortKey { return sources.SortKey{Field: field, Desc: true} }

func testFindDocuments(t *testing.T, s *suite) {
	for _, tc := range findCases() {
		s.run(t, groupFindDocuments, tc.name, func(t *testing.T) {
			q := &sources.Query{Resource: resource(t, tc.resource), Page: max(tc.page, 1), MaxResults: tc.max, Sort: tc.sort}
			if q.MaxResults == 0 {
				q.MaxResults = 25
			}
			if tc.where != "" {
				q.Where = parse(t, tc.where)
			}
			res, err := s.store.Find(t.Context(), q)
			if err != nil {
				t.Fatalf("Find(%s where %s): %v", tc.resource, tc.where, err)
			}
			if diff := cmp.Diff(ids(res.Docs), tc.want); diff != "" {
				t.Errorf("Find(%s where %s) ids (-got +want):\n%s", tc.resource, tc.where, diff)
			}
			if res.Total != tc.total {
				t.Errorf("Find(%s where %s) total = %d, want %d", tc.resource, tc.where, res.Total, tc.total)
			}
		})
	}
}

type searchCase struct {
	name, resource, body string
	want                 []string
	total                int
	aggs                 string   // the expected aggregations, JSON; "" for none
	keys                 []string // the expected fields of the first hit, any order
}

func testFindSearch(t *testing.T, s *suite) {
	for _, tc := range searchCases() {
		s.run(t, groupFindSearch, tc.name, func(t *testing.T) {
			body := parse(t, tc.body)
			size, from := 25, 0
			if v, ok := body.Get("size"); ok {
				size = int(v.(int64))
			}
			if v, ok := body.Get("from"); ok {
				from = int(v.(int64))
			}
			q := &sources.Query{Resource: resource(t, tc.resource), Page: 1, MaxResults: max(size, 1), Search: body}
			if size > 0 && from > 0 {
				q.Page = from/size + 1
			}
			res, err := s.store.Find(t.Context(), q)
			if err != nil {
				t.Fatalf("Find(%s, %s): %v", tc.resource, tc.body, err)
			}
			if diff := cmp.Diff(ids(res.Docs), tc.want); diff != "" {
				t.Errorf("ids (-got +want):\n%s", diff)
			}
			if res.Total != tc.total {
				t.Errorf("total = %d, want %d", res.Total, tc.total)
			}
			for _, d := range res.Docs {
				if id, _ := d.Get("_id"); !isString(id) {
					t.Errorf("hit _id %v is %T, want a string as ES returns it", id, id)
				}
			}
			switch {
			case tc.aggs == "" && res.Aggregations != nil:
				t.Errorf("aggregations %s, want none", codec.AppendJSON(nil, res.Aggregations))
			case tc.aggs != "":
				got := string(codec.AppendCanonicalJSON(nil, res.Aggregations))
				want := string(codec.AppendCanonicalJSON(nil, parse(t, tc.aggs)))
				if got != want {
					t.Errorf("aggregations\n got %s\nwant %s", got, want)
				}
			}
			if tc.keys != nil && len(res.Docs) > 0 {
				got := res.Docs[0].Keys()
				slices.Sort(got)
				if diff := cmp.Diff(got, tc.keys); diff != "" {
					t.Errorf("fields of the first hit (-got +want):\n%s", diff)
				}
			}
		})
	}
}

func isString(v any) bool {
	_, ok := v.(string)
	return ok
}

func testLookup(t *testing.T, s *suite) {
	for _, tc := range lookupCases() {
		s.run(t, groupLookup, tc.name, func(t *testing.T) {
			docs, err := s.store.Lookup(t.Context(), tc.l)
			if err != nil {
				t.Fatalf("Lookup(%+v): %v", tc.l, err)
			}
			got := ids(docs)
			if tc.unordered {
				slices.Sort(got)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("Lookup(%s.%s) ids (-got +want):\n%s", tc.l.Collection, tc.l.Field, diff)
			}
		})
	}
}

type getCase struct {
	name, resource, id string
	wantID             string
	wantObjectID       bool   // the _id is an ObjectID, not a string
	field, value       string // a field to check
}

func getCases() []getCase {
	return []getCase{
		{"ObjectID by hex", "desks", d1, d1, true, "name", "Arts"},
		{"ObjectID by upper-case hex", "desks", "66A000000000000000000001", d1, true, "name", "Arts"},
		{"24-hex string id", "desks", d2, d2, false, "name", "PROD"},
		{"string id", "desks", d4, d4, false, "name", "politics"},
		{"item by URN", "items", a1, a1, false, "headline", "Bridge opens to traffic"},
		{"item by tag URI", "items", a2, a2, false, "headline", "Mayor resigns after scandal"},
		{"planning by URN", "planning", p1, p1, false, "name", "Bridge opening coverage"},
		{"event by URN", "events", e2, e2, false, "name", "City council meeting"},
		{"contact by 24-hex string id", "contacts", c2, c2, false, "last_name", "Novak"},
		{"contact by ObjectID", "contacts", c1, c1, true, "last_name", "Favre"},
		{"user by 24-hex string id", "users", u3, u3, false, "username", "bsmith"},
		{"assignment by ObjectID", "assignments", as1, as1, true, "type", "assignment"},
		{"assignment by 24-hex string id", "assignments", as2, as2, false, "type", "assignment"},
		{"events_history by string id", "events_history", h3, h3, false, "operation", "create"},
		{"events_files by ObjectID", "events_files", f1, f1, true, "", ""},
	}
}

type notFoundCase struct{ resource, id string }

func (c notFoundCase) name() string { return "not found " + c.resource + "/" + c.id }

func notFoundCases() []notFoundCase {
	return []notFoundCase{
		{"desks", "66a0000000000000000000ff"},
		{"desks", "Arts"},
		{"items", "urn:newsml:localhost:5000:nope"},
		{"users", "nobody"},
		{"contacts", "66f000000000000000000009"},
		{"planning", a1}, // an item id in another collection
	}
}

func findCases() []findCase {
	byName := asc("name")
	return append([]findCase{
		{name: "desks by name", resource: "desks", sort: byName, want: []string{d1, d2, d3, d4}, total: 4},
		{name: "page 2", resource: "desks", sort: byName, page: 2, max: 2, want: []string{d3, d4}, total: 4},
		{name: "past the end", resource: "desks", sort: byName, page: 3, max: 2, want: []string{}, total: 4},
		{name: "equality (upstream test)", resource: "desks", where: `{"name": "PROD"}`, sort: byName, want: []string{d2}, total: 1},
		{name: "hex matches an ObjectID _id", resource: "desks", where: `{"_id": "` + d1 + `"}`, sort: byName, want: []string{d1}, total: 1},
		{name: "hex matches a string _id", resource: "desks", where: `{"_id": "` + d2 + `"}`, sort: byName, want: []string{d2}, total: 1},
		{name: "$in mixed ids", resource: "desks", where: `{"_id": {"$in": ["` + d1 + `", "` + d2 + `", "desk-politics", "66a0000000000000000000ff"]}}`,
			sort: byName, want: []string{d1, d2, d4}, total: 3},
		{name: "dotted path through an array", resource: "desks", where: `{"members.user": "` + u2 + `"}`, sort: byName, want: []string{d1, d2}, total: 2},
		{name: "$elemMatch", resource: "desks", where: `{"members": {"$elemMatch": {"user": "` + u1 + `"}}}`, sort: byName, want: []string{d1}, total: 1},
		{name: "$size", resource: "desks", where: `{"members": {"$size": 0}}`, sort: byName, want: []string{d3}, total: 1},
		{name: "$exists false", resource: "desks", where: `{"members": {"$exists": false}}`, sort: byName, want: []string{d4}, total: 1},
		{name: "$ne", resource: "desks", where: `{"desk_type": {"$ne": "authoring"}}`, sort: byName, want: []string{d2, d3}, total: 2},
		{name: "$nin", resource: "desks", where: `{"content_expiry": {"$nin": [10]}}`, sort: byName, want: []string{d2, d3}, total: 2},
		{name: "$gt $lte", resource: "desks", where: `{"content_expiry": {"$gt": 5, "$lte": 10}}`, sort: byName, want: []string{d1, d4}, total: 2},
		{name: "date string matches a string", resource: "desks", where: `{"_updated": "2024-01-04T10:00:00+0000"}`, sort: byName, want: []string{d4}, total: 1},
		{name: "date string matches a date", resource: "desks", where: `{"_updated": "2024-01-03T10:00:00+0000"}`, sort: byName, want: []string{d1}, total: 1},
		{name: "$gte a date string compares dates", resource: "desks", where: `{"_updated": {"$gte": "2024-01-03T10:00:00+0000"}}`, sort: byName, want: []string{d1, d3}, total: 2},
		{name: "$or", resource: "desks", where: `{"$or": [{"name": "Arts"}, {"content_expiry": 20}]}`, sort: byName, want: []string{d1, d3}, total: 2},
		{name: "$and", resource: "desks", where: `{"$and": [{"desk_type": "authoring"}, {"content_expiry": 10}]}`, sort: byName, want: []string{d1, d4}, total: 2},
		{name: "$nor", resource: "desks", where: `{"$nor": [{"desk_type": "authoring"}]}`, sort: byName, want: []string{d2, d3}, total: 2},
		{name: "$not", resource: "desks", where: `{"content_expiry": {"$not": {"$gte": 10}}}`, sort: byName, want: []string{d2}, total: 1},
		{name: "$type string", resource: "desks", where: `{"_id": {"$type": "string"}}`, sort: byName, want: []string{d2, d4}, total: 2},
		{name: "$type date", resource: "desks", where: `{"_updated": {"$type": "date"}}`, sort: byName, want: []string{d1, d2, d3}, total: 3},
		{name: "$all", resource: "desks", where: `{"tags": {"$all": ["gov", "elections"]}}`, sort: byName, want: []string{d4}, total: 1},
		{name: "$mod", resource: "desks", where: `{"content_expiry": {"$mod": [10, 0]}}`, sort: byName, want: []string{d1, d3, d4}, total: 3},
		{name: "$bitsAllSet", resource: "desks", where: `{"content_expiry": {"$bitsAllSet": [1, 3]}}`, sort: byName, want: []string{d1, d4}, total: 2},
		{name: "$geoWithin $box", resource: "desks", where: `{"geo": {"$geoWithin": {"$box": [[14, 50], [15, 51]]}}}`, sort: byName, want: []string{d1}, total: 1},
		{name: "$geoWithin $centerSphere", resource: "desks", where: `{"geo": {"$geoWithin": {"$centerSphere": [[0, 51.5], 0.01]}}}`, sort: byName, want: []string{d3}, total: 1},
		{name: "$eq", resource: "desks", where: `{"content_expiry": {"$eq": 10}}`, sort: byName, want: []string{d1, d4}, total: 2},
		{name: "$eq hex matches an ObjectID _id", resource: "desks", where: `{"_id": {"$eq": "` + d1 + `"}}`, sort: byName, want: []string{d1}, total: 1},
		{name: "$in", resource: "desks", where: `{"content_expiry": {"$in": [5, 20]}}`, sort: byName, want: []string{d2, d3}, total: 2},
		{name: "$lt", resource: "desks", where: `{"content_expiry": {"$lt": 10}}`, sort: byName, want: []string{d2}, total: 1},
		{name: "$type number code", resource: "desks", where: `{"_id": {"$type": 7}}`, sort: byName, want: []string{d1, d3}, total: 2},
		{name: "$elemMatch on values", resource: "desks", where: `{"tags": {"$elemMatch": {"$eq": "gov"}}}`, sort: byName, want: []string{d4}, total: 1},
		{name: "$bitsAllSet mask", resource: "desks", where: `{"content_expiry": {"$bitsAllSet": 5}}`, sort: byName, want: []string{d2}, total: 1},
		{name: "$bitsAllClear", resource: "desks", where: `{"content_expiry": {"$bitsAllClear": [1]}}`, sort: byName, want: []string{d2, d3}, total: 2},
		{name: "$bitsAnyClear", resource: "desks", where: `{"content_expiry": {"$bitsAnyClear": [0, 2]}}`, sort: byName, want: []string{d1, d3, d4}, total: 3},
		{name: "$bitsAnySet mask", resource: "desks", where: `{"content_expiry": {"$bitsAnySet": 16}}`, sort: byName, want: []string{d3}, total: 1},
		{name: "$geoWithin $center", resource: "desks", where: `{"geo": {"$geoWithin": {"$center": [[14, 50], 1]}}}`, sort: byName, want: []string{d1}, total: 1},
		{name: "$geoWithin $polygon", resource: "desks", where: `{"geo": {"$geoWithin": {"$polygon": [[-1, 51], [1, 51], [1, 52], [-1, 52]]}}}`, sort: byName, want: []string{d3}, total: 1},
		{name: "$geoWithin $geometry", resource: "desks",
			where: `{"loc": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": [[[-1, 51], [1, 51], [1, 52], [-1, 52], [-1, 51]]]}}}}`,
			sort:  byName, want: []string{d3}, total: 1},
		{name: "$geoIntersects", resource: "desks",
			where: `{"loc": {"$geoIntersects": {"$geometry": {"type": "Polygon", "coordinates": [[[0, 45], [15, 45], [15, 51], [0, 51], [0, 45]]]}}}}`,
			sort:  byName, want: []string{d1, d2}, total: 2},
		{name: "$near $maxDistance", resource: "desks", where: `{"geo": {"$near": [14, 50], "$maxDistance": 1}}`, sort: byName, want: []string{d1}, total: 1},
		{name: "$near $minDistance", resource: "desks", where: `{"geo": {"$near": [14, 50], "$minDistance": 1}}`, sort: byName, want: []string{d3}, total: 1},
		{name: "$nearSphere $maxDistance", resource: "desks", where: `{"geo": {"$nearSphere": [0, 51.5], "$maxDistance": 0.01}}`, sort: byName, want: []string{d3}, total: 1},
		{name: "$near $geometry", resource: "desks",
			where: `{"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": [-0.1, 51.5]}, "$maxDistance": 5000}}}`,
			sort:  byName, want: []string{d3}, total: 1},
		{name: "$nearSphere $geometry $minDistance", resource: "desks",
			where: `{"loc": {"$nearSphere": {"$geometry": {"type": "Point", "coordinates": [14.4, 50.1]}, "$minDistance": 10000, "$maxDistance": 2000000}}}`,
			sort:  byName, want: []string{d2, d3}, total: 2},
		{name: "two sort keys", resource: "desks", sort: []sources.SortKey{{Field: "desk_type"}, desc("name")}, want: []string{d4, d1, d3, d2}, total: 4},
		{name: "sort across types: dates above strings", resource: "desks", sort: []sources.SortKey{desc("_updated")}, want: []string{d3, d1, d2, d4}, total: 4},
		{name: "sort missing first ascending", resource: "desks", sort: asc("monitoring_default_view", "name"), want: []string{d1, d2, d4, d3}, total: 4},
		{name: "users by username", resource: "users", sort: asc("username"), want: []string{u1, u3, u2}, total: 3},
		{name: "users bool", resource: "users", where: `{"is_active": true}`, sort: asc("username"), want: []string{u1, u2}, total: 2},
		{name: "hex in an array of ObjectIDs", resource: "users", where: `{"invisible_stages": "66d000000000000000000001"}`, sort: asc("username"), want: []string{u3}, total: 1},
		{name: "hex matches an ObjectID field", resource: "users", where: `{"role": "66c000000000000000000001"}`, sort: asc("username"), want: []string{u1}, total: 1},
		{name: "events_history by _updated", resource: "events_history", sort: []sources.SortKey{desc("_updated")}, want: []string{h3, h2, h1}, total: 3},
		{name: "events_history of an event", resource: "events_history", where: `{"event_id": "` + e1 + `"}`, sort: []sources.SortKey{desc("_updated")}, want: []string{h2, h1}, total: 2},
		{name: "sub-document field", resource: "events_history", where: `{"update.state": "draft"}`, sort: asc("_updated"), want: []string{h1, h3}, total: 2},
		{name: "$in hex, ObjectID and string fields", resource: "events_history", where: `{"user_id": {"$in": ["` + u1 + `", "` + u3 + `"]}}`, sort: asc("_updated"), want: []string{h1, h3}, total: 2},
		{name: "events_files by media", resource: "events_files", where: `{"filemeta.media_id": "675000000000000000000001"}`, sort: asc("_updated"), want: []string{f1}, total: 1},
		{name: "events_files $lt", resource: "events_files", where: `{"filemeta.length": {"$lt": 1000}}`, sort: asc("_updated"), want: []string{f2}, total: 1},
	}, dateFormCases()...)
}

// dateFormCases hold RFC 3339 date-times in a where to the original's
// date format: each case of the +0000 form is repeated with the same
// instants spelt with Z, an offset and fractional seconds, and must find
// the same documents. The desks' _updated are dates (d2 2024-01-02, d1
// 01-03, d3 01-05, each at 10:00 UTC) except d4's, the string
// "2024-01-04T10:00:00+0000", which only its own spelling matches.
func dateFormCases() []findCase {
	byName := asc("name")
	var out []findCase
	for _, c := range []struct {
		name  string
		where string // with %s for the date, "%s" where it is a string
		forms []string
		want  []string
	}{
		{"equality", `{"_updated": %q}`, []string{"2024-01-03T10:00:00+0000", "2024-01-03T10:00:00Z",
			"2024-01-03T11:00:00+01:00", "2024-01-03T05:00:00-05:00", "2024-01-03T10:00:00.000Z"}, []string{d1}},
		{"$gte", `{"_updated": {"$gte": %q}}`, []string{"2024-01-03T10:00:00+0000", "2024-01-03T10:00:00Z",
			"2024-01-03T12:00:00+02:00", "2024-01-03T10:00:00.000+00:00"}, []string{d1, d3}},
		{"$lt", `{"_updated": {"$lt": %q}}`, []string{"2024-01-03T10:30:00+0000", "2024-01-03T10:30:00Z",
			"2024-01-03T09:30:00-01:00", "2024-01-03T10:30:00.000Z"}, []string{d1, d2}},
		{"$gt between milliseconds", `{"_updated": {"$gt": %q}}`, []string{"2024-01-03T09:59:59+0000",
			"2024-01-03T09:59:59.999Z", "2024-01-03T10:59:59.5+01:00"}, []string{d1, d3}},
		{"$in", `{"_updated": {"$in": [%q, "2024-01-05T10:00:00Z"]}}`, []string{"2024-01-02T10:00:00+0000",
			"2024-01-02T10:00:00Z", "2024-01-02T11:00:00+01:00"}, []string{d2, d3}},
		{"$nin", `{"_updated": {"$nin": [%q]}}`, []string{"2024-01-03T10:00:00+0000", "2024-01-03T10:00:00Z",
			"2024-01-03T10:00:00.000-00:00"}, []string{d2, d3, d4}},
	} {
		for _, form := range c.forms {
			out = append(out, findCase{name: "date forms/" + c.name + " " + form, resource: "desks",
				where: fmt.Sprintf(c.where, form), sort: byName, want: c.want, total: len(c.want)})
		}
	}
	return append(out,
		// A date stored as a string matches its own spelling only.
		findCase{name: "date forms/a string date matches its own spelling", resource: "desks",
			where: `{"_updated": "2024-01-04T10:00:00+0000"}`, sort: byName, want: []string{d4}, total: 1},
		findCase{name: "date forms/a string date is not an RFC 3339 date", resource: "desks",
			where: `{"_updated": "2024-01-04T10:00:00Z"}`, sort: byName, want: []string{}, total: 0},
		// A date alone stays a string: it compares with d4's string only.
		findCase{name: "date forms/a date alone is a string", resource: "desks",
			where: `{"_updated": {"$gte": "2024-01-03"}}`, sort: byName, want: []string{d4}, total: 1},
	)
}

func searchCases() []searchCase {
	all := []string{a6, a5, a4, a3, a2, a1}
	return []searchCase{
		{name: "default list", resource: "items",
			body: `{"query": {"bool": {}}, "sort": [{"_updated": {"order": "desc"}}], "size": 25, "track_total_hits": 10000}`,
			want: all, total: 6},
		{name: "size and from", resource: "items",
			body: `{"query": {"bool": {}}, "sort": [{"_updated": {"order": "desc"}}], "size": 2, "from": 2, "track_total_hits": 10000}`,
			want: []string{a4, a3}, total: 6},
		{name: "term on a keyword field", resource: "items",
			body: `{"query": {"bool": {"filter": [{"term": {"state": {"value": "published"}}}]}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a1, a3, a5, a6}, total: 4},
		{name: "terms on ObjectID desks (upstream test)", resource: "items",
			body: `{"query": {"bool": {"must": [{"bool": {"filter": [{"terms": {"task.desk": ["` + d1 + `"]}}]}}]}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a1, a3}, total: 2},
		{name: "terms on string desks", resource: "items",
			body: `{"query": {"terms": {"task.desk": ["` + d2 + `", "desk-politics"]}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a2, a5}, total: 2},
		{name: "match", resource: "items",
			body: `{"query": {"match": {"headline": {"query": "Bridge"}}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a1}, total: 1},
		{name: "match and", resource: "items",
			body: `{"query": {"match": {"headline": {"query": "scandal mayor", "operator": "and"}}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a2}, total: 1},
		{name: "match in HTML", resource: "items",
			body: `{"query": {"match": {"body_html": {"query": "crossing"}}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a1}, total: 1},
		{name: "match_phrase", resource: "items",
			body: `{"query": {"match_phrase": {"headline": {"query": "opens to traffic"}}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a1}, total: 1},
		{name: "multi_match", resource: "items",
			body: `{"query": {"multi_match": {"query": "budget", "fields": ["headline", "slugline"]}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a4}, total: 1},
		{name: "query_string field group", resource: "items",
			body: `{"query": {"bool": {"must": [{"query_string": {"query": "headline:(bridge OR election)", "default_operator": "OR", "lenient": true}}]}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a1, a5}, total: 2},
		{name: "query_string all fields", resource: "items",
			body: `{"query": {"bool": {"must": [{"query_string": {"query": "roundup AND NOT headline:opens", "lenient": true}}]}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a6}, total: 1},
		{name: "wildcard", resource: "items",
			body: `{"query": {"wildcard": {"headline": {"value": "elect*"}}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a5}, total: 1},
		{name: "match_phrase_prefix", resource: "items",
			body: `{"query": {"match_phrase_prefix": {"headline": {"query": "opens to tra"}}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a1}, total: 1},
		{name: "match_none", resource: "items",
			body: `{"query": {"match_none": {}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{}, total: 0},
		{name: "simple_query_string", resource: "items",
			body: `{"query": {"simple_query_string": {"query": "mayor | \"weekly roundup\"", "fields": ["headline"]}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a2, a6}, total: 2},
		{name: "constant_score", resource: "items",
			body: `{"query": {"constant_score": {"filter": {"term": {"type": {"value": "text"}}}, "boost": 2}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a1, a2, a4, a5}, total: 4},
		{name: "dis_max", resource: "items",
			body: `{"query": {"dis_max": {"queries": [{"term": {"type": {"value": "picture"}}}, {"term": {"state": {"value": "spiked"}}}]}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a3, a4}, total: 2},
		{name: "prefix", resource: "items",
			body: `{"query": {"prefix": {"slugline": {"value": "bud"}}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a4}, total: 1},
		{name: "range on dates", resource: "items",
			body: `{"query": {"range": {"_updated": {"gte": "2024-01-03T00:00:00Z", "lt": "2024-01-05T00:00:00Z"}}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a3, a4}, total: 2},
		{name: "range on numbers, two sort keys", resource: "items",
			body: `{"query": {"range": {"urgency": {"gte": 3}}}, "sort": [{"urgency": {"order": "desc"}}, {"_updated": {"order": "desc"}}], "size": 25}`,
			want: []string{a5, a6, a1}, total: 3},
		{name: "must_not exists", resource: "items",
			body: `{"query": {"bool": {"must_not": [{"exists": {"field": "urgency"}}]}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a3}, total: 1},
		{name: "filter and must_not", resource: "items",
			body: `{"query": {"bool": {"filter": [{"term": {"state": {"value": "published"}}}], "must_not": [{"term": {"type": {"value": "picture"}}}]}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a1, a5, a6}, total: 3},
		{name: "should with minimum_should_match", resource: "items",
			body: `{"query": {"bool": {"should": [{"term": {"keywords": {"value": "bridge"}}}, {"term": {"keywords": {"value": "traffic"}}}, {"term": {"keywords": {"value": "vote"}}}], "minimum_should_match": 2}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a1}, total: 1},
		{name: "should alone needs one", resource: "items",
			body: `{"query": {"bool": {"should": [{"term": {"keywords": {"value": "vote"}}}, {"term": {"keywords": {"value": "roundup"}}}]}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a5, a6}, total: 2},
		{name: "ids", resource: "items",
			body: `{"query": {"ids": {"values": ["` + a4 + `", "` + a2 + `", "nope"]}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a2, a4}, total: 2},
		{name: "sort missing last", resource: "items",
			body: `{"query": {"match_all": {}}, "sort": [{"urgency": {"order": "asc"}}, {"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a2, a4, a1, a6, a5, a3}, total: 6},
		{name: "sort missing first", resource: "items",
			body: `{"query": {"match_all": {}}, "sort": [{"urgency": {"order": "asc", "missing": "_first"}}, {"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a3, a2, a4, a1, a6, a5}, total: 6},
		{name: "sort descending, missing last", resource: "items",
			body: `{"query": {"match_all": {}}, "sort": [{"urgency": {"order": "desc"}}, {"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a5, a1, a6, a4, a2, a3}, total: 6},
		{name: "post_filter does not filter aggregations", resource: "items",
			body: `{"query": {"bool": {"filter": [{"term": {"state": {"value": "published"}}}]}}, "post_filter": {"term": {"type": {"value": "text"}}},
					"aggs": {"type": {"terms": {"field": "type"}}}, "sort": [{"_updated": {"order": "asc"}}], "size": 25}`,
			want: []string{a1, a5}, total: 2,
			aggs: `{"type": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [
					{"key": "text", "doc_count": 2}, {"key": "composite", "doc_count": 1}, {"key": "picture", "doc_count": 1}]}}`},
		{name: "terms aggregation size, no hits", resource: "items",
			body: `{"query": {"bool": {}}, "aggs": {"state": {"terms": {"field": "state", "size": 2}}}, "size": 0, "track_total_hits": 10000}`,
			want: []string{}, total: 6,
			aggs: `{"state": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 1, "buckets": [
					{"key": "published", "doc_count": 4}, {"key": "in_progress", "doc_count": 1}]}}`},
		{name: "sub-aggregation", resource: "items",
			body: `{"query": {"bool": {}}, "aggs": {"type": {"terms": {"field": "type", "order": {"_key": "asc"}}, "aggs": {"language": {"terms": {"field": "language"}}}}}, "size": 0}`,
			want: []string{}, total: 6,
			aggs: `{"type": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [
					{"key": "composite", "doc_count": 1, "language": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [{"key": "en", "doc_count": 1}]}},
					{"key": "picture", "doc_count": 1, "language": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [{"key": "cs", "doc_count": 1}]}},
					{"key": "text", "doc_count": 4, "language": {"doc_count_error_upper_bound": 0, "sum_other_doc_count": 0, "buckets": [{"key": "en", "doc_count": 4}]}}]}}`},
		{name: "_source includes", resource: "items",
			body: `{"query": {"ids": {"values": ["` + a1 + `"]}}, "_source": {"includes": ["headline", "urgency"]}, "size": 25}`,
			want: []string{a1}, total: 1, keys: []string{"_id", "headline", "urgency"}},
		{name: "contacts by last_name.keyword", resource: "contacts",
			body: `{"query": {"bool": {}}, "sort": [{"last_name.keyword": {"order": "asc"}}], "size": 25}`,
			want: []string{c3, c1, c2, c4, c5}, total: 5},
		{name: "contacts descending, missing last", resource: "contacts",
			body: `{"query": {"bool": {}}, "sort": [{"last_name.keyword": {"order": "desc"}}], "size": 25}`,
			want: []string{c4, c2, c1, c3, c5}, total: 5},
		{name: "terms on an analysed field (upstream test)", resource: "contacts",
			body: `{"query": {"bool": {"must": [{"bool": {"filter": [{"terms": {"first_name": ["brett"]}}]}}]}}, "sort": [{"last_name.keyword": {"order": "asc"}}], "size": 25}`,
			want: []string{c1}, total: 1},
		{name: "term on a bool (upstream test)", resource: "contacts",
			body: `{"query": {"bool": {"must": [{"bool": {"filter": [{"bool": {"must": [{"term": {"is_active": {"value": false}}}]}}]}}]}}, "sort": [{"last_name.keyword": {"order": "asc"}}], "size": 25}`,
			want: []string{c2}, total: 1},
		{name: "match organisation", resource: "contacts",
			body: `{"query": {"match": {"organisation": {"query": "ACME"}}}, "sort": [{"last_name.keyword": {"order": "asc"}}], "size": 25}`,
			want: []string{c3, c4}, total: 2},
		{name: "events by dates.start, dates and date strings", resource: "events",
			body: `{"query": {"bool": {}}, "sort": [{"dates.start": {"order": "asc"}}], "size": 25}`,
			want: []string{e2, e1, e4, e3}, total: 4},
		{name: "range with date-only bounds", resource: "events",
			body: `{"query": {"range": {"dates.start": {"gte": "2024-02-01", "lte": "2024-02-28"}}}, "sort": [{"dates.start": {"order": "asc"}}], "size": 25}`,
			want: []string{e1, e4}, total: 2},
		{name: "range with a format", resource: "events",
			body: `{"query": {"range": {"dates.start": {"lt": "01/02/2024", "format": "dd/MM/yyyy"}}}, "sort": [{"dates.start": {"order": "asc"}}], "size": 25}`,
			want: []string{e2}, total: 1},
		{name: "events term state", resource: "events",
			body: `{"query": {"term": {"state": {"value": "scheduled"}}}, "sort": [{"dates.start": {"order": "asc"}}], "size": 25}`,
			want: []string{e1, e3}, total: 2},
		{name: "events match name", resource: "events",
			body: `{"query": {"match": {"name": {"query": "council"}}}, "sort": [{"dates.start": {"order": "asc"}}], "size": 25}`,
			want: []string{e2}, total: 1},
		{name: "planning by event", resource: "planning",
			body: `{"query": {"terms": {"event_item": ["` + e1 + `", "` + e3 + `"]}}, "sort": [{"planning_date": {"order": "asc"}}], "size": 25}`,
			want: []string{p1, p3}, total: 2},
		{name: "nested coverages", resource: "planning",
			body: `{"query": {"nested": {"path": "coverages", "query": {"bool": {"must": [
					{"term": {"coverages.planning.g2_content_type": {"value": "picture"}}},
					{"term": {"coverages.news_coverage_status.qcode": {"value": "ncostat:int"}}}]}}}}, "sort": [{"planning_date": {"order": "asc"}}], "size": 25}`,
			want: []string{p2}, total: 1},
		{name: "planning by date", resource: "planning",
			body: `{"query": {"bool": {}}, "sort": [{"planning_date": {"order": "desc"}}], "size": 25}`,
			want: []string{p3, p1, p2}, total: 3},
		{name: "assignments default", resource: "assignments",
			body: `{"query": {"bool": {}}, "sort": [{"_updated": {"order": "desc"}}], "size": 25}`,
			want: []string{as4, as3, as2, as1}, total: 4},
		{name: "assignments by state", resource: "assignments",
			body: `{"query": {"term": {"assigned_to.state": {"value": "assigned"}}}, "sort": [{"priority": {"order": "asc"}}], "size": 25}`,
			want: []string{as2, as4}, total: 2},
		{name: "assignments of a planning item", resource: "assignments",
			body: `{"query": {"terms": {"planning_item": ["` + p1 + `"]}}, "sort": [{"priority": {"order": "desc"}}], "size": 25}`,
			want: []string{as2, as1}, total: 2},
		{name: "assignments by scheduled", resource: "assignments",
			body: `{"query": {"range": {"planning.scheduled": {"gte": "2024-02-01T00:00:00Z", "lt": "2024-02-02T00:00:00Z"}}}, "sort": [{"planning.scheduled": {"order": "asc"}}], "size": 25}`,
			want: []string{as2, as1}, total: 2},
	}
}

type lookupCase struct {
	name      string
	l         sources.Lookup
	want      []string
	unordered bool
}

func lookupCases() []lookupCase {
	return []lookupCase{
		{"ids: ObjectID, hex of an ObjectID, hex of a string id", sources.Lookup{Collection: "assignments", Field: "_id",
			Values: []any{oid(as1), as2, as3, "nope"}, Sort: asc("priority")}, []string{as3, as1, as2}, false},
		{"an ObjectID value finds a 24-hex string id", sources.Lookup{Collection: "assignments", Field: "_id",
			Values: []any{oid(as2)}}, []string{as2}, false},
		{"ObjectID and string fields", sources.Lookup{Collection: "archive", Field: "assignment_id",
			Values: []any{as1, as3}, Sort: asc("versioncreated")}, []string{a1, a5}, false},
		{"dotted field through an array", sources.Lookup{Collection: "planning", Field: "coverages.assigned_to.assignment_id",
			Values: []any{as2, oid(as4)}, Sort: asc("planning_date")}, []string{p1, p3}, false},
		{"sort and limit", sources.Lookup{Collection: "content_types", Field: "_id",
			Values: []any{oid(ct1), ct2, ct3}, Sort: []sources.SortKey{desc("priority")}, Limit: 2}, []string{ct2, ct1}, false},
		{"no sort", sources.Lookup{Collection: "events_files", Field: "_id",
			Values: []any{f1, oid(f2)}}, []string{f1, f2}, true},
		{"events_history of events", sources.Lookup{Collection: "events_history", Field: "event_id",
			Values: []any{e1}, Sort: []sources.SortKey{desc("_updated")}}, []string{h2, h1}, false},
		{"nothing", sources.Lookup{Collection: "assignments", Field: "_id", Values: []any{"66e0000000000000000000ff"}}, []string{}, false},
		{"no values", sources.Lookup{Collection: "assignments", Field: "_id", Values: []any{}}, []string{}, false},
		{"search: planning items", sources.Lookup{Collection: "assignments", Field: "planning_item", Search: true,
			Values: []any{p1, p2}, Sort: []sources.SortKey{desc("_updated")}}, []string{as3, as2, as1}, false},
		{"search: ObjectID and hex values", sources.Lookup{Collection: "archive", Field: "assignment_id", Search: true,
			Values: []any{oid(as1), as3}, Sort: asc("versioncreated")}, []string{a1, a5}, false},
		{"search: limit", sources.Lookup{Collection: "assignments", Field: "coverage_item", Search: true,
			Values: []any{cov1, cov5}, Sort: asc("priority"), Limit: 1}, []string{as1}, false},
		{"search: ids", sources.Lookup{Collection: "assignments", Field: "_id", Search: true,
			Values: []any{oid(as4), as2}, Sort: asc("priority")}, []string{as2, as4}, false},
		{"search: nothing", sources.Lookup{Collection: "archive", Field: "assignment_id", Search: true,
			Values: []any{"66e0000000000000000000ff"}}, []string{}, false},
	}
}

// A coverage lists, for every MongoDB operator, Elasticsearch query type
// and aggregation type the cases use, the names of those cases.
type coverage struct {
	ops, queries, aggs map[string][]string
}

// cover walks every document-list where and every search body of the
// suite. It reads the JSON of the cases only, never a store.
func cover() (coverage, error) {
	c := coverage{ops: map[string][]string{}, queries: map[string][]string{}, aggs: map[string][]string{}}
	decode := func(s string) (*sources.Doc, error) {
		v, err := codec.DecodeJSON([]byte(s), codec.DecodeOptions{Strict: true})
		if err != nil {
			return nil, err
		}
		d, ok := v.(*sources.Doc)
		if !ok {
			return nil, fmt.Errorf("%s is not an object", s)
		}
		return d, nil
	}
	for _, tc := range findCases() {
		if tc.where == "" {
			continue
		}
		w, err := decode(tc.where)
		if err != nil {
			return c, fmt.Errorf("%s: %w", tc.name, err)
		}
		name := groupFindDocuments + "/" + tc.name
		walkKeys(w, func(k string) {
			if strings.HasPrefix(k, "$") {
				c.ops[k] = append(c.ops[k], name)
			}
		})
	}
	for _, tc := range searchCases() {
		body, err := decode(tc.body)
		if err != nil {
			return c, fmt.Errorf("%s: %w", tc.name, err)
		}
		name := groupFindSearch + "/" + tc.name
		add := func(k string) { c.queries[k] = append(c.queries[k], name) }
		for _, key := range []string{"query", "post_filter"} {
			if q, ok := body.Get(key); ok {
				queryTypes(q, add)
			}
		}
		aggTypes(body, func(k string) { c.aggs[k] = append(c.aggs[k], name) })
	}
	return c, nil
}

// walkKeys calls f with every key of v, at any depth.
func walkKeys(v any, f func(string)) {
	switch v := v.(type) {
	case *sources.Doc:
		for _, fl := range v.Fields() {
			f(fl.Key)
			walkKeys(fl.Value, f)
		}
	case []any:
		for _, e := range v {
			walkKeys(e, f)
		}
	}
}

// queryTypes calls f with the type of every query in q (a query, or an
// array of them), following the places compound queries hold queries.
func queryTypes(q any, f func(string)) {
	switch q := q.(type) {
	case []any:
		for _, e := range q {
			queryTypes(e, f)
		}
	case *sources.Doc:
		for _, fl := range q.Fields() {
			f(fl.Key)
			body, _ := fl.Value.(*sources.Doc)
			var inner []string
			switch fl.Key {
			case "bool":
				inner = []string{"must", "filter", "should", "must_not"}
			case "nested":
				inner = []string{"query"}
			case "constant_score":
				inner = []string{"filter"}
			case "dis_max":
				inner = []string{"queries"}
			case "filtered":
				inner = []string{"filter", "query"}
			case "not":
				if body != nil && body.Has("filter") {
					inner = []string{"filter"}
				} else {
					queryTypes(fl.Value, f)
				}
			case "and", "or", "query":
				queryTypes(fl.Value, f)
			}
			for _, k := range inner {
				if v, ok := body.Get(k); ok {
					queryTypes(v, f)
				}
			}
		}
	}
}

// aggTypes calls f with the type of every aggregation under d's aggs.
func aggTypes(d *sources.Doc, f func(string)) {
	for _, key := range []string{"aggs", "aggregations"} {
		aggs, ok := d.Doc(key)
		if !ok {
			continue
		}
		for _, a := range aggs.Fields() {
			ad, ok := a.Value.(*sources.Doc)
			if !ok {
				continue
			}
			for _, k := range ad.Keys() {
				if k != "aggs" && k != "aggregations" && k != "meta" {
					f(k)
				}
			}
			aggTypes(ad, f)
		}
	}
}
