package bsondoc

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/prodapi/prodapi/sources"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// docCmp compares documents field by field, in order.
var docCmp = cmp.Transformer("fields", func(d *sources.Doc) []sources.Field { return d.Fields() })

func TestToDocTypes(t *testing.T) {
	oid := bson.ObjectID{0x5d, 0x55, 0x3c, 0x33, 0x30, 0x31, 0xe2, 0x85, 0x5a, 0x2e, 0x56, 0x62}
	when := time.Date(2024, 1, 15, 12, 1, 12, 345e6, time.UTC)
	dec, _ := bson.ParseDecimal128("1.50")
	raw, err := bson.Marshal(bson.D{
		{Key: "_id", Value: oid},
		{Key: "z_double", Value: 1.5},
		{Key: "a_string", Value: "héllo"},
		{Key: "sub", Value: bson.D{{Key: "b", Value: int32(2)}, {Key: "a", Value: int64(1) << 40}}},
		{Key: "arr", Value: bson.A{"x", int32(1), bson.D{{Key: "k", Value: true}}, bson.A{}}},
		{Key: "bool", Value: false},
		{Key: "date", Value: bson.NewDateTimeFromTime(when)},
		{Key: "null", Value: nil},
		{Key: "undef", Value: bson.Undefined{}},
		{Key: "i32", Value: int32(-7)},
		{Key: "i64", Value: int64(math.MaxInt64)},
		{Key: "dec", Value: dec},
		{Key: "ts", Value: bson.Timestamp{T: 1700000000, I: 3}},
		{Key: "uuid", Value: bson.Binary{Subtype: 4, Data: []byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0}}},
		{Key: "bin", Value: bson.Binary{Subtype: 0, Data: []byte("hi!")}},
		{Key: "re", Value: bson.Regex{Pattern: "^a.*", Options: "i"}},
		{Key: "js", Value: bson.JavaScript("x=1")},
		{Key: "cws", Value: bson.CodeWithScope{Code: "y=2", Scope: bson.D{{Key: "y", Value: 1}}}},
		{Key: "sym", Value: bson.Symbol("s")},
		{Key: "ptr", Value: bson.DBPointer{DB: "c", Pointer: oid}},
		{Key: "min", Value: bson.MinKey{}},
		{Key: "max", Value: bson.MaxKey{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := ToDoc(raw)
	if err != nil {
		t.Fatal(err)
	}
	want := sources.D(
		"_id", sources.ObjectID(oid),
		"z_double", 1.5,
		"a_string", "héllo",
		"sub", sources.D("b", int64(2), "a", int64(1)<<40),
		"arr", []any{"x", int64(1), sources.D("k", true), []any{}},
		"bool", false,
		"date", when,
		"null", nil,
		"undef", nil,
		"i32", int64(-7),
		"i64", int64(math.MaxInt64),
		"dec", "1.50",
		"ts", time.Unix(1700000000, 0).UTC(),
		"uuid", "12345678-9abc-def0-1234-56789abcdef0",
		"bin", "aGkh",
		"re", "/^a.*/i",
		"js", "x=1",
		"cws", "y=2",
		"sym", "s",
		"ptr", sources.ObjectID(oid),
		"min", nil,
		"max", nil,
	)
	if diff := cmp.Diff(got, want, docCmp); diff != "" {
		t.Errorf("ToDoc mismatch (-got +want):\n%s", diff)
	}
	if got, want := got.Keys(), want.Keys(); !cmp.Equal(got, want) {
		t.Errorf("keys = %v, want order %v", got, want)
	}
}

func TestRoundTrip(t *testing.T) {
	when := time.Date(2019, 8, 15, 12, 23, 4, 0, time.UTC)
	id, _ := sources.ParseObjectID("5d553c333031e2855a2e5662")
	for _, tc := range []struct {
		name string
		doc  *sources.Doc
	}{
		{"empty", sources.NewDoc()},
		{"scalars", sources.D("n", nil, "b", true, "i", int64(3), "big", int64(1)<<40, "f", 2.5, "s", "x", "t", when, "o", id)},
		{"nested", sources.D("a", sources.D("b", []any{sources.D("c", []any{int64(1), "two"})}))},
		{"order", sources.D("z", int64(1), "a", int64(2), "m", int64(3))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw, err := FromDoc(tc.doc)
			if err != nil {
				t.Fatal(err)
			}
			if err := bsoncore.Document(raw).Validate(); err != nil {
				t.Fatalf("FromDoc produced invalid BSON: %v", err)
			}
			got, err := ToDoc(raw)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, tc.doc, docCmp); diff != "" {
				t.Errorf("round trip mismatch (-got +want):\n%s", diff)
			}
		})
	}
}

func TestFromDocIntWidth(t *testing.T) {
	raw, err := FromDoc(sources.D("small", int64(5), "big", int64(math.MaxInt32)+1, "int", 7))
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]bsoncore.Type{"small": bsoncore.TypeInt32, "big": bsoncore.TypeInt64, "int": bsoncore.TypeInt32} {
		if got := bsoncore.Document(raw).Lookup(key).Type; got != want {
			t.Errorf("%s: type %v, want %v", key, got, want)
		}
	}
}

func TestFromDocErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  *sources.Doc
	}{
		{"unsupported type", sources.D("c", make(chan int))},
		{"NUL in key", sources.D("a\x00b", int64(1))},
		{"NUL in nested key", sources.D("a", sources.D("\x00", int64(1)))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := FromDoc(tc.doc); err == nil {
				t.Error("FromDoc succeeded, want an error")
			}
		})
	}
}

func TestToDocMalformed(t *testing.T) {
	good, _ := FromDoc(sources.D("a", sources.D("b", "c")))
	deep := sources.D("x", int64(0))
	for range MaxDepth + 1 {
		deep = sources.D("x", deep)
	}
	deepRaw, _ := FromDoc(deep)
	for _, tc := range []struct {
		name string
		raw  []byte
	}{
		{"empty", nil},
		{"short", []byte{5, 0, 0}},
		{"truncated", good[:len(good)-3]},
		{"bad length", append([]byte{200, 0, 0, 0}, good[4:]...)},
		{"no terminator", append(append([]byte(nil), good[:len(good)-1]...), 1)},
		{"unknown type", []byte{8, 0, 0, 0, 0x42, 'a', 0, 0}},
		{"too deep", deepRaw},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ToDoc(tc.raw); !errors.Is(err, ErrMalformed) {
				t.Errorf("ToDoc error = %v, want ErrMalformed", err)
			}
		})
	}
}

func BenchmarkToDoc(b *testing.B) {
	d := sources.D("_id", "urn:x", "headline", "Something happened", "body_html", string(make([]byte, 4096)),
		"subject", []any{sources.D("qcode", "01000000", "name", "arts"), sources.D("qcode", "02000000", "name", "crime")},
		"versioncreated", time.Now().UTC(), "priority", int64(5))
	raw, _ := FromDoc(d)
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		if _, err := ToDoc(raw); err != nil {
			b.Fatal(err)
		}
	}
}
