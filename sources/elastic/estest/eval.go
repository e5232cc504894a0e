package estest

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// Evaluate is the fake's own small query evaluator: enough of the search
// grammar for the adapter's tests (match_all, match_none, bool, term,
// terms, ids, exists, range, constant_score; sort, from, size, post_filter,
// terms aggregations). Keyword semantics throughout: a .keyword or .raw
// suffix names the field itself, text is compared whole. Anything else is
// refused as Elasticsearch refuses an unknown query.
func Evaluate(docs []*sources.Doc, body *sources.Doc, _ time.Time) ([]*sources.Doc, int, *sources.Doc, error) {
	q, _ := body.Doc("query")
	var matched []*sources.Doc
	for _, d := range docs {
		ok, err := matches(d, q)
		if err != nil {
			return nil, 0, nil, err
		}
		if ok {
			matched = append(matched, d)
		}
	}
	var aggs *sources.Doc
	if spec, ok := body.Doc("aggs"); ok {
		var err error
		if aggs, err = aggregate(matched, spec); err != nil {
			return nil, 0, nil, err
		}
	}
	if pf, ok := body.Doc("post_filter"); ok {
		var kept []*sources.Doc
		for _, d := range matched {
			ok, err := matches(d, pf)
			if err != nil {
				return nil, 0, nil, err
			}
			if ok {
				kept = append(kept, d)
			}
		}
		matched = kept
	}
	if sortSpec, ok := body.Get("sort"); ok {
		keys, err := sortKeys(sortSpec)
		if err != nil {
			return nil, 0, nil, err
		}
		slices.SortStableFunc(matched, func(a, b *sources.Doc) int { return compareDocs(a, b, keys) })
	}
	from, size := intOf(body, "from", 0), intOf(body, "size", 10)
	total := len(matched)
	page := matched[min(from, total):min(from+size, total)]
	return page, total, aggs, nil
}

func intOf(d *sources.Doc, key string, def int) int {
	v, ok := d.Get(key)
	if n, isInt := v.(int64); ok && isInt {
		return int(n)
	}
	return def
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), sources.ErrInvalid)
}

// matches evaluates one query; nil is match_all.
func matches(d, q *sources.Doc) (bool, error) {
	if q == nil || q.Len() == 0 {
		return true, nil
	}
	if q.Len() != 1 {
		return false, invalid("[%s] malformed query, expected [END_OBJECT] but found [FIELD_NAME]", q.Keys()[0])
	}
	f := q.Fields()[0]
	arg, _ := f.Value.(*sources.Doc)
	switch f.Key {
	case "match_all":
		return true, nil
	case "match_none":
		return false, nil
	case "bool":
		return matchBool(d, arg)
	case "constant_score":
		filter, _ := arg.Doc("filter")
		return matches(d, filter)
	case "term":
		field, v, err := single(arg)
		if err != nil {
			return false, err
		}
		if opts, ok := v.(*sources.Doc); ok {
			v, _ = opts.Get("value")
		}
		return anyEqual(values(d, field), []any{v}), nil
	case "terms":
		for field, v := range arg.All() {
			if field == "boost" {
				continue
			}
			list, _ := v.([]any)
			return anyEqual(values(d, field), list), nil
		}
		return false, invalid("[terms] query requires a field")
	case "ids":
		list, _ := arg.Get("values")
		ids, _ := list.([]any)
		return anyEqual(values(d, "_id"), ids), nil
	case "exists":
		field, _ := arg.String("field")
		return len(values(d, field)) > 0, nil
	case "range":
		field, v, err := single(arg)
		if err != nil {
			return false, err
		}
		bounds, _ := v.(*sources.Doc)
		return inRange(values(d, field), bounds), nil
	}
	return false, invalid("unknown query [%s]", f.Key)
}

