package bsonorder_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/bsonorder"
	"github.com/prodapi/prodapi/sources/codec"
)

const oidA = `{"$oid": "5d76113ab3af37dea3a2eb91"}`

// jdoc decodes Extended JSON into a document, for test tables.
func jdoc(t testing.TB, s string) *sources.Doc {
	t.Helper()
	v, err := codec.DecodeJSON([]byte(s), codec.DecodeOptions{Extended: true})
	if err != nil {
		t.Fatal(err)
	}
	d, ok := v.(*sources.Doc)
	if !ok {
		t.Fatalf("%s is no document", s)
	}
	return d
}

func TestSortDocs(t *testing.T) {
	docs := []*sources.Doc{
		jdoc(t, `{"_id": "date", "a": {"$date": "2019-09-10T15:00:00Z"}}`),
		jdoc(t, `{"_id": "bool", "a": true}`),
		jdoc(t, `{"_id": "oid", "a": `+oidA+`}`),
		jdoc(t, `{"_id": "array", "a": [[1]]}`),
		jdoc(t, `{"_id": "doc", "a": {"b": 1}}`),
		jdoc(t, `{"_id": "string", "a": "x"}`),
		jdoc(t, `{"_id": "upper", "a": "X"}`),
		jdoc(t, `{"_id": "float", "a": 1.5}`),
		jdoc(t, `{"_id": "int", "a": 2}`),
		jdoc(t, `{"_id": "null", "a": null}`),
		jdoc(t, `{"_id": "missing"}`),
		jdoc(t, `{"_id": "empty", "a": []}`),
		jdoc(t, `{"_id": "minmax", "a": [3, 0.5]}`),
	}
	ids := func(docs []*sources.Doc) []string {
		var out []string
		for _, d := range docs {
			s, _ := d.String("_id")
			out = append(out, s)
		}
		return out
	}
	bsonorder.SortDocs(docs, []sources.SortKey{{Field: "a"}})
	want := []string{"empty", "missing", "null", "minmax", "float", "int", "upper", "string", "doc", "array", "oid", "bool", "date"}
	if diff := cmp.Diff(ids(docs), want); diff != "" {
		t.Errorf("ascending (-got +want):\n%s", diff)
	}
	bsonorder.SortDocs(docs, []sources.SortKey{{Field: "a", Desc: true}})
	// Descending, an array sorts by its largest element: minmax (3) after int (2).
	want = []string{"date", "bool", "oid", "array", "doc", "string", "upper", "minmax", "int", "float", "missing", "null", "empty"}
	if diff := cmp.Diff(ids(docs), want); diff != "" {
		t.Errorf("descending (-got +want):\n%s", diff)
	}
}

func TestSortDocsTiebreak(t *testing.T) {
	docs := []*sources.Doc{
		jdoc(t, `{"_id": "c", "n": 1, "m": {"k": 2}}`),
		jdoc(t, `{"_id": "a", "n": 1, "m": {"k": 1}}`),
		jdoc(t, `{"_id": "b", "n": 0, "m": {"k": 1}}`),
		jdoc(t, `{"_id": `+oidA+`, "n": 1}`),
	}
	bsonorder.SortDocs(docs, []sources.SortKey{{Field: "n", Desc: true}})
	var got []string
	for _, d := range docs {
		id, _ := d.Get("_id")
		s, _ := sources.IDString(id)
		got = append(got, s)
	}
	// Strings before ObjectIDs in BSON order.
	want := []string{"a", "c", "5d76113ab3af37dea3a2eb91", "b"}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
	bsonorder.SortDocs(docs, []sources.SortKey{{Field: "m.k"}, {Field: "_id", Desc: true}})
	got = got[:0]
	for _, d := range docs {
		id, _ := d.Get("_id")
		s, _ := sources.IDString(id)
		got = append(got, s)
	}
	want = []string{"5d76113ab3af37dea3a2eb91", "b", "a", "c"}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("dotted key, _id descending (-got +want):\n%s", diff)
	}
}

func TestCompareNumbers(t *testing.T) {
	for _, tc := range []struct {
		a, b any
		want int
	}{
		{int64(1), 1.0, 0},
		{int64(1), 1.5, -1},
		{2.5, int64(2), 1},
		{int64(9007199254740993), 9007199254740992.0, 1},
		{-0x1p63, int64(-1 << 63), 0},
		{1e300, int64(1 << 62), 1},
		{int64(3), int64(3), 0},
	} {
		if got := bsonorder.Compare(tc.a, tc.b); got != tc.want {
			t.Errorf("Compare(%v, %v) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
	}
}
