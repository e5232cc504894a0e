// Package grammar is the one list of the query languages prodapi accepts:
// the MongoDB operators of a document list's where (with the kind of
// argument each takes and MongoDB's $type aliases), and the Elasticsearch
// query and aggregation types of a search list's source. The server's
// validator reads it to decide what a client may send; the MongoDB
// adapter's translator and the sandbox's evaluator are checked against it
// by their tests, and the contract suite (sources/sourcestest) proves that
// every entry has a case. A new operator or query type starts here, and
// each of those tests fails until every layer handles it. It also holds
// the one lexer of Lucene's query-string syntaxes (querystring.go), which
// the server scans for field references and the sandbox parses.
//
// It imports nothing from this module, so every layer may import it
// without changing the direction of the arrows: it sits beside sources,
// below the server and the adapters.
package grammar

import "slices"

// A Place is where a MongoDB operator may appear.
type Place int

const (
	// Field: in a field's condition, {"field": {"$op": arg}}.
	Field Place = iota + 1
	// Logical: at the top of a filter (or of an $elemMatch filter),
	// {"$op": [filter, ...]}.
	Logical
	// Inside: only inside another operator's argument (In names which).
	Inside
)

// An Arg is the kind of argument a MongoDB operator takes.
type Arg int

const (
	Value     Arg = iota + 1 // a value compared with the field ($eq, $gt, ...)
	Values                   // an array of values ($in, $nin, $all)
	Flag                     // true or false ($exists)
	TypeSpec                 // a BSON type code or alias, or an array of them ($type)
	Count                    // a non-negative integer ($size)
	Modulus                  // [divisor, remainder] with a non-zero divisor ($mod)
	BitMask                  // a non-negative integer mask or an array of bit positions
	Operators                // an operator document ($not)
	ElemMatch                // an operator document or a filter on the elements
	Shape                    // {"$shape": ...}, one shape operator ($geoWithin, $geoIntersects)
	Point                    // [x, y] or {"$geometry": ..., "$maxDistance": ...} ($near, $nearSphere)
	Distance                 // a non-negative number, beside $near or $nearSphere
	Filters                  // a non-empty array of filters ($and, $or, $nor)
	Legacy                   // legacy coordinates or a GeoJSON object, inside a shape
)

// An Op is one MongoDB query operator the API accepts.
type Op struct {
	Name  string
	Place Place
	Arg   Arg
	// In lists the operators an Inside operator may appear in; for a
	// Distance, the operators it modifies.
	In []string
	// Example is a where (JSON) using the operator, valid for the API, for
	// the tests of every layer to run.
	Example string
}

var mongoOps = []Op{
	{Name: "$eq", Place: Field, Arg: Value, Example: `{"n": {"$eq": 10}}`},
	{Name: "$ne", Place: Field, Arg: Value, Example: `{"n": {"$ne": 10}}`},
	{Name: "$gt", Place: Field, Arg: Value, Example: `{"n": {"$gt": 5}}`},
	{Name: "$gte", Place: Field, Arg: Value, Example: `{"n": {"$gte": 5}}`},
	{Name: "$lt", Place: Field, Arg: Value, Example: `{"n": {"$lt": 10}}`},
	{Name: "$lte", Place: Field, Arg: Value, Example: `{"n": {"$lte": 5}}`},
	{Name: "$in", Place: Field, Arg: Values, Example: `{"n": {"$in": [5, 10]}}`},
	{Name: "$nin", Place: Field, Arg: Values, Example: `{"n": {"$nin": [5, 10]}}`},
	{Name: "$all", Place: Field, Arg: Values, Example: `{"tags": {"$all": ["a", "b"]}}`},
	{Name: "$exists", Place: Field, Arg: Flag, Example: `{"n": {"$exists": true}}`},
	{Name: "$type", Place: Field, Arg: TypeSpec, Example: `{"n": {"$type": ["int", 2]}}`},
	{Name: "$size", Place: Field, Arg: Count, Example: `{"tags": {"$size": 2}}`},
	{Name: "$mod", Place: Field, Arg: Modulus, Example: `{"n": {"$mod": [4, 2]}}`},
	{Name: "$not", Place: Field, Arg: Operators, Example: `{"n": {"$not": {"$gt": 5}}}`},
	{Name: "$elemMatch", Place: Field, Arg: ElemMatch, Example: `{"tags": {"$elemMatch": {"$eq": "a"}}}`},
	{Name: "$bitsAllClear", Place: Field, Arg: BitMask, Example: `{"n": {"$bitsAllClear": [0, 2]}}`},
	{Name: "$bitsAllSet", Place: Field, Arg: BitMask, Example: `{"n": {"$bitsAllSet": 10}}`},
	{Name: "$bitsAnyClear", Place: Field, Arg: BitMask, Example: `{"n": {"$bitsAnyClear": [1, 3]}}`},
	{Name: "$bitsAnySet", Place: Field, Arg: BitMask, Example: `{"n": {"$bitsAnySet": 5}}`},
	{Name: "$geoWithin", Place: Field, Arg: Shape, Example: `{"geo": {"$geoWithin": {"$box": [[0, 0], [20, 60]]}}}`},
	{Name: "$geoIntersects", Place: Field, Arg: Shape,
		Example: `{"geo": {"$geoIntersects": {"$geometry": {"type": "Polygon", "coordinates": [[[0, 0], [20, 0], [20, 60], [0, 60], [0, 0]]]}}}}`},
	{Name: "$near", Place: Field, Arg: Point, Example: `{"geo": {"$near": [14, 50], "$maxDistance": 2}}`},
	{Name: "$nearSphere", Place: Field, Arg: Point, Example: `{"geo": {"$nearSphere": [14, 50], "$maxDistance": 0.1}}`},
	{Name: "$maxDistance", Place: Field, Arg: Distance, In: []string{"$near", "$nearSphere"},
		Example: `{"geo": {"$near": [14, 50], "$maxDistance": 2}}`},
	{Name: "$minDistance", Place: Field, Arg: Distance, In: []string{"$near", "$nearSphere"},
		Example: `{"geo": {"$near": [14, 50], "$minDistance": 1}}`},
	{Name: "$and", Place: Logical, Arg: Filters, Example: `{"$and": [{"n": 10}, {"tags": "a"}]}`},
	{Name: "$or", Place: Logical, Arg: Filters, Example: `{"$or": [{"n": 10}, {"tags": "a"}]}`},
	{Name: "$nor", Place: Logical, Arg: Filters, Example: `{"$nor": [{"n": 10}, {"tags": "a"}]}`},
	{Name: "$box", Place: Inside, Arg: Legacy, In: []string{"$geoWithin"},
		Example: `{"geo": {"$geoWithin": {"$box": [[0, 0], [20, 60]]}}}`},
	{Name: "$center", Place: Inside, Arg: Legacy, In: []string{"$geoWithin"},
		Example: `{"geo": {"$geoWithin": {"$center": [[14, 50], 1]}}}`},
	{Name: "$centerSphere", Place: Inside, Arg: Legacy, In: []string{"$geoWithin"},
		Example: `{"geo": {"$geoWithin": {"$centerSphere": [[14, 50], 0.01]}}}`},
	{Name: "$polygon", Place: Inside, Arg: Legacy, In: []string{"$geoWithin"},
		Example: `{"geo": {"$geoWithin": {"$polygon": [[0, 0], [20, 0], [20, 60], [0, 60]]}}}`},
	{Name: "$geometry", Place: Inside, Arg: Legacy, In: []string{"$geoWithin", "$geoIntersects", "$near", "$nearSphere"},
		Example: `{"geo": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": [[[0, 0], [20, 0], [20, 60], [0, 60], [0, 0]]]}}}}`},
}