func single(arg *sources.Doc) (string, any, error) {
	if arg.Len() != 1 {
		return "", nil, invalid("query does not support multiple fields")
	}
	f := arg.Fields()[0]
	return f.Key, f.Value, nil
}

func matchBool(d, b *sources.Doc) (bool, error) {
	all := func(key string, want bool) (bool, error) {
		v, _ := b.Get(key)
		for _, c := range clauses(v) {
			ok, err := matches(d, c)
			if err != nil || ok != want {
				return false, err
			}
		}
		return true, nil
	}
	for _, key := range []string{"must", "filter"} {
		if ok, err := all(key, true); !ok || err != nil {
			return false, err
		}
	}
	if ok, err := all("must_not", false); !ok || err != nil {
		return false, err
	}
	v, _ := b.Get("should")
	should := clauses(v)
	if len(should) == 0 {
		return true, nil
	}
	need := 0
	if !b.Has("must") && !b.Has("filter") {
		need = 1
	}
	if msm, ok := b.Get("minimum_should_match"); ok {
		if n, isInt := msm.(int64); isInt {
			need = int(n)
		}
	}
	n := 0
	for _, c := range should {
		ok, err := matches(d, c)
		if err != nil {
			return false, err
		}
		if ok {
			n++
		}
	}
	return n >= need, nil
}

func clauses(v any) []*sources.Doc {
	switch v := v.(type) {
	case *sources.Doc:
		return []*sources.Doc{v}
	case []any:
		var out []*sources.Doc
		for _, x := range v {
			if d, ok := x.(*sources.Doc); ok {
				out = append(out, d)
			}
		}
		return out
	}
	return nil
}

// values are the values a field path reaches, arrays flattened.
func values(d *sources.Doc, path string) []any {
	vs := reach(d, strings.Split(path, "."))
	if len(vs) == 0 {
		for _, suffix := range []string{".keyword", ".raw"} {
			if base, ok := strings.CutSuffix(path, suffix); ok {
				return reach(d, strings.Split(base, "."))
			}
		}
	}
	return vs
}

func reach(v any, path []string) []any {
	switch x := v.(type) {
	case []any:
		var out []any
		for _, e := range x {
			out = append(out, reach(e, path)...)
		}
		return out
	case *sources.Doc:
		if len(path) == 0 {
			return nil // objects are not values
		}
		next, ok := x.Get(path[0])
		if !ok {
			return nil
		}
		return reach(next, path[1:])
	case nil:
		return nil
	}
	if len(path) > 0 {
		return nil
	}
	return []any{v}
}

// norm is a value's comparable form: numbers as float64, dates in
// sources.DateLayout, ids as hex.
func norm(v any) any {
	switch x := v.(type) {
	case int64:
		return float64(x)
	case int:
		return float64(x)
	case time.Time:
		return x.UTC().Format(sources.DateLayout)
	case sources.ObjectID:
		return x.Hex()
	}
	return v
}

func anyEqual(have, want []any) bool {
	for _, h := range have {
		nh := norm(h)
		for _, w := range want {
			if nw := norm(w); nh == nw || fmt.Sprint(nh) == fmt.Sprint(nw) {
				return true
			}
		}
	}
	return false
}

func compare(a, b any) int {
	a, b = norm(a), norm(b)
	switch x := a.(type) {
	case float64:
		if y, ok := b.(float64); ok {
			return cmp.Compare(x, y)
		}
	case string:
		if y, ok := b.(string); ok {
			return strings.Compare(x, y)
		}
	case bool:
		if y, ok := b.(bool); ok {
			return cmp.Compare(fmt.Sprint(x), fmt.Sprint(y))
		}
	}
	return strings.Compare(fmt.Sprint(a), fmt.Sprint(b))
}

func inRange(vs []any, bounds *sources.Doc) bool {
	for _, v := range vs {
		ok := true
		for op, b := range bounds.All() {
			c := compare(v, b)
			switch op {
			case "gt":
				ok = ok && c > 0
			case "gte":
				ok = ok && c >= 0
			case "lt":
				ok = ok && c < 0
			case "lte":
				ok = ok && c <= 0
			}
		}
		if ok {
			return true
		}
	}
	return false
}

