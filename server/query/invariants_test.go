package query

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/grammar"
)

// checkInvariants checks what every accepted Query must satisfy, with code
// independent of the parser's: the output conforms to the grammar (doc.go,
// sources/grammar), no hidden field and no refused key or operator appears anywhere,
// depths and sizes are bounded, and the canonical parameters round-trip.
func checkInvariants(t testing.TB, q *sources.Query) {
	t.Helper()
	if err := invariants(q); err != nil {
		t.Fatalf("invariant broken: %v\nquery: where=%s search=%s sort=%v fields=%v params=%v",
			err, js(q.Where), js(q.Search), q.Sort, q.Fields, q.Params)
	}
	roundTrip(t, q)
}

func invariants(q *sources.Query) error {
	res := q.Resource
	if q.Page < 1 || q.MaxResults < 1 || q.MaxResults > 500 {
		return fmt.Errorf("page %d, max_results %d", q.Page, q.MaxResults)
	}
	list := q.ID == ""
	if list && q.Page*q.MaxResults > 10000 {
		return fmt.Errorf("page %d of %d is past the window", q.Page, q.MaxResults)
	}
	if (q.Search != nil) != (list && res.Search) {
		return fmt.Errorf("Search set on the wrong kind of request")
	}
	if !list || res.Search {
		if q.Where != nil || len(q.Sort) > 0 {
			return fmt.Errorf("Where or Sort on a request that does not use them")
		}
	} else if len(q.Sort) == 0 {
		return fmt.Errorf("document list without a sort")
	}
	c := &checker{res: res}
	if q.Where != nil {
		if depth(q.Where) > 32 {
			return fmt.Errorf("where deeper than 32")
		}
		c.filter(q.Where, "")
	}
	if len(q.Sort) > 32 {
		return fmt.Errorf("%d sort keys", len(q.Sort))
	}
	for _, k := range q.Sort {
		c.field(k.Field)
	}
	for _, f := range q.Fields.Fields {
		c.field(f)
	}
	if q.Search != nil {
		if d := depth(q.Search); d > 4*maxQueryDepth+16 {
			return fmt.Errorf("search body %d deep", d)
		}
		c.body(q.Search)
	}
	if c.err != nil {
		return c.err
	}
	return nil
}

func depth(v any) int {
	switch v := v.(type) {
	case *sources.Doc:
		m := 0
		for _, f := range v.Fields() {
			m = max(m, depth(f.Value))
		}
		return m + 1
	case []any:
		m := 0
		for _, e := range v {
			m = max(m, depth(e))
		}
		return m + 1
	}
	return 0
}

type checker struct {
	res *sources.Resource
	err error
}

func (c *checker) failf(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf(format, args...)
	}
}

func (c *checker) field(f string) {
	if f == "" || c.res.Hidden(f) || hiddenField(c.res, f) {
		c.failf("field %q reached the output", f)
	}
}

var allowedWhereOps = map[string]bool{
	"$eq": true, "$ne": true, "$gt": true, "$gte": true, "$lt": true, "$lte": true, "$in": true,
	"$nin": true, "$all": true, "$exists": true, "$type": true, "$size": true, "$mod": true,
	"$not": true, "$elemMatch": true, "$bitsAllClear": true, "$bitsAllSet": true,
	"$bitsAnyClear": true, "$bitsAnySet": true, "$geoWithin": true, "$geoIntersects": true,
	"$near": true, "$nearSphere": true, "$maxDistance": true, "$minDistance": true, "$box": true,
	"$center": true, "$centerSphere": true, "$polygon": true, "$geometry": true,
	"$and": true, "$or": true, "$nor": true,
}

// filter walks a Mongo filter: every $ key anywhere must be allowed, and
// every path (joined through $elemMatch and literal sub-documents) must
// be visible.
func (c *checker) filter(d *sources.Doc, prefix string) {
	for _, f := range d.Fields() {
		if strings.HasPrefix(f.Key, "$") {
			if f.Key != "$and" && f.Key != "$or" && f.Key != "$nor" {
				c.failf("operator %s at the top of a filter", f.Key)
				continue
			}
			arr, _ := f.Value.([]any)
			if len(arr) == 0 {
				c.failf("%s without filters", f.Key)
			}
			for _, e := range arr {
				sub, ok := e.(*sources.Doc)
				if !ok {
					c.failf("%s holds a non-filter", f.Key)
					continue
				}
				c.filter(sub, prefix)
			}
			continue
		}
		path := f.Key
		if prefix != "" {
			path = prefix + "." + f.Key
		}
		c.field(path)
		c.whereValue(path, f.Value)
	}
}

