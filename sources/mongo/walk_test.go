package mongo_test

import (
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
)

// mixedDesks are desks whose k and j hold every kind of sort key a walk
// meets: missing, null, empty arrays, arrays across types and with
// null, numbers tied across int and double, strings, documents,
// ObjectIds, booleans and dates; ids of both types.
func mixedDesks(t *testing.T) []*sources.Doc {
	when := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	vals := []any{
		nil, "missing", []any{}, []any{nil, int64(5)}, int64(5), 5.0, int64(7), []any{int64(3), int64(9)},
		"a", []any{"b", int64(2)}, sources.D("x", int64(1)), mustOID(t, deskOID), true, when,
		[]any{when, int64(1)}, []any{"z"}, []any{}, "missing", int64(5), "a",
	}
	var docs []*sources.Doc
	for i, v := range vals {
		var id any = fmt.Sprintf("d%02d", i)
		if i%3 == 0 {
			oid := mustOID(t, userOneID)
			oid[11] = byte(i)
			id = oid
		}
		d := sources.D("_id", id, "j", int64(i%4))
		if v != "missing" {
			d.Set("k", v)
		}
		docs = append(docs, d)
	}
	return docs
}

// TestWalkPagesAreIndexRanges: each page of a cursor walk sends one
// find, with a limit one more than the page and no skip, sorted by the
// keys then _id, and filtered (after the first page) by branches that an
// index on the keys then _id bounds: equalities on a prefix of the keys,
// then one range on the next ($gt, $lt, $type, $in or $eq), with what no
// index needs in a $nor. Only the first page counts; the pages after it
// give its total again, from the cursor. The walk returns the list's
// order, every document once.
func TestWalkPagesAreIndexRanges(t *testing.T) {
	e := newEnv(t, map[string][]*sources.Doc{"desks": mixedDesks(t)}, mongosrc.Options{})
	for _, tc := range []struct {
		name string
		sort []sources.SortKey
	}{
		{"ascending", []sources.SortKey{{Field: "k"}}},
		{"descending", []sources.SortKey{{Field: "k", Desc: true}}},
		{"two keys", []sources.SortKey{{Field: "j", Desc: true}, {Field: "k"}}},
		{"by _id descending", []sources.SortKey{{Field: "_id", Desc: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			whole, err := e.store.Find(t.Context(), &sources.Query{Resource: res("desks"), Page: 1, MaxResults: 100, Sort: tc.sort})
			if err != nil {
				t.Fatal(err)
			}
			keys := walkKeys(tc.sort)
			for _, size := range []int{1, 3} {
				q := &sources.Query{Resource: res("desks"), Page: 1, MaxResults: size, Sort: tc.sort, Cursor: &sources.Cursor{}}
				var got []*sources.Doc
				for page := 1; ; page++ {
					e.srv.Reset()
					r, err := e.store.Find(t.Context(), q)
					if err != nil {
						t.Fatalf("page %d: %v", page, err)
					}
					got = append(got, r.Docs...)
					checkWalkFind(t, e.srv, keys, size, page > 1)
					checkWalkCount(t, e.srv, page, r.Next != nil)
					if r.Total != len(whole.Docs) {
						t.Errorf("page %d: total %d, want %d", page, r.Total, len(whole.Docs))
					}
					if r.Next == nil {
						break
					}
					if page > len(whole.Docs) {
						t.Fatalf("%d pages and no end", page)
					}
					q.Cursor = &sources.Cursor{After: r.Next}
				}
				if diff := cmp.Diff(idStrings(got), idStrings(whole.Docs)); diff != "" {
					t.Errorf("walked by %d (-got +want):\n%s", size, diff)
				}
			}
		})
	}
}

// walkKeys are the sort's keys then _id, unless the sort names it.
func walkKeys(sort []sources.SortKey) []string {
	var keys []string
	for _, k := range sort {
		keys = append(keys, k.Field)
	}
	if !slices.Contains(keys, "_id") {
		keys = append(keys, "_id")
	}
	return keys
}

// checkWalkFind checks the one find a walk's page sent.
func checkWalkFind(t *testing.T, srv *mongotest.Server, keys []string, size int, positioned bool) {
	t.Helper()
	finds := srv.Named("find")
	if len(finds) != 1 {
		t.Fatalf("%d finds for a page, want 1", len(finds))
	}
	find := finds[0]
	if got := field(find, "skip"); got != "<absent>" {
		t.Errorf("find skip = %s, want none", got)
	}
	if got, want := field(find, "limit"), fmt.Sprintf(`{"$numberLong":"%d"}`, size+1); got != want {
		t.Errorf("find limit = %s, want %s", got, want)
	}
	if sort, _ := find.Body.Doc("sort"); !slices.Equal(sort.Keys(), keys) {
		t.Errorf("find sort = %v, want %v", sort.Keys(), keys)
	}
	filter, _ := find.Body.Doc("filter")
	if !positioned {
		if filter.Len() != 0 {
			t.Errorf("first page filter = %s, want none", codec.AppendJSON(nil, filter))
		}
		return
	}
	branches := []any{filter}
	if or, ok := filter.Get("$or"); ok && filter.Len() == 1 {
		branches = or.([]any)
	}
	for _, b := range branches {
		if err := indexBounded(b.(*sources.Doc), keys); err != nil {
			t.Errorf("branch %s: %v", codec.AppendJSON(nil, b), err)
		}
	}
}

// checkWalkCount checks that only a walk's first page counts, and only
// when the list goes on past it.
func checkWalkCount(t *testing.T, srv *mongotest.Server, page int, next bool) {
	t.Helper()
	want := 0
	if page == 1 && next {
		want = 1
	}
	if counts := srv.Named("aggregate", "count"); len(counts) != want {
		t.Errorf("page %d: %d counts, want %d", page, len(counts), want)
	}
}

// indexBounded tells whether an index on keys bounds b: its fields
// but $nor are a prefix of keys, each {$eq: v} but the last, which is a
// range (one operator of $gt, $lt, $type, $in or $eq).
func indexBounded(b *sources.Doc, keys []string) error {
	var fields []string
	for k := range b.All() {
		if k != "$nor" {
			fields = append(fields, k)
		}
	}
	if len(fields) == 0 || len(fields) > len(keys) || !slices.Equal(fields, keys[:len(fields)]) {
		return fmt.Errorf("fields %v are no prefix of the index keys %v", fields, keys)
	}
	for i, f := range fields {
		op, _ := b.Doc(f)
		if op == nil || op.Len() != 1 {
			return fmt.Errorf("%s: %v is not one operator", f, op)
		}
		name := op.Keys()[0]
		if i < len(fields)-1 && name != "$eq" {
			return fmt.Errorf("%s: %s before the last key, want $eq", f, name)
		}
		if !slices.Contains([]string{"$gt", "$lt", "$type", "$in", "$eq"}, name) {
			return fmt.Errorf("%s: %s bounds no index", f, name)
		}
	}
	return nil
}

func idStrings(docs []*sources.Doc) []string {
	var out []string
	for _, d := range docs {
		id, _ := d.Get("_id")
		s, _ := sources.IDString(id)
		out = append(out, s)
	}
	return out
}

// TestWalkFilter pins the ranges of a page after a position, in the
// sort most lists have (a date descending, then _id), and what each
// rules out in its $nor.
func TestWalkFilter(t *testing.T) {
	e := newEnv(t, userSeed(t), mongosrc.Options{})
	when := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	q := listQuery(t, "users", "", []sources.SortKey{{Field: "_updated", Desc: true}}, 1, 2)
	q.Cursor = &sources.Cursor{After: &sources.Position{Values: []any{when, "u1"}}}
	if _, err := e.store.Find(t.Context(), q); err != nil {
		t.Fatal(err)
	}
	const (
		date     = `{"$date":{"$numberLong":"1714979289000"}}`
		above    = `[{"_updated":{"$gt":` + date + `}},{"_updated":{"$type":["timestamp","regex"]}}]`
		atAbove  = `[{"_updated":{"$gt":` + date + `}},{"_updated":{"$type":["timestamp","regex"]}},{"_updated":{"$eq":` + date + `}}]`
		idsAfter = `["object","binData","objectId","bool","date","timestamp","regex"]`
	)
	want := []string{
		`{"_updated":{"$lt":` + date + `},"$nor":` + atAbove + `}`,
		`{"_updated":{"$type":["number","string","object","binData","objectId","bool"]},"$nor":` + atAbove + `}`,
		`{"_updated":{"$in":[null,[]]},"$nor":` + atAbove + `}`,
		`{"_updated":{"$eq":` + date + `},"_id":{"$gt":"u1"},"$nor":` + above + `}`,
		`{"_updated":{"$eq":` + date + `},"_id":{"$type":` + idsAfter + `},"$nor":` + above + `}`,
	}
	find := lastCommand(t, e.srv, "find")
	var got []string
	for i := range want {
		got = append(got, field(find, "filter", "$or", strconv.Itoa(i)))
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("the $or's branches (-got +want):\n%s", diff)
	}
	if got := field(find, "filter", "$or", strconv.Itoa(len(want))); got != "<absent>" {
		t.Errorf("a branch more: %s", got)
	}
}
