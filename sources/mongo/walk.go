package mongo

import (
	"fmt"
	"slices"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/bsonorder"
)

// A document walk pages by keyset: each page is the documents that sort
// after the last one served, by the list's keys and then _id, so writes
// between pages shift no page as skip would. MongoDB has no search_after:
// the position is a filter, and it has to follow MongoDB's sort exactly
// and let an index on the keys bound the scan, so that the find of a
// page deep in a walk costs what the first page's does.
//
// That sort compares across types, in BSON order (package bsonorder): an
// empty array, then null and missing, numbers, strings, documents,
// arrays, binary data, ObjectIds, booleans, dates, timestamps, regular
// expressions. An array field sorts by its smallest element ascending and
// its largest descending. $gt and $lt only compare values of one type,
// and $type matches whole types, and an index bounds both: each type's
// values sit together in an index, in that order. So "the key sorts
// after v" is, for a scalar, one of a few ranges (ascending):
//
//	{k: {$gt: v}}                  after v, within its type
//	{k: {$type: [later types]}}    every value of a later type
//	{k: {$eq: null}}               null and missing, when v is an empty array
//
// and, descending, {k: {$lt: v}}, {k: {$type: [earlier types]}} and
// {k: {$in: [null, []]}}. "The key equals v" is {k: {$eq: v}}. A page
// is then the $or, over each key i and each of its ranges, of "the keys
// before i equal (each {$eq}), key i in the range": each branch a run
// of equalities and one range over a prefix of the keys, which an index
// on the keys then _id (the one `prodapi check` proposes) bounds, the
// branches merged in the sort's order. The page asks for a limit, never
// a skip.
//
// A range holds when any element of an array does, so an array whose
// smallest element is before v but whose largest is after it would be
// in "after v" too. Each branch therefore carries, in a $nor that no
// index needs, the negation of "has an element at or before v" (for key
// i) and "before v" (for the keys before it):
//
//	ascending, before v:   {k: {$lt: v}}, {k: {$type: [types before v's]}}, {k: null}, {k: {$size: 0}}
//	descending, before v:  {k: {$gt: v}}, {k: {$type: [types after v's]}}
//	equal to v:            {k: {$eq: v}} ({k: {$size: 0}} for an empty array)
//
// (null and empty arrays drop out where v is one of them). For scalars
// the $nor drops nothing; _id, never an array, gets none. Exact for
// scalars, documents, missing fields and arrays of those; a path that
// reaches an empty array beside other values, and arrays nested in
// arrays, may be walked out of order.

// walkFilter returns the filter of the documents after a walk's
// position, over keys (bsonorder.WalkKeys: the sort, then _id).
func walkFilter(keys []sources.SortKey, vals []any) (*sources.Doc, error) {
	if len(vals) != len(keys) {
		return nil, fmt.Errorf("a position of %d values for %d sort keys: %w", len(vals), len(keys), sources.ErrCursor)
	}
	var branches []any
	var equal []sources.Field // {k: {$eq: v}} of the keys before i
	var nor []any             // what rules out the documents with an element before v, keys before i
	for i, k := range keys {
		v := vals[i]
		notAfter := nor
		if k.Field != "_id" {
			notAfter = append(slices.Clip(nor), append(before(k, v), equalTo(k, v))...)
		}
		for _, r := range after(k, v) {
			b := sources.NewDoc(append(slices.Clip(equal), sources.Field{Key: k.Field, Value: r})...)
			if len(notAfter) > 0 {
				b.Set("$nor", notAfter)
			}
			branches = append(branches, b)
		}
		equal = append(equal, sources.Field{Key: k.Field, Value: sources.D("$eq", v)})
		if k.Field != "_id" {
			nor = append(nor, before(k, v)...)
		}
	}
	switch len(branches) {
	case 0:
		return sources.D("_id", sources.D("$in", []any{})), nil // nothing sorts after the last document
	case 1:
		return branches[0].(*sources.Doc), nil
	}
	return sources.D("$or", branches), nil
}

// BSON sort brackets, in order, from MinKey to MaxKey; the $type aliases
// of each but null and array (null and missing are matched by {k: null},
// and arrays are sorted by their elements), MinKey and MaxKey (which
// FerretDB does not know, and Superdesk never stores). A bracket is a
// bsonorder.Rank.
var brackets = [][]string{
	{}, {}, {"number"}, {"string"}, {"object"}, {}, {"binData"},
	{"objectId"}, {"bool"}, {"date"}, {"timestamp"}, {"regex"}, {},
}

const (
	bracketNull  = int(bsonorder.RankNull)
	bracketEmpty = -1 // an empty array's key, before everything
)

// bracketOf is the sort bracket of a position's value: its rank in
// MongoDB's order, and bracketEmpty for an empty array's key.
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

// after lists the ranges of k's values that sort strictly after v in
// k's direction (for descending, below v), each an operator document on
// k alone that an index bounds. A document has an element after v when
// it matches one of them.
func after(k sources.SortKey, v any) []*sources.Doc {
	b := bracketOf(v)
	var out []*sources.Doc
	if k.Desc {
		if b > bracketNull {
			out = append(out, sources.D("$lt", v))
		}
		if t := typesBetween(bracketNull, b); len(t) > 0 {
			out = append(out, sources.D("$type", t))
		}
		switch {
		case b > bracketNull:
			out = append(out, sources.D("$in", []any{nil, []any{}}))
		case b == bracketNull:
			out = append(out, sources.D("$eq", []any{}))
		}
		return out
	}
	if b > bracketNull {
		out = append(out, sources.D("$gt", v))
	}
	if t := typesBetween(max(b, bracketNull), len(brackets)); len(t) > 0 {
		out = append(out, sources.D("$type", t))
	}
	if b == bracketEmpty {
		out = append(out, sources.D("$eq", nil))
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
