package bsonorder

import (
	"slices"
	"strconv"
	"strings"

	"github.com/prodapi/prodapi/sources"
)

// Reach returns the values a dotted path (split at its dots) reaches in
// v, with MongoDB's implicit traversal of arrays of documents: a segment
// that meets an array looks into each of its documents, and a numeric
// segment also indexes it. Arrays at the end of the path are returned
// whole; operators expand them as MongoDB does. missing reports that some
// branch of the traversal found no value (the field is absent, or a
// scalar stood in the way), which MongoDB treats as a null.
func Reach(v any, path []string) (vals []any, missing bool) {
	var r reached
	r.resolve(v, path)
	return r.vals, r.missing
}

type reached struct {
	vals    []any
	missing bool
}

func (r *reached) resolve(v any, path []string) {
	v = Normalize(v)
	if len(path) == 0 {
		r.vals = append(r.vals, v)
		return
	}
	switch x := v.(type) {
	case *sources.Doc:
		c, ok := x.Get(path[0])
		if !ok {
			r.missing = true
			return
		}
		r.resolve(c, path[1:])
	case []any:
		n := len(r.vals)
		wasMissing := r.missing
		r.missing = false
		if i, ok := arrayIndex(path[0]); ok && i < len(x) {
			r.resolve(x[i], path[1:])
		}
		for _, e := range x {
			if d, ok := e.(*sources.Doc); ok {
				r.resolve(d, path)
			}
		}
		if len(r.vals) == n && !r.missing {
			r.missing = true // no element reached anything
		}
		r.missing = r.missing || wasMissing
	default:
		r.missing = true
	}
}

func arrayIndex(s string) (int, bool) {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0
}

// SortDocs sorts documents in place as MongoDB sorts a query's results:
// by each key in turn in BSON order (an array field sorts by its smallest
// element ascending, its largest descending; missing and null are equal
// and sort first ascending), then by _id ascending as the final
// tiebreaker, which makes the order deterministic. The sort is stable.
func SortDocs(docs []*sources.Doc, keys []sources.SortKey) {
	keys = WalkKeys(keys)
	type keyed struct {
		doc  *sources.Doc
		vals []any
	}
	ks := make([]keyed, len(docs))
	for i, d := range docs {
		ks[i] = keyed{doc: d, vals: DocKeys(d, keys)}
	}
	slices.SortStableFunc(ks, func(a, b keyed) int { return CompareKeys(a.vals, b.vals, keys) })
	for i := range ks {
		docs[i] = ks[i].doc
	}
}

// DocKeys are what d sorts by over keys (SortKey's of each), in the form
// CompareKeys and ComparePositionKeys read: a sandbox keeps them to sort
// and walk documents without reading them again.
func DocKeys(d *sources.Doc, keys []sources.SortKey) []any {
	vals := make([]any, len(keys))
	for j, k := range keys {
		vals[j] = sortKey(d, strings.Split(k.Field, "."), k.Desc)
	}
	return vals
}

// CompareKeys orders two documents by their DocKeys over keys, as
// SortDocs orders them.
func CompareKeys(a, b []any, keys []sources.SortKey) int {
	for j, k := range keys {
		c := compareSortKeys(a[j], b[j])
		if k.Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// WalkKeys are the keys a document walk orders by: the sort's, then _id
// ascending unless the sort names it, as SortDocs and MongoDB order.
func WalkKeys(keys []sources.SortKey) []sources.SortKey {
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
	return Compare(a, b)
}

// sortKey is the value a document sorts by on path: the smallest
// (ascending) or largest (descending) of the values the path reaches,
// arrays expanded.
func sortKey(d *sources.Doc, path []string, desc bool) any {
	vals, missing := Reach(d, path)
	var best any
	found := false
	consider := func(v any) {
		v = Normalize(v)
		if !found {
			best, found = v, true
			return
		}
		c := Compare(v, best)
		if (desc && c > 0) || (!desc && c < 0) {
			best = v
		}
	}
	empty := false
	for _, v := range vals {
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
	if missing {
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

// SortKey is the value MongoDB sorts d by on the dotted field (see
// SortDocs): the smallest element of an array ascending, its largest
// descending, nil for a missing or null field, and an empty []any for a
// field that holds only an empty array (which sorts before null). These
// are the values of a document walk's sources.Position.
func SortKey(d *sources.Doc, field string, desc bool) any {
	k := sortKey(d, strings.Split(field, "."), desc)
	if _, ok := k.(emptyArray); ok {
		return []any{}
	}
	return k
}

// Position is the position of a walk over keys (WalkKeys) just after d:
// its sort keys.
func Position(d *sources.Doc, keys []sources.SortKey) *sources.Position {
	return KeysPosition(DocKeys(d, keys))
}

// KeysPosition is the position of a walk just after the document of
// these DocKeys.
func KeysPosition(docKeys []any) *sources.Position {
	vals := make([]any, len(docKeys))
	for i, k := range docKeys {
		if _, ok := k.(emptyArray); ok {
			k = []any{}
		}
		vals[i] = k
	}
	return &sources.Position{Values: vals}
}

// ComparePosition orders d against a walk's position over keys (the
// values of Position): below zero when d comes before it, above when
// after.
func ComparePosition(d *sources.Doc, keys []sources.SortKey, vals []any) int {
	return ComparePositionKeys(DocKeys(d, keys), keys, vals)
}

// ComparePositionKeys is ComparePosition for the document of these
// DocKeys.
func ComparePositionKeys(docKeys []any, keys []sources.SortKey, vals []any) int {
	for i, k := range keys {
		v := vals[i]
		if a, ok := v.([]any); ok && len(a) == 0 {
			v = emptyArray{}
		}
		c := compareSortKeys(docKeys[i], v)
		if k.Desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}
