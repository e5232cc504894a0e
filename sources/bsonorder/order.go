package bsonorder

import (
	"bytes"
	"cmp"
	"math"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// A Rank is a value's type's place in MongoDB's order of types, in which
// values of different types compare and sort: null 1, numbers 2, strings
// 3, documents 4, arrays 5, binary data 6, ObjectIds 7, booleans 8,
// dates 9, timestamps 10, regular expressions 11. Documents here never
// hold binary data, timestamps or regular expressions (the adapters
// decode them to other types), so no value has those ranks.
type Rank int

// The ranks of the types documents hold. A value of no BSON type (a
// programming error upstream) is RankUnknown: it sorts after everything
// and equals nothing.
const (
	RankNull     Rank = 1
	RankNumber   Rank = 2
	RankString   Rank = 3
	RankDoc      Rank = 4
	RankArray    Rank = 5
	RankObjectID Rank = 7
	RankBool     Rank = 8
	RankDate     Rank = 9
	RankUnknown  Rank = 100
)

// maxDepth bounds recursion into values, so that a pathological (cyclic)
// document cannot exhaust the stack.
const maxDepth = 200

// TypeRank is v's rank: RankNull for nil, RankNumber for int64 and
// float64 (and the Go integer and float types Normalize converts), and
// so on.
func TypeRank(v any) Rank { return rank(Normalize(v)) }

func rank(v any) Rank {
	switch v.(type) {
	case nil:
		return RankNull
	case int64, float64:
		return RankNumber
	case string:
		return RankString
	case *sources.Doc:
		return RankDoc
	case []any:
		return RankArray
	case sources.ObjectID:
		return RankObjectID
	case bool:
		return RankBool
	case time.Time:
		return RankDate
	}
	return RankUnknown
}

// Normalize converts the Go numeric types a caller may have put in a
// Doc to the document types (int64, float64), and []*sources.Doc and
// []string to []any; other values are returned as they are.
func Normalize(v any) any {
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
		return Normalize(uint64(v))
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

// Compare orders two values as MongoDB does: by rank, then within the
// type. Documents compare field by field (type, name, value), arrays
// element by element, numbers exactly across int64 and float64 (NaN
// first).
func Compare(a, b any) int { return compareDepth(Normalize(a), Normalize(b), 0) }

func compareDepth(a, b any, depth int) int {
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return cmp.Compare(ra, rb)
	}
	if depth > maxDepth {
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
			x, y := Normalize(af[i].Value), Normalize(bf[i].Value)
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
			if c := compareDepth(Normalize(a[i]), Normalize(bb[i]), depth+1); c != 0 {
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
