package sandbox

import (
	"bytes"
	"cmp"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// BSON canonical type order, as MongoDB compares and sorts values of
// different types. Values of no BSON type (a programming error upstream)
// sort after everything and equal nothing.
const (
	rankEmptyArray = 0 // in sort keys only: [] sorts before null
	rankNull       = 1
	rankNumber     = 2
	rankString     = 3
	rankDoc        = 4
	rankArray      = 5
	rankObjectID   = 7
	rankBool       = 8
	rankDate       = 9
	rankUnknown    = 100
)

// maxValueDepth bounds recursion into values, so that a pathological
// (cyclic) document cannot exhaust the stack.
const maxValueDepth = 200

func rank(v any) int {
	switch v.(type) {
	case nil:
		return rankNull
	case int64, float64:
		return rankNumber
	case string:
		return rankString
	case *sources.Doc:
		return rankDoc
	case []any:
		return rankArray
	case sources.ObjectID:
		return rankObjectID
	case bool:
		return rankBool
	case time.Time:
		return rankDate
	}
	return rankUnknown
}

// normalize converts Go numeric types a caller may have put in a Doc to
// the document types (int64, float64); other values are returned as they
// are.
func normalize(v any) any {
	switch v := v.(type) {
	case int:
		return int64(v)
	case int32:
		return int64(v)
	case int16:
		return int64(v)
	case int8:
		return int64(v)
	case uint8:
		return int64(v)
	case uint16:
		return int64(v)
	case uint32:
		return int64(v)
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v)
		}
		return float64(v)
	case uint:
		return normalize(uint64(v))
	case float32:
		return float64(v)
	case []*sources.Doc:
		a := make([]any, len(v))
		for i, d := range v {
			a[i] = d
		}
		return a
	case []string:
		a := make([]any, len(v))
		for i, s := range v {
			a[i] = s
		}
		return a
	}
	return v
}

// compareValues orders two values as MongoDB does: by canonical type,
// then within the type. Documents compare field by field (type, name,
// value), arrays element by element.
func compareValues(a, b any) int { return compareDepth(normalize(a), normalize(b), 0) }

func compareDepth(a, b any, depth int) int {
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return cmp.Compare(ra, rb)
	}
	if depth > maxValueDepth {
		return 0
	}
	switch a := a.(type) {
	case int64, float64:
		return compareNumbers(a, b)
	case string:
		return strings.Compare(a, b.(string))
	case *sources.Doc:
		bf := b.(*sources.Doc).Fields()
		af := a.Fields()
		for i := 0; i < len(af) && i < len(bf); i++ {
			x, y := normalize(af[i].Value), normalize(bf[i].Value)
			if c := cmp.Compare(rank(x), rank(y)); c != 0 {
				return c
			}
			if c := strings.Compare(af[i].Key, bf[i].Key); c != 0 {
				return c
			}
			if c := compareDepth(x, y, depth+1); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(af), len(bf))
	case []any:
		bb := b.([]any)
		for i := 0; i < len(a) && i < len(bb); i++ {
			if c := compareDepth(normalize(a[i]), normalize(bb[i]), depth+1); c != 0 {
				return c
			}
		}
		return cmp.Compare(len(a), len(bb))
	case sources.ObjectID:
		o := b.(sources.ObjectID)
		return bytes.Compare(a[:], o[:])
	case bool:
		switch bb := b.(bool); {
		case a == bb:
			return 0
		case !a:
			return -1
		}
		return 1
	case time.Time:
		return a.Compare(b.(time.Time))
	}
	return 0
}

// compareNumbers compares int64 and float64 values exactly, NaN first.
func compareNumbers(a, b any) int {
	ai, aInt := a.(int64)
	bi, bInt := b.(int64)
	if aInt && bInt {
		return cmp.Compare(ai, bi)
	}
	if aInt {
		return -compareIntFloat(b.(float64), ai)
	}
	if bInt {
		return compareIntFloat(a.(float64), bi)
	}
	return cmp.Compare(a.(float64), b.(float64)) // cmp orders NaN first
}

// compareIntFloat compares a float with an int64 without losing
// precision on large integers.
func compareIntFloat(f float64, i int64) int {
	switch {
	case math.IsNaN(f):
		return -1
	case f < -0x1p63:
		return -1
	case f >= 0x1p63:
		return 1
	}
	t := math.Trunc(f)
	if c := cmp.Compare(int64(t), i); c != 0 {
		return c
	}
	return cmp.Compare(f, t) // the fraction decides
}

