package mongo

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	"github.com/prodapi/prodapi/sources/grammar"
	"github.com/prodapi/prodapi/sources/mongo/internal/bsondoc"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// where decodes a where as server/query does.
func where(t testing.TB, s string) *sources.Doc {
	t.Helper()
	v, err := codec.DecodeJSON([]byte(s), codec.DecodeOptions{Strict: true, MaxDepth: 32})
	if err != nil {
		t.Fatalf("decoding %s: %v", s, err)
	}
	return v.(*sources.Doc)
}

// extJSON renders a document as canonical Extended JSON, which shows
// BSON types ($oid, $date, $numberInt), so comparisons see them.
func extJSON(t testing.TB, d *sources.Doc) string {
	t.Helper()
	raw, err := bsondoc.FromDoc(d)
	if err != nil {
		t.Fatalf("encoding: %v", err)
	}
	return bson.Raw(raw).String()
}

// wantJSON reads relaxed Extended JSON ({"$oid": ...}, {"$date": ...})
// and renders it like extJSON.
func wantJSON(t testing.TB, s string) string {
	t.Helper()
	var d bson.D
	if err := bson.UnmarshalExtJSON([]byte(s), false, &d); err != nil {
		t.Fatalf("bad want %s: %v", s, err)
	}
	raw, err := bson.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	return bson.Raw(raw).String()
}

const (
	hexID  = "5d553c333031e2855a2e5662"
	oid    = `{"$oid": "5d553c333031e2855a2e5662"}`
	hexID2 = "5d553c333031e2855a2e5663"
	oid2   = `{"$oid": "5d553c333031e2855a2e5663"}`
	day    = "2024-01-15T12:00:00+0000"
	date   = `{"$date": "2024-01-15T12:00:00Z"}`
)