func (c *checker) whereValue(path string, v any) {
	switch v := v.(type) {
	case *sources.Doc:
		for _, f := range v.Fields() {
			switch {
			case f.Key == "$elemMatch":
				if sub, ok := f.Value.(*sources.Doc); ok && !allOps(sub) || ok && hasLogical(sub) {
					c.filter(sub, path)
					continue
				}
				c.whereValue(path, f.Value)
			case strings.HasPrefix(f.Key, "$"):
				if !allowedWhereOps[f.Key] || grammar.BannedMongoOp(f.Key) {
					c.failf("operator %s reached the output", f.Key)
				}
				c.whereValue(path, f.Value)
			default:
				sub := path + "." + f.Key
				c.field(sub)
				c.whereValue(sub, f.Value)
			}
		}
	case []any:
		for _, e := range v {
			c.whereValue(path, e)
		}
	}
}

var bodyKeys = []string{"query", "sort", "size", "from", "aggs", "post_filter", "_source", "track_total_hits"}

// refusedAnywhere are the keys no body may hold at any depth (field and
// aggregation names with these names are refused too; highlight is a real
// item field, so it is only checked at the top). Legacy forms (filtered,
// and, nested_path, ...) are caught by the grammar checks, which know
// where a key is a field name.
var refusedAnywhere = []string{"script", "script_score", "function_score", "runtime_mappings",
	"script_fields", "stored_fields", "docvalue_fields", "inner_hits", "suggest", "collapse",
	"rescore", "percolate", "more_like_this", "_script", "wrapper"}

func (c *checker) body(b *sources.Doc) {
	keys := b.Keys()
	for _, k := range keys {
		if !slices.Contains(bodyKeys, k) {
			c.failf("body key %q", k)
		}
	}
	for _, k := range []string{"query", "sort", "size", "track_total_hits"} {
		if !b.Has(k) {
			c.failf("body without %s", k)
		}
	}
	c.noRefusedKeys(b)
	size, _ := b.Get("size")
	from, hasFrom := b.Get("from")
	n, _ := size.(int64)
	m, _ := from.(int64)
	if n < 0 || n > 500 || hasFrom && m <= 0 || m+n > 10000 {
		c.failf("size %v from %v", size, from)
	}
	if tth, _ := b.Get("track_total_hits"); tth != int64(10000) {
		c.failf("track_total_hits %v", tth)
	}
	q, _ := b.Get("query")
	c.q(q)
	if qd, ok := q.(*sources.Doc); !ok || !qd.Has("bool") {
		c.failf("body query is not a bool")
	}
	sorts, ok := b.Get("sort")
	if arr, isArr := sorts.([]any); !ok || !isArr || len(arr) > 32 {
		c.failf("sort %v", sorts)
	} else {
		for _, s := range arr {
			c.sort(s)
		}
	}
	if a, ok := b.Get("aggs"); ok {
		c.aggs(a)
	}
	if pf, ok := b.Get("post_filter"); ok {
		c.q(pf)
	}
	if src, ok := b.Get("_source"); ok {
		switch s := src.(type) {
		case bool:
			if s {
				c.failf("_source true")
			}
		case *sources.Doc:
			for _, f := range s.Fields() {
				if f.Key != "includes" && f.Key != "excludes" {
					c.failf("_source key %q", f.Key)
				}
				for _, e := range f.Value.([]any) {
					c.field(e.(string))
				}
			}
		default:
			c.failf("_source %v", src)
		}
	}
}

func (c *checker) noRefusedKeys(v any) {
	switch v := v.(type) {
	case *sources.Doc:
		for _, f := range v.Fields() {
			if slices.Contains(refusedAnywhere, f.Key) {
				c.failf("refused key %q in the body", f.Key)
			}
			c.noRefusedKeys(f.Value)
		}
	case []any:
		for _, e := range v {
			c.noRefusedKeys(e)
		}
	}
}