// MongoOps returns every MongoDB operator the API accepts, in a stable
// order. The slice is the caller's.
func MongoOps() []Op {
	out := slices.Clone(mongoOps)
	for i := range out {
		out[i].In = slices.Clone(out[i].In)
	}
	return out
}

func mongoIndex(name string) int {
	return slices.IndexFunc(mongoOps, func(o Op) bool { return o.Name == name })
}

// MongoOp returns the operator named name, if the API accepts it.
func MongoOp(name string) (Op, bool) {
	i := mongoIndex(name)
	if i < 0 {
		return Op{}, false
	}
	o := mongoOps[i]
	o.In = slices.Clone(o.In)
	return o, true
}

// IsMongoOp reports whether name is an operator the API accepts at place.
func IsMongoOp(name string, place Place) bool {
	i := mongoIndex(name)
	return i >= 0 && mongoOps[i].Place == place
}

// Operators Eve knew that the API refuses outright: server-side
// JavaScript, aggregation expressions, regular expressions and text search.
var bannedMongoOps = []string{
	"$where", "$regex", "$expr", "$function", "$accumulator", "$text", "$options", "$search",
	"$language", "$caseSensitive", "$diacriticSensitive",
}

// BannedMongoOp reports whether name is an operator the API refuses on
// purpose (rather than one it does not know).
func BannedMongoOp(name string) bool { return slices.Contains(bannedMongoOps, name) }

// BannedMongoOps returns the operators refused on purpose.
func BannedMongoOps() []string { return slices.Clone(bannedMongoOps) }

// A BSONType is one of MongoDB's type aliases for $type and the type
// codes it stands for.
type BSONType struct {
	Alias string
	Codes []int
}

var bsonTypes = []BSONType{
	{"double", []int{1}}, {"string", []int{2}}, {"object", []int{3}}, {"array", []int{4}},
	{"binData", []int{5}}, {"undefined", []int{6}}, {"objectId", []int{7}}, {"bool", []int{8}},
	{"date", []int{9}}, {"null", []int{10}}, {"regex", []int{11}}, {"dbPointer", []int{12}},
	{"javascript", []int{13}}, {"symbol", []int{14}}, {"javascriptWithScope", []int{15}},
	{"int", []int{16}}, {"timestamp", []int{17}}, {"long", []int{18}}, {"decimal", []int{19}},
	{"minKey", []int{-1}}, {"maxKey", []int{127}}, {"number", []int{1, 16, 18, 19}},
}

// BSONTypes returns MongoDB's $type aliases with their codes.
func BSONTypes() []BSONType {
	out := slices.Clone(bsonTypes)
	for i := range out {
		out[i].Codes = slices.Clone(out[i].Codes)
	}
	return out
}

// TypeCodes returns the BSON type codes a $type alias stands for.
func TypeCodes(alias string) ([]int, bool) {
	i := slices.IndexFunc(bsonTypes, func(t BSONType) bool { return t.Alias == alias })
	if i < 0 {
		return nil, false
	}
	return slices.Clone(bsonTypes[i].Codes), true
}

// TypeCode reports whether n is a BSON type code $type accepts: 1 to 19,
// -1 (minKey) and 127 (maxKey).
func TypeCode(n int64) bool { return n >= 1 && n <= 19 || n == -1 || n == 127 }
