package mongo

import (
	"fmt"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/bsonorder"
)

// A document walk pages by keyset: each page is the documents that sort
// after the last one served, by the list's keys and then _id, so writes
// between pages shift no page as skip would. MongoDB has no search_after:
// the position is a filter, and it has to follow MongoDB's sort exactly.
//
// That sort compares across types, in BSON order: an empty array, then
// null and missing, numbers, strings, documents, arrays, binary data,
// ObjectIds, booleans, dates, timestamps, regular expressions. An array
// field sorts by its smallest element ascending and its largest
// descending. $gt and $lt only compare values of one type, and hold when
// any element of an array does, so "sorts after v" is written as the
// negation of "has an element at or before v", which covers other types
// (with $type), null and missing, and empty arrays:
//
//	ascending, the key is after v:  $nor [{k: {$lte: v}}, {k: {$type: [types before v's]}}, {k: null}, {k: {$size: 0}}]
//	descending, the key is after v: $nor [{k: {$gte: v}}, {k: {$type: [types after v's]}}]
//	the key equals v:               $nor [the elements before v] and {k: {$eq: v}}
//
// (null and empty arrays drop out where v is one of them). A page is then
// the $or, over each key i, of "keys before i equal, key i after", the
// last key being _id. Exact for scalars, documents, missing fields and
// arrays of those; a path that reaches an empty array beside other values,
// and arrays nested in arrays, may be walked out of order.

// walkFilter returns the filter of the documents after a walk's
// position, over keys (bsonorder.WalkKeys: the sort, then _id).
func walkFilter(keys []sources.SortKey, vals []any) (*sources.Doc, error) {
	if len(vals) != len(keys) {
		return nil, fmt.Errorf("a position of %d values for %d sort keys: %w", len(vals), len(keys), sources.ErrCursor)
	}
	var branches []any
	var equal []any // the keys before i, equal
	for i, k := range keys {
		v := vals[i]
		if after := keyAfter(k, v); after != nil {
			branches = append(branches, and(append(equal[:len(equal):len(equal)], after)))
		}
		equal = append(equal, keyEqual(k, v)...)
	}
	if len(branches) == 0 {
		return sources.D("_id", sources.D("$in", []any{})), nil // nothing sorts after the last document
	}
	if len(branches) == 1 {
		return branches[0].(*sources.Doc), nil
	}
	return sources.D("$or", branches), nil
}

func and(clauses []any) *sources.Doc {
	if len(clauses) == 1 {
		return clauses[0].(*sources.Doc)
	}
	return sources.D("$and", clauses)
}

// BSON sort brackets, in order, from MinKey to MaxKey; the $type aliases
// of each but null and array (null and missing are matched by {k: null},
// and arrays are sorted by their elements), MinKey and MaxKey (which
// FerretDB does not know, and Superdesk never stores).
var brackets = [][]string{
	{}, {}, {"number"}, {"string"}, {"object"}, {}, {"binData"},
	{"objectId"}, {"bool"}, {"date"}, {"timestamp"}, {"regex"}, {},
}

const (
	bracketNull  = 1
	bracketEmpty = -1 // an empty array's key, before everything
)

// bracketOf is the sort bracket of a position's value: its type's rank
// in MongoDB's order (bsonorder.TypeRank, the brackets above),
// and bracketEmpty for an empty array's key.
func bracketOf(v any) int {
	if a, ok := v.([]any); ok && len(a) == 0 {
		return bracketEmpty
	}
	return int(bsonorder.TypeRank(v))
}

// typesBetween are the $type aliases of the brackets from lo to hi,
// both excluded.
func typesBetween(lo, hi int) []any {
	var out []any
	for b := max(lo+1, 0); b < hi && b < len(brackets); b++ {
		for _, a := range brackets[b] {
			out = append(out, a)
		}
	}
	return out
}

// before lists the clauses that match a document with an element that
// sorts strictly before v in k's direction (for descending, above v).
func before(k sources.SortKey, v any) []any {
	b := bracketOf(v)
	f := k.Field
	var out []any
	if k.Desc {
		if b != bracketEmpty && b != bracketNull {
			out = append(out, sources.D(f, sources.D("$gt", v)))
		}
		if t := typesBetween(b, len(brackets)); len(t) > 0 {
			out = append(out, sources.D(f, sources.D("$type", t)))
		}
		if b == bracketEmpty {
			out = append(out, sources.D(f, sources.D("$eq", nil)))
		}
		return out
	}
	if b == bracketEmpty {
		return nil
	}
	if b != bracketNull {
		out = append(out, sources.D(f, sources.D("$lt", v)))
	}
	if t := typesBetween(-1, b); len(t) > 0 {
		out = append(out, sources.D(f, sources.D("$type", t)))
	}
	if b > bracketNull {
		out = append(out, sources.D(f, sources.D("$eq", nil)))
	}
	out = append(out, sources.D(f, sources.D("$size", int64(0))))
	return out
}

// equalTo is the clause that matches a document with an element equal
// to v.
func equalTo(k sources.SortKey, v any) *sources.Doc {
	if bracketOf(v) == bracketEmpty {
		return sources.D(k.Field, sources.D("$size", int64(0)))
	}
	return sources.D(k.Field, sources.D("$eq", v))
}

// keyAfter matches the documents whose key sorts after v: none of their
// elements is at or before it. Nil when nothing can (descending past an
// empty array).
func keyAfter(k sources.SortKey, v any) *sources.Doc {
	if k.Desc && bracketOf(v) == bracketEmpty {
		return nil
	}
	return sources.D("$nor", append(before(k, v), equalTo(k, v)))
}

// keyEqual matches the documents whose key is v: an element equal to
// it, none before it.
func keyEqual(k sources.SortKey, v any) []any {
	out := []any{equalTo(k, v)}
	if b := before(k, v); len(b) > 0 {
		out = append(out, sources.D("$nor", b))
	}
	return out
}