type sortKey struct {
	field string
	desc  bool
}

func sortKeys(spec any) ([]sortKey, error) {
	list, ok := spec.([]any)
	if !ok {
		list = []any{spec}
	}
	var keys []sortKey
	for _, s := range list {
		switch s := s.(type) {
		case string:
			keys = append(keys, sortKey{field: s})
		case *sources.Doc:
			for field, v := range s.All() {
				k := sortKey{field: field}
				switch v := v.(type) {
				case string:
					k.desc = v == "desc"
				case *sources.Doc:
					order, _ := v.String("order")
					k.desc = order == "desc"
				}
				keys = append(keys, k)
			}
		default:
			return nil, invalid("malformed sort")
		}
	}
	return keys, nil
}

// compareDocs orders by keys; a missing value sorts last either way, as
// Elasticsearch's default "missing": "_last" does; arrays sort by their
// least value ascending, their greatest descending.
func compareDocs(a, b *sources.Doc, keys []sortKey) int {
	for _, k := range keys {
		if k.field == "_score" || k.field == "_doc" {
			continue
		}
		va, vb := sortValue(a, k), sortValue(b, k)
		switch {
		case va == nil && vb == nil:
			continue
		case va == nil:
			return 1
		case vb == nil:
			return -1
		}
		c := compare(va, vb)
		if k.desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

func sortValue(d *sources.Doc, k sortKey) any {
	var best any
	for _, v := range values(d, k.field) {
		if best == nil || (compare(v, best) < 0) != k.desc {
			best = v
		}
	}
	return best
}

// aggregate computes terms aggregations shaped as Elasticsearch shapes
// them.
func aggregate(docs []*sources.Doc, spec *sources.Doc) (*sources.Doc, error) {
	out := sources.NewDoc()
	for name, v := range spec.All() {
		a, _ := v.(*sources.Doc)
		terms, ok := a.Doc("terms")
		if !ok {
			return nil, invalid("unknown aggregation type in [%s]", name)
		}
		field, _ := terms.String("field")
		size := intOf(terms, "size", 10)
		type bucket struct {
			key  any
			docs []*sources.Doc
		}
		var buckets []*bucket
		index := map[any]*bucket{}
		for _, d := range docs {
			seen := map[any]bool{}
			for _, x := range values(d, field) {
				k := norm(x)
				if seen[k] {
					continue
				}
				seen[k] = true
				b := index[k]
				if b == nil {
					key := k
					if f, isFloat := k.(float64); isFloat && f == float64(int64(f)) {
						key = int64(f)
					}
					b = &bucket{key: key}
					index[k] = b
					buckets = append(buckets, b)
				}
				b.docs = append(b.docs, d)
			}
		}
		slices.SortStableFunc(buckets, func(x, y *bucket) int {
			if c := cmp.Compare(len(y.docs), len(x.docs)); c != 0 {
				return c
			}
			return compare(x.key, y.key)
		})
		other := 0
		for _, b := range buckets[min(size, len(buckets)):] {
			other += len(b.docs)
		}
		var list []any
		for _, b := range buckets[:min(size, len(buckets))] {
			bd := sources.D("key", b.key, "doc_count", int64(len(b.docs)))
			if sub, ok := a.Doc("aggs"); ok {
				subAggs, err := aggregate(b.docs, sub)
				if err != nil {
					return nil, err
				}
				for k, v := range subAggs.All() {
					bd.Set(k, v)
				}
			}
			list = append(list, bd)
		}
		if list == nil {
			list = []any{}
		}
		out.Set(name, sources.D("doc_count_error_upper_bound", int64(0), "sum_other_doc_count", int64(other), "buckets", list))
	}
	return out, nil
}