func TestTranslateWhere(t *testing.T) {
	for _, tc := range []struct {
		name, where, want string
	}{
		{"empty", `{}`, `{}`},
		{"plain equality", `{"name": "Sports", "n": 3, "f": 1.5, "b": true, "z": null}`,
			`{"name": "Sports", "n": 3, "f": 1.5, "b": true, "z": null}`},
		{"hexID equality matches both", `{"desk": "` + hexID + `"}`,
			`{"desk": {"$in": [` + oid + `, "` + hexID + `"]}}`},
		{"upper-case hexID keeps its string", `{"desk": "5D553C333031E2855A2E5662"}`,
			`{"desk": {"$in": [` + oid + `, "5D553C333031E2855A2E5662"]}}`},
		{"date equality matches both", `{"_updated": "` + day + `"}`,
			`{"_updated": {"$in": [` + date + `, "` + day + `"]}}`},
		{"RFC 3339 date string", `{"d": "2024-01-15T12:00:00Z"}`,
			`{"d": {"$in": [{"$date":{"$numberLong":"1705320000000"}}, "2024-01-15T12:00:00Z"]}}`},
		{"RFC 3339 with an offset and fractions", `{"d": {"$gte": "2024-01-15T13:00:00.250+01:00"}}`,
			`{"d": {"$gte": {"$date":{"$numberLong":"1705320000250"}}}}`},
		{"a date alone stays a string", `{"d": "2024-01-15"}`, `{"d": "2024-01-15"}`},
		{"dotted path", `{"task.desk": "` + hexID + `"}`,
			`{"task.desk": {"$in": [` + oid + `, "` + hexID + `"]}}`},
		{"sub-document with hexID", `{"task": {"desk": "` + hexID + `", "stage": "x"}}`,
			`{"task": {"$in": [{"desk": ` + oid + `, "stage": "x"}, {"desk": "` + hexID + `", "stage": "x"}]}}`},
		{"array equality", `{"tags": ["a", "` + hexID + `"]}`,
			`{"tags": {"$in": [["a", ` + oid + `], ["a", "` + hexID + `"]]}}`},
		{"empty sub-document", `{"meta": {}}`, `{"meta": {}}`},
		{"$eq hexID", `{"a": {"$eq": "` + hexID + `"}}`, `{"a": {"$in": [` + oid + `, "` + hexID + `"]}}`},
		{"$eq plain", `{"a": {"$eq": "x"}}`, `{"a": {"$eq": "x"}}`},
		{"$ne hexID", `{"a": {"$ne": "` + hexID + `"}}`, `{"a": {"$nin": [` + oid + `, "` + hexID + `"]}}`},
		{"$ne plain", `{"a": {"$ne": 4}}`, `{"a": {"$ne": 4}}`},
		{"$in expands", `{"a": {"$in": ["x", "` + hexID + `", "` + day + `", 2]}}`,
			`{"a": {"$in": ["x", ` + oid + `, "` + hexID + `", ` + date + `, "` + day + `", 2]}}`},
		{"$nin expands", `{"a": {"$nin": ["` + hexID + `"]}}`, `{"a": {"$nin": [` + oid + `, "` + hexID + `"]}}`},
		{"$in empty", `{"a": {"$in": []}}`, `{"a": {"$in": []}}`},
		{"$all plain", `{"a": {"$all": ["x", "y"]}}`, `{"a": {"$all": ["x", "y"]}}`},
		{"$all with hexID", `{"a": {"$all": ["x", "` + hexID + `", "` + hexID2 + `"]}}`,
			`{"a": {"$all": ["x"], "$in": [` + oid + `, "` + hexID + `"]}, "$and": [{"a": {"$in": [` + oid2 + `, "` + hexID2 + `"]}}]}`},
		{"$all only hexID", `{"a": {"$all": ["` + hexID + `"]}}`, `{"a": {"$in": [` + oid + `, "` + hexID + `"]}}`},
		{"$all empty", `{"a": {"$all": []}}`, `{"a": {"$all": []}}`},
		{"$all with $elemMatch", `{"a": {"$all": [{"$elemMatch": {"k": "` + hexID + `"}}]}}`,
			`{"a": {"$all": [{"$elemMatch": {"k": {"$in": [` + oid + `, "` + hexID + `"]}}}]}}`},
		{"ranges convert", `{"_updated": {"$gte": "` + day + `", "$lt": "x"}, "_id": {"$gt": "` + hexID + `"}, "n": {"$lte": 5}}`,
			`{"_updated": {"$gte": ` + date + `, "$lt": "x"}, "_id": {"$gt": ` + oid + `}, "n": {"$lte": 5}}`},
		{"misc operators", `{"a": {"$exists": true}, "b": {"$exists": 0}, "c": {"$type": "string"}, "d": {"$type": [2, "date"]},
			"e": {"$size": 2}, "f": {"$mod": [4, 0]}, "g": {"$bitsAllSet": [1, 5]}, "h": {"$bitsAnyClear": 35}}`,
			`{"a": {"$exists": true}, "b": {"$exists": 0}, "c": {"$type": "string"}, "d": {"$type": [2, "date"]},
			"e": {"$size": 2}, "f": {"$mod": [4, 0]}, "g": {"$bitsAllSet": [1, 5]}, "h": {"$bitsAnyClear": 35}}`},
		{"$not", `{"a": {"$not": {"$gt": 5}}}`, `{"a": {"$not": {"$gt": 5}}}`},
		{"$not hexID", `{"a": {"$not": {"$eq": "` + hexID + `"}}}`, `{"a": {"$not": {"$in": [` + oid + `, "` + hexID + `"]}}}`},
		{"$not needing two documents becomes $nor", `{"a": {"$not": {"$eq": "` + hexID + `", "$in": ["x"]}}}`,
			`{"$and": [{"$nor": [{"$and": [{"a": {"$in": [` + oid + `, "` + hexID + `"]}}, {"a": {"$in": ["x"]}}]}]}]}`},
		{"$eq and $in split", `{"a": {"$in": ["x", "y"], "$eq": "` + hexID + `"}}`,
			`{"a": {"$in": ["x", "y"]}, "$and": [{"a": {"$in": [` + oid + `, "` + hexID + `"]}}]}`},
		{"$ne merges into $nin", `{"a": {"$nin": ["x"], "$ne": "` + hexID + `"}}`,
			`{"a": {"$nin": ["x", ` + oid + `, "` + hexID + `"]}}`},
		{"split joins an existing $and", `{"$and": [{"b": 1}], "a": {"$in": ["x"], "$eq": "` + hexID + `"}}`,
			`{"$and": [{"b": 1}, {"a": {"$in": [` + oid + `, "` + hexID + `"]}}], "a": {"$in": ["x"]}}`},
		{"$elemMatch operator form", `{"a": {"$elemMatch": {"$gte": 1, "$lt": 5}}}`, `{"a": {"$elemMatch": {"$gte": 1, "$lt": 5}}}`},
		{"$elemMatch filter form", `{"a": {"$elemMatch": {"desk": "` + hexID + `", "n": {"$gt": 1}}}}`,
			`{"a": {"$elemMatch": {"desk": {"$in": [` + oid + `, "` + hexID + `"]}, "n": {"$gt": 1}}}}`},
		{"$elemMatch with $or is a filter", `{"a": {"$elemMatch": {"$or": [{"k": 1}]}}}`, `{"a": {"$elemMatch": {"$or": [{"k": 1}]}}}`},
		{"$elemMatch conflict falls back to Eve", `{"a": {"$elemMatch": {"$in": ["x"], "$eq": "` + hexID + `"}}}`,
			`{"a": {"$elemMatch": {"$in": ["x"], "$eq": ` + oid + `}}}`},
		{"logical", `{"$or": [{"a": "` + hexID + `"}, {"$nor": [{"b": 1}]}], "$and": [{"c": {"$gt": 2}}]}`,
			`{"$or": [{"a": {"$in": [` + oid + `, "` + hexID + `"]}}, {"$nor": [{"b": 1}]}], "$and": [{"c": {"$gt": 2}}]}`},
		{"$geoWithin", `{"loc": {"$geoWithin": {"$box": [[0, 0], [10, 10]]}}, "l2": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 0]]]}}}}`,
			`{"loc": {"$geoWithin": {"$box": [[0, 0], [10, 10]]}}, "l2": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 0]]]}}}}`},
		{"$geoIntersects", `{"loc": {"$geoIntersects": {"$geometry": {"type": "Point", "coordinates": [1, 2]}}}}`,
			`{"loc": {"$geoIntersects": {"$geometry": {"type": "Point", "coordinates": [1, 2]}}}}`},
		{"$near legacy", `{"loc": {"$near": [1, 2], "$maxDistance": 5}}`, `{"loc": {"$near": [1, 2], "$maxDistance": 5}}`},
		{"$nearSphere geometry", `{"loc": {"$nearSphere": {"$geometry": {"type": "Point", "coordinates": [1, 2]}, "$minDistance": 10}}}`,
			`{"loc": {"$nearSphere": {"$geometry": {"type": "Point", "coordinates": [1, 2]}, "$minDistance": 10}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := translateWhere(where(t, tc.where))
			if err != nil {
				t.Fatalf("translateWhere: %v", err)
			}
			if diff := cmp.Diff(extJSON(t, got), wantJSON(t, tc.want)); diff != "" {
				t.Errorf("translateWhere(%s) mismatch (-got +want):\n%s", tc.where, diff)
			}
		})
	}
}

func TestTranslateWhereNil(t *testing.T) {
	got, err := translateWhere(nil)
	if err != nil || got.Len() != 0 {
		t.Errorf("translateWhere(nil) = %v, %v; want {}, nil", got, err)
	}
}

func TestTranslateWhereRefuses(t *testing.T) {
	for _, tc := range []struct{ name, where string }{
		{"$where", `{"$where": "sleep(1000)"}`},
		{"$expr", `{"$expr": {"$eq": ["$a", "$b"]}}`},
		{"$text", `{"$text": {"$search": "x"}}`},
		{"$comment", `{"$comment": "x"}`},
		{"$regex", `{"a": {"$regex": "^x"}}`},
		{"$options", `{"a": {"$options": "i"}}`},
		{"$function in $elemMatch", `{"a": {"$elemMatch": {"$function": {}}}}`},
		{"$where in $elemMatch filter", `{"a": {"$elemMatch": {"k": 1, "$where": "x"}}}`},
		{"unknown operator", `{"a": {"$foo": 1}}`},
		{"operators mixed with fields", `{"a": {"$gt": 1, "b": 2}}`},
		{"operator in a value", `{"a": {"b": {"$gt": 1}}}`},
		{"operator in $in", `{"a": {"$in": [{"$gt": 1}]}}`},
		{"operator in range value", `{"a": {"$gt": {"$where": 1}}}`},
		{"$in not an array", `{"a": {"$in": "x"}}`},
		{"$all not an array", `{"a": {"$all": 1}}`},
		{"$and empty", `{"$and": []}`},
		{"$or not documents", `{"$or": [1]}`},
		{"$nor not an array", `{"$nor": {"a": 1}}`},
		{"empty path segment", `{"a..b": 1}`},
		{"trailing dot", `{"a.": 1}`},
		{"empty path", `{"": 1}`},
		{"NUL in path", `{"a\u0000b": 1}`},
		{"long path", `{"` + strings.Repeat("a", 257) + `": 1}`},
		{"$exists string", `{"a": {"$exists": "yes"}}`},
		{"$type document", `{"a": {"$type": {"x": 1}}}`},
		{"$type empty array", `{"a": {"$type": []}}`},
		{"$size string", `{"a": {"$size": "2"}}`},
		{"$mod one element", `{"a": {"$mod": [2]}}`},
		{"$bits string", `{"a": {"$bitsAllSet": "x"}}`},
		{"$not scalar", `{"a": {"$not": 5}}`},
		{"$not filter", `{"a": {"$not": {"b": 1}}}`},
		{"$elemMatch scalar", `{"a": {"$elemMatch": 1}}`},
		{"$geoWithin two shapes", `{"a": {"$geoWithin": {"$box": [], "$center": []}}}`},
		{"$geoWithin unknown shape", `{"a": {"$geoWithin": {"$where": "x"}}}`},
		{"$geoIntersects $box", `{"a": {"$geoIntersects": {"$box": []}}}`},
		{"$geometry with operator", `{"a": {"$geoWithin": {"$geometry": {"type": {"$where": 1}}}}}`},
		{"$near scalar", `{"a": {"$near": 5}}`},
		{"$near unknown key", `{"a": {"$near": {"$geometry": {}, "$where": 1}}}`},
		{"$near without geometry", `{"a": {"$near": {"$maxDistance": 1}}}`},
		{"$maxDistance string", `{"a": {"$near": [1, 2], "$maxDistance": "far"}}`},
		{"$center outside $geoWithin", `{"a": {"$center": [[0, 0], 1]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := translateWhere(where(t, tc.where))
			if !errors.Is(err, sources.ErrInvalid) {
				t.Errorf("translateWhere(%s) = %v, %v; want ErrInvalid", tc.where, got, err)
			}
			if err != nil && strings.Contains(err.Error(), "sleep") {
				t.Errorf("error %q quotes a client value", err)
			}
		})
	}
}

func TestTranslateWhereDepth(t *testing.T) {
	w := where(t, `{"a": 1}`)
	for range maxDepth + 1 {
		w = sources.D("$and", []any{w})
	}
	if _, err := translateWhere(w); !errors.Is(err, sources.ErrInvalid) {
		t.Errorf("translateWhere(deep) error = %v, want ErrInvalid", err)
	}
}

// TestTranslateWhereKeepsInput checks that translation copies: the
// query's where is shared with the cache key and the links.
func TestTranslateWhereKeepsInput(t *testing.T) {
	const src = `{"a": {"$in": ["` + hexID + `"]}, "b": {"c": "` + day + `"}, "d": {"$all": ["` + hexID + `"]}}`
	w := where(t, src)
	before := extJSON(t, w)
	if _, err := translateWhere(w); err != nil {
		t.Fatal(err)
	}
	if after := extJSON(t, w); after != before {
		t.Errorf("where changed:\n%s\nwas\n%s", after, before)
	}
}

func TestCountFilter(t *testing.T) {
	for _, tc := range []struct{ name, filter, want string }{
		{"no $near", `{"a": {"$gt": 1}, "$or": [{"b": 1}]}`, `{"a": {"$gt": 1}, "$or": [{"b": 1}]}`},
		{"legacy $near", `{"loc": {"$near": [1, 2], "$maxDistance": 5}, "x": 1}`,
			`{"loc": {"$geoWithin": {"$center": [[1, 2], 5]}}, "x": 1}`},
		{"legacy $nearSphere", `{"loc": {"$nearSphere": [1, 2], "$maxDistance": 0.5}}`,
			`{"loc": {"$geoWithin": {"$centerSphere": [[1, 2], 0.5]}}}`},
		{"GeoJSON meters", `{"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": [1, 2]}, "$maxDistance": 6378100}}}`,
			`{"loc": {"$geoWithin": {"$centerSphere": [[1, 2], 1.0]}}}`},
		{"min distance", `{"loc": {"$near": [1, 2], "$minDistance": 1, "$maxDistance": 3}}`,
			`{"loc": {"$geoWithin": {"$center": [[1, 2], 3]}, "$not": {"$geoWithin": {"$center": [[1, 2], 1]}}}}`},
		{"no distance", `{"loc": {"$near": [1, 2]}}`, `{"loc": {"$exists": true}}`},
		{"keeps other operators, splits conflicts", `{"loc": {"$exists": true, "$near": [1, 2]}}`,
			`{"loc": {"$exists": true}, "$and": [{"loc": {"$exists": true}}]}`},
		{"inside top-level $and", `{"$and": [{"loc": {"$nearSphere": [0, 0], "$maxDistance": 1}}]}`,
			`{"$and": [{"loc": {"$geoWithin": {"$centerSphere": [[0, 0], 1]}}}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := translateWhere(where(t, tc.filter))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(extJSON(t, countFilter(f)), wantJSON(t, tc.want)); diff != "" {
				t.Errorf("countFilter(%s) mismatch (-got +want):\n%s", tc.filter, diff)
			}
		})
	}
}

// isAllowedOut reports whether a translated filter may hold op.
func isAllowedOut(op string) bool {
	_, ok := grammar.MongoOp(op)
	return ok
}

// Every operator of grammar's table translates (the validator accepts
// each, so one missing here would be a 400 the API promised not to give),
// and reaches the filter sent to MongoDB.
func TestTranslateWhereCoversGrammar(t *testing.T) {
	for _, op := range grammar.MongoOps() {
		t.Run(op.Name, func(t *testing.T) {
			got, err := translateWhere(where(t, op.Example))
			if err != nil {
				t.Fatalf("translateWhere(%s): %v", op.Example, err)
			}
			raw, err := bsondoc.FromDoc(got)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(operators(raw), op.Name) {
				t.Errorf("translateWhere(%s) = %s, without %s", op.Example, extJSON(t, got), op.Name)
			}
		})
	}
}

// operators returns every $-key in a BSON document, at any depth.
func operators(raw bsoncore.Document) []string {
	var ops []string
	elems, _ := raw.Elements()
	for _, e := range elems {
		if strings.HasPrefix(e.Key(), "$") {
			ops = append(ops, e.Key())
		}
		v := e.Value()
		switch v.Type {
		case bsoncore.TypeEmbeddedDocument, bsoncore.TypeArray:
			ops = append(ops, operators(v.Data)...)
		}
	}
	return ops
}

// FuzzTranslateWhere checks, for any where the translator accepts, that
// the filter it produces encodes and holds only allow-listed operators,
// and that translation never panics. Seeds: testdata/fuzz/FuzzTranslateWhere.
func FuzzTranslateWhere(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		v, err := codec.DecodeJSON([]byte(s), codec.DecodeOptions{Strict: true, MaxDepth: 32})
		if err != nil {
			return
		}
		w, ok := v.(*sources.Doc)
		if !ok {
			return
		}
		got, err := translateWhere(w)
		if err != nil {
			if !errors.Is(err, sources.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		for _, filter := range []*sources.Doc{got, countFilter(got)} {
			raw, err := bsondoc.FromDoc(filter)
			if err != nil {
				t.Fatalf("translated filter does not encode: %v", err)
			}
			for _, op := range operators(raw) {
				if !isAllowedOut(op) {
					t.Fatalf("filter for %s holds %q", s, op)
				}
			}
		}
	})
}

func BenchmarkTranslateWhere(b *testing.B) {
	w := where(b, `{"$or": [{"task.desk": "`+hexID+`"}, {"_updated": {"$gte": "`+day+`"}}], "state": {"$in": ["published", "corrected"]}}`)
	for b.Loop() {
		if _, err := translateWhere(w); err != nil {
			b.Fatal(err)
		}
	}
}