// SortDocs sorts documents in place as MongoDB sorts a query's results:
// by each key in turn in BSON order (an array field sorts by its smallest
// element ascending, its largest descending; missing and null are equal
// and sort first ascending), then by _id ascending as the final
// tiebreaker, which makes the order deterministic. The sort is stable.
func SortDocs(docs []*sources.Doc, keys []sources.SortKey) {
	keys = withIDTiebreak(keys)
	type keyed struct {
		doc  *sources.Doc
		vals []any
	}
	ks := make([]keyed, len(docs))
	paths := make([][]string, len(keys))
	for i, k := range keys {
		paths[i] = strings.Split(k.Field, ".")
	}
	for i, d := range docs {
		ks[i] = keyed{doc: d, vals: make([]any, len(keys))}
		for j, k := range keys {
			ks[i].vals[j] = mongoSortKey(d, paths[j], k.Desc)
		}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int {
		for j, k := range keys {
			c := compareSortKeys(a.vals[j], b.vals[j])
			if k.Desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
	for i := range ks {
		docs[i] = ks[i].doc
	}
}

func withIDTiebreak(keys []sources.SortKey) []sources.SortKey {
	for _, k := range keys {
		if k.Field == "_id" {
			return keys
		}
	}
	return append(slices.Clip(keys), sources.SortKey{Field: "_id"})
}

// emptyArray is the sort key of a field holding [].
type emptyArray struct{}

func compareSortKeys(a, b any) int {
	_, ae := a.(emptyArray)
	_, be := b.(emptyArray)
	switch {
	case ae && be:
		return 0
	case ae:
		return -1
	case be:
		return 1
	}
	return compareValues(a, b)
}

// mongoSortKey is the value a document sorts by on path: the smallest
// (ascending) or largest (descending) of the values the path reaches,
// arrays expanded.
func mongoSortKey(d *sources.Doc, path []string, desc bool) any {
	var fv fieldValues
	fv.resolve(d, path)
	var best any
	found := false
	consider := func(v any) {
		v = normalize(v)
		if !found {
			best, found = v, true
			return
		}
		c := compareValues(v, best)
		if (desc && c > 0) || (!desc && c < 0) {
			best = v
		}
	}
	empty := false
	for _, v := range fv.vals {
		if a, ok := v.([]any); ok {
			if len(a) == 0 {
				empty = true
			}
			for _, e := range a {
				consider(e)
			}
			continue
		}
		consider(v)
	}
	if fv.missing {
		consider(nil)
	}
	if !found {
		if empty {
			return emptyArray{}
		}
		return nil
	}
	return best
}

// TypeRank is v's place in MongoDB's order of types, as SortDocs
// compares values: null 1, numbers 2, strings 3, documents 4, arrays 5,
// ObjectIDs 7, booleans 8, dates 9 (6, 10 and 11 are binary data,
// timestamps and regular expressions, which documents here never hold).
func TypeRank(v any) int { return rank(normalize(v)) }

// SortKey is the value MongoDB sorts d by on the dotted field (see
// SortDocs): the smallest element of an array ascending, its largest
// descending, nil for a missing or null field, and an empty []any for a
// field that holds only an empty array (which sorts before null). These
// are the values of a document walk's sources.Position.
func SortKey(d *sources.Doc, field string, desc bool) any {
	k := mongoSortKey(d, strings.Split(field, "."), desc)
	if _, ok := k.(emptyArray); ok {
		return []any{}
	}
	return k
}

// WalkKeys are the keys a document walk orders by: the sort's, then _id
// ascending unless the sort names it, as SortDocs and MongoDB order.
func WalkKeys(keys []sources.SortKey) []sources.SortKey { return withIDTiebreak(keys) }

// walkPosition is the position of a walk just after d.
func walkPosition(d *sources.Doc, keys []sources.SortKey) *sources.Position {
	vals := make([]any, len(keys))
	for i, k := range keys {
		vals[i] = SortKey(d, k.Field, k.Desc)
	}
	return &sources.Position{Values: vals}
}

// compareToPosition orders d against a walk's position over keys: below
// zero when d comes before it.
func compareToPosition(d *sources.Doc, keys []sources.SortKey, vals []any) int {
	for i, k := range keys {
		v := vals[i]
		if a, ok := v.([]any); ok && len(a) == 0 {
			v = emptyArray{}
		}
		c := compareSortKeys(mongoSortKey(d, strings.Split(k.Field, "."), k.Desc), v)
		if k.Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}
