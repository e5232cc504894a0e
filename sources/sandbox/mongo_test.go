package sandbox

import (
	"errors"
	"testing"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	"github.com/prodapi/prodapi/sources/grammar"
)

// jdoc decodes Extended JSON into a document, for test tables.
func jdoc(t testing.TB, s string) *sources.Doc {
	t.Helper()
	v, err := codec.DecodeJSON([]byte(s), codec.DecodeOptions{Extended: true})
	if err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	d, ok := v.(*sources.Doc)
	if !ok {
		t.Fatalf("%s is not an object", s)
	}
	return d
}

const (
	oidA = `{"$oid": "5d76113ab3af37dea3a2eb91"}`
	oidB = `{"$oid": "5d76113ab3af37dea3a2eb92"}`
)

func TestMatch(t *testing.T) {
	for _, tc := range []struct {
		name, doc, filter string
		want              bool
	}{
		// Equality.
		{"empty filter", `{"a": 1}`, `{}`, true},
		{"int equals int", `{"a": 1}`, `{"a": 1}`, true},
		{"float equals int", `{"a": 1.0}`, `{"a": 1}`, true},
		{"string case-sensitive", `{"a": "x"}`, `{"a": "X"}`, false},
		{"number is not a string", `{"a": "1"}`, `{"a": 1}`, false},
		{"array element", `{"a": [1, 2]}`, `{"a": 2}`, true},
		{"whole array", `{"a": [1, 2]}`, `{"a": [1, 2]}`, true},
		{"array order matters", `{"a": [1, 2]}`, `{"a": [2, 1]}`, false},
		{"nested array element", `{"a": [[1, 2], 3]}`, `{"a": [1, 2]}`, true},
		{"sub-document", `{"a": {"b": 1, "c": 2}}`, `{"a": {"b": 1, "c": 2}}`, true},
		{"sub-document field order", `{"a": {"c": 2, "b": 1}}`, `{"a": {"b": 1, "c": 2}}`, false},
		{"sub-document extra field", `{"a": {"b": 1, "c": 2}}`, `{"a": {"b": 1}}`, false},
		{"bool", `{"a": true}`, `{"a": true}`, true},
		{"two clauses", `{"a": 1, "b": 2}`, `{"a": 1, "b": 3}`, false},

		// Paths.
		{"dotted", `{"a": {"b": 1}}`, `{"a.b": 1}`, true},
		{"through array", `{"a": [{"b": 1}, {"b": 2}]}`, `{"a.b": 2}`, true},
		{"through array to array", `{"a": [{"b": [1, 3]}]}`, `{"a.b": 3}`, true},
		{"array index", `{"a": [5, 6]}`, `{"a.1": 6}`, true},
		{"array index miss", `{"a": [5, 6]}`, `{"a.0": 6}`, false},
		{"index then field", `{"a": [1, {"b": 2}]}`, `{"a.1.b": 2}`, true},
		{"deep", `{"a": {"b": [{"c": {"d": "x"}}]}}`, `{"a.b.c.d": "x"}`, true},
		{"nested arrays not traversed", `{"a": [[{"b": 1}]]}`, `{"a.b": 1}`, false},

		// Null and missing.
		{"null matches missing", `{}`, `{"a": null}`, true},
		{"null matches null", `{"a": null}`, `{"a": null}`, true},
		{"null vs value", `{"a": 1}`, `{"a": null}`, false},
		{"null matches missing in an element", `{"a": [{"b": 1}, {"c": 1}]}`, `{"a.b": null}`, true},
		{"null vs every element set", `{"a": [{"b": 1}]}`, `{"a.b": null}`, false},
		{"null through a scalar", `{"a": 5}`, `{"a.b": null}`, true},
		{"null element", `{"a": [1, null]}`, `{"a": null}`, true},

		// Eve's string rule.
		{"hex matches ObjectID", `{"_id": ` + oidB + `}`, `{"_id": "5d76113ab3af37dea3a2eb92"}`, true},
		{"hex matches string", `{"_id": "5d76113ab3af37dea3a2eb92"}`, `{"_id": "5d76113ab3af37dea3a2eb92"}`, true},
		{"upper-case hex matches ObjectID", `{"_id": ` + oidB + `}`, `{"_id": "5D76113AB3AF37DEA3A2EB92"}`, true},
		{"upper-case hex vs string", `{"_id": "5d76113ab3af37dea3a2eb92"}`, `{"_id": "5D76113AB3AF37DEA3A2EB92"}`, false},
		{"other hex", `{"_id": ` + oidA + `}`, `{"_id": "5d76113ab3af37dea3a2eb92"}`, false},
		{"typed ObjectID vs string", `{"_id": "5d76113ab3af37dea3a2eb92"}`, `{"_id": ` + oidB + `}`, false},
		{"typed ObjectID", `{"_id": ` + oidB + `}`, `{"_id": ` + oidB + `}`, true},
		{"hex in array", `{"m": [{"user": ` + oidA + `}]}`, `{"m.user": "5d76113ab3af37dea3a2eb91"}`, true},
		{"hex inside sub-document equality", `{"a": {"u": ` + oidA + `}}`, `{"a": {"u": "5d76113ab3af37dea3a2eb91"}}`, true},
		{"date string matches date", `{"d": {"$date": "2019-09-10T15:00:00Z"}}`, `{"d": "2019-09-10T15:00:00+0000"}`, true},
		{"date string matches string", `{"d": "2019-09-10T15:00:00+0000"}`, `{"d": "2019-09-10T15:00:00+0000"}`, true},
		{"RFC 3339 date string matches date", `{"d": {"$date": "2019-09-10T15:00:00Z"}}`, `{"d": "2019-09-10T16:00:00.000+01:00"}`, true},
		{"a date alone is only a string", `{"d": {"$date": "2019-09-10T00:00:00Z"}}`, `{"d": "2019-09-10"}`, false},
		{"typed date", `{"d": {"$date": "2019-09-10T15:00:00Z"}}`, `{"d": {"$date": "2019-09-10T15:00:00.000Z"}}`, true},

		// $eq $ne.
		{"$eq", `{"a": 1}`, `{"a": {"$eq": 1}}`, true},
		{"$eq array element", `{"a": [1, 2]}`, `{"a": {"$eq": 2}}`, true},
		{"$ne", `{"a": 1}`, `{"a": {"$ne": 2}}`, true},
		{"$ne any element", `{"a": [1, 2]}`, `{"a": {"$ne": 2}}`, false},
		{"$ne missing", `{}`, `{"a": {"$ne": 2}}`, true},
		{"$ne null on missing", `{}`, `{"a": {"$ne": null}}`, false},
		{"$ne null on value", `{"a": 0}`, `{"a": {"$ne": null}}`, true},
		{"$ne hex vs ObjectID", `{"_id": ` + oidB + `}`, `{"_id": {"$ne": "5d76113ab3af37dea3a2eb92"}}`, false},

		// Comparisons.
		{"$gt", `{"a": 5}`, `{"a": {"$gt": 4}}`, true},
		{"$gt equal", `{"a": 5}`, `{"a": {"$gt": 5}}`, false},
		{"$gte", `{"a": 5}`, `{"a": {"$gte": 5}}`, true},
		{"$lt float", `{"a": 4.5}`, `{"a": {"$lt": 5}}`, true},
		{"$lte", `{"a": 5}`, `{"a": {"$lte": 4}}`, false},
		{"type bracket", `{"a": "5"}`, `{"a": {"$gt": 4}}`, false},
		{"strings by bytes", `{"a": "b"}`, `{"a": {"$gt": "B"}}`, true},
		{"range on elements", `{"a": [1, 10]}`, `{"a": {"$gt": 5, "$lt": 3}}`, true},
		{"range on elements miss", `{"a": [4]}`, `{"a": {"$gt": 5, "$lt": 3}}`, false},
		{"$gte null matches null", `{"a": null}`, `{"a": {"$gte": null}}`, true},
		{"$lte null matches missing", `{}`, `{"a": {"$lte": null}}`, true},
		{"$gt null", `{"a": null}`, `{"a": {"$gt": null}}`, false},
		{"$gt date string is a date", `{"d": {"$date": "2019-09-10T15:00:00Z"}}`, `{"d": {"$gt": "2019-09-01T00:00:00+0000"}}`, true},
		{"$gt date string is not a string", `{"d": "2019-09-10T15:00:00+0000"}`, `{"d": {"$gt": "2019-09-01T00:00:00+0000"}}`, false},
		{"$lt date", `{"d": {"$date": "2019-09-10T15:00:00Z"}}`, `{"d": {"$lt": "2019-09-01T00:00:00+0000"}}`, false},
		{"$gt hex is an ObjectID", `{"_id": ` + oidB + `}`, `{"_id": {"$gt": "5d76113ab3af37dea3a2eb91"}}`, true},
		{"$gt hex not a string", `{"_id": "5d76113ab3af37dea3a2eb92"}`, `{"_id": {"$gt": "5d76113ab3af37dea3a2eb91"}}`, false},
		{"$gt documents", `{"a": {"b": 2}}`, `{"a": {"$gt": {"b": 1}}}`, true},
		{"$lt arrays", `{"a": [[1, 2]]}`, `{"a": {"$lt": [1, 3]}}`, true},
		{"$gt bool", `{"a": true}`, `{"a": {"$gt": false}}`, true},

		// $in $nin $all.
		{"$in", `{"a": 2}`, `{"a": {"$in": [1, 2]}}`, true},
		{"$in element", `{"a": [3, 4]}`, `{"a": {"$in": [4]}}`, true},
		{"$in miss", `{"a": [3, 4]}`, `{"a": {"$in": [5]}}`, false},
		{"$in null matches missing", `{}`, `{"a": {"$in": [null]}}`, true},
		{"$in empty", `{"a": 1}`, `{"a": {"$in": []}}`, false},
		{"$in hex matches ObjectID", `{"a": ` + oidA + `}`, `{"a": {"$in": ["x", "5d76113ab3af37dea3a2eb91"]}}`, true},
		{"$in hex matches string", `{"a": "5d76113ab3af37dea3a2eb91"}`, `{"a": {"$in": ["5d76113ab3af37dea3a2eb91"]}}`, true},
		{"$in typed ObjectID vs string", `{"a": "5d76113ab3af37dea3a2eb91"}`, `{"a": {"$in": [` + oidA + `]}}`, false},
		{"$in date string", `{"d": {"$date": "2019-09-10T15:00:00Z"}}`, `{"d": {"$in": ["2019-09-10T15:00:00+0000"]}}`, true},
		{"$in float and int", `{"a": 2.0}`, `{"a": {"$in": [2]}}`, true},
		{"$in sub-document", `{"a": {"b": 1}}`, `{"a": {"$in": [{"b": 1}]}}`, true},
		{"$nin", `{"a": 2}`, `{"a": {"$nin": [1, 2]}}`, false},
		{"$nin missing", `{}`, `{"a": {"$nin": [1]}}`, true},
		{"$nin null missing", `{}`, `{"a": {"$nin": [null]}}`, false},
		{"$all", `{"t": ["a", "b", "c"]}`, `{"t": {"$all": ["a", "c"]}}`, true},
		{"$all miss", `{"t": ["a"]}`, `{"t": {"$all": ["a", "c"]}}`, false},
		{"$all empty", `{"t": ["a"]}`, `{"t": {"$all": []}}`, false},
		{"$all scalar", `{"t": "a"}`, `{"t": {"$all": ["a"]}}`, true},
		{"$all elemMatch", `{"a": [{"b": 1, "c": 2}]}`, `{"a": {"$all": [{"$elemMatch": {"b": 1, "c": 2}}]}}`, true},
		{"$all hex", `{"t": [` + oidA + `, ` + oidB + `]}`, `{"t": {"$all": ["5d76113ab3af37dea3a2eb91", "5d76113ab3af37dea3a2eb92"]}}`, true},

		// $exists $type $size $mod.
		{"$exists null value", `{"a": null}`, `{"a": {"$exists": true}}`, true},
		{"$exists missing", `{}`, `{"a": {"$exists": true}}`, false},
		{"$exists false", `{"a": {"b": 1}}`, `{"a.c": {"$exists": false}}`, true},
		{"$exists false some element", `{"a": [{"b": 1}, {"c": 1}]}`, `{"a.b": {"$exists": false}}`, false},
		{"$exists number", `{"a": 1}`, `{"a": {"$exists": 0}}`, false},
		{"$type int", `{"a": 1}`, `{"a": {"$type": "int"}}`, true},
		{"$type long", `{"a": 5000000000}`, `{"a": {"$type": "long"}}`, true},
		{"$type int vs long", `{"a": 5000000000}`, `{"a": {"$type": 16}}`, false},
		{"$type number", `{"a": 1}`, `{"a": {"$type": "number"}}`, true},
		{"$type double code", `{"a": 1.5}`, `{"a": {"$type": 1}}`, true},
		{"$type array", `{"a": [1]}`, `{"a": {"$type": "array"}}`, true},
		{"$type element", `{"a": ["x"]}`, `{"a": {"$type": "string"}}`, true},
		{"$type null", `{"a": null}`, `{"a": {"$type": "null"}}`, true},
		{"$type null missing", `{}`, `{"a": {"$type": "null"}}`, false},
		{"$type objectId", `{"a": ` + oidA + `}`, `{"a": {"$type": "objectId"}}`, true},
		{"$type date", `{"a": {"$date": "2019-09-10T15:00:00Z"}}`, `{"a": {"$type": "date"}}`, true},
		{"$type object", `{"a": {"b": 1}}`, `{"a": {"$type": 3}}`, true},
		{"$type list", `{"a": true}`, `{"a": {"$type": ["string", "bool"]}}`, true},
		{"$size", `{"a": [1, 2]}`, `{"a": {"$size": 2}}`, true},
		{"$size zero", `{"a": []}`, `{"a": {"$size": 0}}`, true},
		{"$size not nested", `{"a": [[1, 2]]}`, `{"a": {"$size": 2}}`, false},
		{"$size string", `{"a": "ab"}`, `{"a": {"$size": 2}}`, false},
		{"$mod", `{"a": 10}`, `{"a": {"$mod": [4, 2]}}`, true},
		{"$mod float truncates", `{"a": 10.5}`, `{"a": {"$mod": [4, 2]}}`, true},
		{"$mod negative", `{"a": -10}`, `{"a": {"$mod": [4, -2]}}`, true},
		{"$mod element", `{"a": [1, 6]}`, `{"a": {"$mod": [5, 1]}}`, true},
		{"$mod string", `{"a": "10"}`, `{"a": {"$mod": [4, 2]}}`, false},

		// $not $elemMatch $bits.
		{"$not", `{"a": 5}`, `{"a": {"$not": {"$gt": 6}}}`, true},
		{"$not missing", `{}`, `{"a": {"$not": {"$gt": 6}}}`, true},
		{"$not hit", `{"a": 7}`, `{"a": {"$not": {"$gt": 6}}}`, false},
		{"$elemMatch one element", `{"a": [{"b": 1, "c": 1}, {"b": 2, "c": 2}]}`, `{"a": {"$elemMatch": {"b": 1, "c": 2}}}`, false},
		{"dotted across elements", `{"a": [{"b": 1, "c": 1}, {"b": 2, "c": 2}]}`, `{"a.b": 1, "a.c": 2}`, true},
		{"$elemMatch filter", `{"a": [{"b": 1, "c": 1}, {"b": 2, "c": 2}]}`, `{"a": {"$elemMatch": {"b": 2, "c": {"$gte": 2}}}}`, true},
		{"$elemMatch values", `{"a": [1, 5, 10]}`, `{"a": {"$elemMatch": {"$gt": 4, "$lt": 6}}}`, true},
		{"$elemMatch values miss", `{"a": [1, 10]}`, `{"a": {"$elemMatch": {"$gt": 4, "$lt": 6}}}`, false},
		{"$elemMatch not an array", `{"a": {"b": 1}}`, `{"a": {"$elemMatch": {"b": 1}}}`, false},
		{"$elemMatch $or", `{"a": [{"b": 3}]}`, `{"a": {"$elemMatch": {"$or": [{"b": 1}, {"b": 3}]}}}`, true},
		{"$bitsAllSet positions", `{"a": 5}`, `{"a": {"$bitsAllSet": [0, 2]}}`, true},
		{"$bitsAllSet mask", `{"a": 5}`, `{"a": {"$bitsAllSet": 6}}`, false},
		{"$bitsAnySet", `{"a": 5}`, `{"a": {"$bitsAnySet": 6}}`, true},
		{"$bitsAllClear", `{"a": 5}`, `{"a": {"$bitsAllClear": [1]}}`, true},
		{"$bitsAnyClear", `{"a": 5}`, `{"a": {"$bitsAnyClear": [0, 1]}}`, true},
		{"$bits sign extends", `{"a": -1}`, `{"a": {"$bitsAllSet": [100]}}`, true},
		{"$bits fraction", `{"a": 1.5}`, `{"a": {"$bitsAnySet": 1}}`, false},
		{"$bits integral float", `{"a": 4.0}`, `{"a": {"$bitsAnySet": 4}}`, true},

		// Logic.
		{"$and", `{"a": 1, "b": 2}`, `{"$and": [{"a": 1}, {"b": 2}]}`, true},
		{"$and miss", `{"a": 1, "b": 2}`, `{"$and": [{"a": 1}, {"b": 3}]}`, false},
		{"$or", `{"a": 1}`, `{"$or": [{"a": 2}, {"a": 1}]}`, true},
		{"$or miss", `{"a": 1}`, `{"$or": [{"a": 2}, {"b": 1}]}`, false},
		{"$nor", `{"a": 1}`, `{"$nor": [{"a": 2}, {"b": 1}]}`, true},
		{"$nor hit", `{"a": 1}`, `{"$nor": [{"a": 1}]}`, false},

		// Geo.
		{"$box", `{"loc": [10, 10]}`, `{"loc": {"$geoWithin": {"$box": [[0, 0], [20, 20]]}}}`, true},
		{"$box outside", `{"loc": [30, 10]}`, `{"loc": {"$geoWithin": {"$box": [[0, 0], [20, 20]]}}}`, false},
		{"$center boundary", `{"loc": [3, 4]}`, `{"loc": {"$geoWithin": {"$center": [[0, 0], 5]}}}`, true},
		{"$center outside", `{"loc": [4, 4]}`, `{"loc": {"$geoWithin": {"$center": [[0, 0], 5]}}}`, false},
		{"$centerSphere", `{"loc": [0, 1]}`, `{"loc": {"$geoWithin": {"$centerSphere": [[0, 0], 0.0175]}}}`, true},
		{"$centerSphere outside", `{"loc": [0, 2]}`, `{"loc": {"$geoWithin": {"$centerSphere": [[0, 0], 0.0175]}}}`, false},
		{"$polygon", `{"loc": [1, 1]}`, `{"loc": {"$geoWithin": {"$polygon": [[0, 0], [4, 0], [0, 4]]}}}`, true},
		{"$polygon outside", `{"loc": [3, 3]}`, `{"loc": {"$geoWithin": {"$polygon": [[0, 0], [4, 0], [0, 4]]}}}`, false},
		{"$geometry polygon, GeoJSON point", `{"loc": {"type": "Point", "coordinates": [14.4, 50.1]}}`,
			`{"loc": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": [[[14, 50], [15, 50], [15, 51], [14, 51], [14, 50]]]}}}}`, true},
		{"$geometry polygon hole", `{"loc": [14.5, 50.5]}`,
			`{"loc": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": [[[14, 50], [15, 50], [15, 51], [14, 51], [14, 50]], [[14.4, 50.4], [14.6, 50.4], [14.6, 50.6], [14.4, 50.6], [14.4, 50.4]]]}}}}`, false},
		{"legacy document point", `{"loc": {"lng": 1, "lat": 1}}`, `{"loc": {"$geoWithin": {"$box": [[0, 0], [2, 2]]}}}`, true},
		{"array of points", `{"loc": [[50, 50], [1, 1]]}`, `{"loc": {"$geoWithin": {"$box": [[0, 0], [2, 2]]}}}`, true},
		{"$geoIntersects point", `{"loc": {"type": "Point", "coordinates": [1, 2]}}`, `{"loc": {"$geoIntersects": {"$geometry": {"type": "Point", "coordinates": [1, 2]}}}}`, true},
		{"$geoIntersects polygon", `{"loc": [1, 1]}`, `{"loc": {"$geoIntersects": {"$geometry": {"type": "Polygon", "coordinates": [[[0, 0], [2, 0], [2, 2], [0, 0]]]}}}}`, true},
		{"$near max", `{"loc": [3, 4]}`, `{"loc": {"$near": [0, 0], "$maxDistance": 5}}`, true},
		{"$near beyond max", `{"loc": [10, 10]}`, `{"loc": {"$near": [0, 0], "$maxDistance": 5}}`, false},
		{"$near min", `{"loc": [1, 0]}`, `{"loc": {"$near": [0, 0], "$minDistance": 2}}`, false},
		{"$near no bounds", `{"loc": [100, 80]}`, `{"loc": {"$near": [0, 0]}}`, true},
		{"$nearSphere metres", `{"loc": [0, 1]}`, `{"loc": {"$nearSphere": {"$geometry": {"type": "Point", "coordinates": [0, 0]}, "$maxDistance": 120000}}}`, true},
		{"$nearSphere metres beyond", `{"loc": [0, 1]}`, `{"loc": {"$nearSphere": {"$geometry": {"type": "Point", "coordinates": [0, 0]}, "$maxDistance": 100000}}}`, false},
		{"$nearSphere radians", `{"loc": [0, 1]}`, `{"loc": {"$nearSphere": [0, 0], "$maxDistance": 0.01}}`, false},
		{"geo on missing", `{}`, `{"loc": {"$near": [0, 0]}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Match(jdoc(t, tc.doc), jdoc(t, tc.filter))
			if err != nil {
				t.Fatalf("Match(%s, %s): %v", tc.doc, tc.filter, err)
			}
			if got != tc.want {
				t.Errorf("Match(%s, %s) = %v, want %v", tc.doc, tc.filter, got, tc.want)
			}
		})
	}
}

func TestMatchInvalid(t *testing.T) {
	for _, tc := range []struct {
		name   string
		filter *sources.Doc
	}{
		{"$where", sources.D("$where", "1")},
		{"$regex", sources.D("a", sources.D("$regex", "x"))},
		{"$expr", sources.D("$expr", sources.D())},
		{"unknown operator", sources.D("a", sources.D("$foo", int64(1)))},
		{"operator mixed with field", sources.D("a", sources.D("$eq", int64(1), "b", int64(2)))},
		{"empty $and", sources.D("$and", []any{})},
		{"$and of scalars", sources.D("$or", []any{int64(1)})},
		{"$and not an array", sources.D("$nor", sources.D())},
		{"$in scalar", sources.D("a", sources.D("$in", int64(1)))},
		{"$all scalar", sources.D("a", sources.D("$all", "x"))},
		{"$size negative", sources.D("a", sources.D("$size", int64(-1)))},
		{"$size fraction", sources.D("a", sources.D("$size", 1.5))},
		{"$mod by zero", sources.D("a", sources.D("$mod", []any{int64(0), int64(1)}))},
		{"$mod shape", sources.D("a", sources.D("$mod", []any{int64(2)}))},
		{"$type unknown", sources.D("a", sources.D("$type", "nope"))},
		{"$type code", sources.D("a", sources.D("$type", int64(42)))},
		{"$exists string", sources.D("a", sources.D("$exists", "yes"))},
		{"$not scalar", sources.D("a", sources.D("$not", int64(5)))},
		{"$not filter", sources.D("a", sources.D("$not", sources.D("b", int64(1))))},
		{"$elemMatch scalar", sources.D("a", sources.D("$elemMatch", int64(1)))},
		{"$bits negative mask", sources.D("a", sources.D("$bitsAllSet", int64(-1)))},
		{"empty path segment", sources.D("a..b", int64(1))},
		{"$maxDistance alone", sources.D("a", sources.D("$maxDistance", int64(5)))},
		{"$box shape", sources.D("a", sources.D("$geoWithin", sources.D("$box", []any{int64(1)})))},
		{"$geometry type", sources.D("a", sources.D("$geoWithin", sources.D("$geometry", sources.D("type", "Line"))))},
		{"Go map value", sources.D("a", map[string]any{"x": 1})},
		{"Go struct value", sources.D("a", sources.D("$in", []any{struct{}{}}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Match(sources.D("a", int64(1)), tc.filter)
			if !errors.Is(err, sources.ErrInvalid) {
				t.Errorf("Match(%s) error = %v, want ErrInvalid", describe(tc.filter), err)
			}
		})
	}
}

func TestMatchNilAndGoTypes(t *testing.T) {
	for _, tc := range []struct {
		name        string
		doc, filter *sources.Doc
		want        bool
	}{
		{"nil filter", sources.D("a", 1), nil, true},
		{"nil doc, null filter", nil, sources.D("a", nil), true},
		{"Go int in doc and filter", sources.D("a", 5), sources.D("a", sources.D("$gt", 4)), true},
		{"Go int32 vs int64", sources.D("a", int32(5)), sources.D("a", int64(5)), true},
		{"[]string field", sources.D("a", []string{"x", "y"}), sources.D("a", "y"), true},
		{"nil sub-document", sources.D("a", (*sources.Doc)(nil)), sources.D("a.b", nil), true},
		{"unknown doc value equals nothing", sources.D("a", struct{}{}), sources.D("a", sources.D("$exists", true)), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Match(tc.doc, tc.filter)
			if err != nil || got != tc.want {
				t.Errorf("Match = %v, %v, want %v", got, err, tc.want)
			}
		})
	}
}

// Every operator of grammar's table, the list the API accepts, is
// evaluated: its example compiles and tells the documents below apart
// (matching some, not all), so an operator added to the table and not to
// the evaluator fails here.
func TestMatchCoversGrammar(t *testing.T) {
	docs := []*sources.Doc{
		jdoc(t, `{"n": 10, "tags": ["a", "b"], "geo": [14.42, 50.08]}`),
		jdoc(t, `{"n": 5, "tags": ["c"], "geo": [-0.12, 51.5]}`),
		jdoc(t, `{}`),
	}
	for _, op := range grammar.MongoOps() {
		t.Run(op.Name, func(t *testing.T) {
			filter := jdoc(t, op.Example)
			n := 0
			for _, d := range docs {
				ok, err := Match(d, filter)
				if err != nil {
					t.Fatalf("Match(%s): %v", op.Example, err)
				}
				if ok {
					n++
				}
			}
			if n == 0 || n == len(docs) {
				t.Errorf("%s matches %d of %d documents, want some", op.Example, n, len(docs))
			}
		})
	}
}