func isScalar(v any) bool {
	switch v.(type) {
	case string, int64, float64, bool:
		return true
	}
	return false
}

// one returns the single key and value of a document.
func (c *checker) one(v any, what string) (string, any, *sources.Doc) {
	d, ok := v.(*sources.Doc)
	if !ok || d.Len() != 1 {
		c.failf("%s is not a one-key object: %s", what, js(v))
		return "", nil, nil
	}
	f := d.Fields()[0]
	inner, _ := f.Value.(*sources.Doc)
	return f.Key, f.Value, inner
}

func (c *checker) onlyKeys(d *sources.Doc, what string, allowed ...string) {
	for _, f := range d.Fields() {
		if !slices.Contains(allowed, f.Key) {
			c.failf("%s has key %q", what, f.Key)
		}
	}
}

func (c *checker) fieldList(v any) {
	arr, ok := v.([]any)
	if !ok {
		c.failf("fields %v", v)
		return
	}
	for _, e := range arr {
		s, _ := e.(string)
		name, _, _ := strings.Cut(s, "^")
		c.field(name)
	}
}

// q checks a query against the long-form grammar.
func (c *checker) q(v any) {
	typ, _, body := c.one(v, "query")
	if body == nil {
		if typ != "" {
			c.failf("query %s body is not an object", typ)
		}
		return
	}
	switch typ {
	case "bool":
		c.onlyKeys(body, "bool", "must", "filter", "should", "must_not", "minimum_should_match", "boost", "_name")
		for _, k := range []string{"must", "filter", "should", "must_not"} {
			if cl, ok := body.Get(k); ok {
				arr, isArr := cl.([]any)
				if !isArr || len(arr) == 0 {
					c.failf("bool %s is %s", k, js(cl))
				}
				for _, e := range arr {
					c.q(e)
				}
			}
		}
	case "term", "prefix", "wildcard", "match", "match_phrase", "match_phrase_prefix", "range":
		f, spec, opts := c.one(body, typ)
		c.field(f)
		if opts == nil {
			c.failf("%s on %s is short: %s", typ, f, js(spec))
			return
		}
		allowed := map[string][]string{
			"term": {"value", "boost", "case_insensitive"}, "prefix": {"value", "boost", "case_insensitive"},
			"wildcard":     {"value", "boost", "case_insensitive"},
			"match":        {"query", "operator", "minimum_should_match", "boost", "lenient", "zero_terms_query"},
			"match_phrase": {"query", "slop", "boost"}, "match_phrase_prefix": {"query", "slop", "max_expansions", "boost"},
			"range": {"gt", "gte", "lt", "lte", "format", "time_zone", "relation", "boost"},
		}[typ]
		c.onlyKeys(opts, typ, allowed...)
		if main := allowed[0]; typ != "range" {
			if mv, ok := opts.Get(main); !ok || !isScalar(mv) {
				c.failf("%s without a scalar %s", typ, main)
			}
		}
	case "terms":
		fields := 0
		for _, f := range body.Fields() {
			if f.Key == "boost" {
				continue
			}
			fields++
			c.field(f.Key)
			arr, ok := f.Value.([]any)
			if !ok || slices.ContainsFunc(arr, func(e any) bool { return !isScalar(e) }) {
				c.failf("terms values %s", js(f.Value))
			}
		}
		if fields != 1 {
			c.failf("terms with %d fields", fields)
		}
	case "multi_match":
		c.onlyKeys(body, typ, "query", "fields", "type", "operator", "boost")
		fv, _ := body.Get("fields")
		c.fieldList(fv)
	case "match_all", "match_none":
		c.onlyKeys(body, typ, "boost")
	case "exists":
		c.onlyKeys(body, typ, "field")
		f, _ := body.String("field")
		c.field(f)
	case "ids":
		c.onlyKeys(body, typ, "values")
	case "query_string", "simple_query_string":
		text, ok := body.String("query")
		if !ok {
			c.failf("%s without query", typ)
		}
		if err := scanQueryString(text, func(f string) error {
			if hiddenField(c.res, f) {
				return fmt.Errorf("text refers to %q", f)
			}
			return nil
		}); err != nil {
			c.failf("%s: %v", typ, err)
		}
		if typ == "query_string" {
			if l, _ := body.Get("lenient"); l == nil {
				c.failf("query_string without lenient")
			}
		}
		for _, k := range []string{"quote_field_suffix", "fields_meta"} {
			if body.Has(k) {
				c.failf("%s has %s", typ, k)
			}
		}
		if fv, ok := body.Get("fields"); ok {
			c.fieldList(fv)
		}
		if df, ok := body.String("default_field"); ok {
			c.field(df)
		}
	case "nested":
		c.onlyKeys(body, typ, "path", "query", "score_mode", "ignore_unmapped")
		p, _ := body.String("path")
		c.field(p)
		qv, _ := body.Get("query")
		c.q(qv)
	case "constant_score":
		c.onlyKeys(body, typ, "filter", "boost")
		fv, _ := body.Get("filter")
		c.q(fv)
	case "dis_max":
		c.onlyKeys(body, typ, "queries", "tie_breaker", "boost")
		qs, _ := body.Get("queries")
		arr, _ := qs.([]any)
		if len(arr) == 0 {
			c.failf("dis_max without queries")
		}
		for _, e := range arr {
			c.q(e)
		}
	default:
		c.failf("query type %q reached the output", typ)
	}
}

func (c *checker) sort(v any) {
	f, _, spec := c.one(v, "sort")
	if spec == nil {
		c.failf("short sort %s", js(v))
		return
	}
	if f != "_score" && f != "_doc" {
		c.field(f)
	}
	if o, _ := spec.String("order"); o != "asc" && o != "desc" {
		c.failf("sort order %q", o)
	}
	c.onlyKeys(spec, "sort", "order", "missing", "unmapped_type", "mode", "nested")
	if n, ok := spec.Doc("nested"); ok {
		c.onlyKeys(n, "sort nested", "path", "filter")
		p, _ := n.String("path")
		c.field(p)
		if fv, ok := n.Get("filter"); ok {
			c.q(fv)
		}
	}
}

func (c *checker) aggs(v any) {
	d, ok := v.(*sources.Doc)
	if !ok {
		c.failf("aggs %v", v)
		return
	}
	for _, f := range d.Fields() {
		a, ok := f.Value.(*sources.Doc)
		if !ok {
			c.failf("agg %q", f.Key)
			continue
		}
		c.onlyKeys(a, "agg", "terms", "aggs")
		t, ok := a.Doc("terms")
		if !ok {
			c.failf("agg %q without terms", f.Key)
			continue
		}
		c.onlyKeys(t, "terms agg", "field", "size", "order", "min_doc_count", "missing", "include", "exclude")
		field, _ := t.String("field")
		c.field(field)
		if size, _ := t.Get("size"); size == nil || size.(int64) < 1 || size.(int64) > 500 {
			c.failf("terms agg size %v", size)
		}
		if sub, ok := a.Get("aggs"); ok {
			c.aggs(sub)
		}
	}
}

// encode builds the raw query string a link would carry for q.
func encode(q *sources.Query) string {
	var b strings.Builder
	fmt.Fprintf(&b, "page=%d&max_results=%d", q.Page, q.MaxResults)
	for _, p := range q.Params {
		b.WriteString("&" + p.Name + "=" + url.QueryEscape(p.Value))
	}
	return b.String()
}

var docCmp = cmp.Comparer(func(a, b *sources.Doc) bool { return js(a) == js(b) })

// roundTrip parses q's canonical form again: it must give the same Query.
func roundTrip(t testing.TB, q *sources.Query) {
	t.Helper()
	raw := encode(q)
	again, err := Parse(q.Resource, q.ID, raw)
	if err != nil {
		t.Fatalf("canonical form %q refused: %v", raw, err)
	}
	if diff := cmp.Diff(again, q, docCmp, cmpopts.EquateEmpty(), cmp.Comparer(func(a, b *sources.Resource) bool { return a == b })); diff != "" {
		t.Fatalf("canonical form %q parses differently (-again +first):\n%s", raw, diff)
	}
}
