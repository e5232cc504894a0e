package query

import (
	"slices"
	"strings"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// A sourceSpec is a validated, rewritten source parameter.
type sourceSpec struct {
	query            *boolQ // nil: none given
	sort             []any
	hasSort          bool
	size, from       int64
	hasSize, hasFrom bool
	aggs             *sources.Doc
	postFilter       *sources.Doc
	src              any // false, or {includes, excludes}; nil: the whole _source
}

// doc is the canonical source: the normalised form, clamped, without
// track_total_hits (always 10000 in the body) and without the legacy
// top-level filter (folded into query.bool.filter).
func (s *sourceSpec) doc() *sources.Doc {
	var fs []sources.Field
	add := func(k string, v any, ok bool) {
		if ok {
			fs = append(fs, sources.Field{Key: k, Value: v})
		}
	}
	add("query", func() any {
		if s.query == nil {
			return nil
		}
		return s.query.query()
	}(), s.query != nil && !s.query.empty())
	add("sort", s.sort, s.hasSort)
	add("size", s.size, s.hasSize)
	add("from", s.from, s.hasFrom)
	add("aggs", s.aggs, s.aggs != nil)
	add("post_filter", s.postFilter, s.postFilter != nil)
	add("_source", s.src, s.src != nil)
	return sources.NewDoc(fs...)
}

// source validates the source parameter's object.
func (w *walker) source(d *sources.Doc) (*sourceSpec, error) {
	s := &sourceSpec{}
	var legacyFilter []any
	aggs := ""
	for _, f := range d.Fields() {
		var err error
		w.push(f.Key)
		switch f.Key {
		case "query":
			s.query, err = w.topQuery(f.Value)
		case "filter":
			// Top-level legacy filter: moved into query.bool.filter.
			legacyFilter, err = w.clauses(f.Value)
		case "sort":
			s.sort, err = w.esSort(f.Value)
			s.hasSort = true
		case "size":
			var ok bool
			if s.size, ok = f.Value.(int64); !ok || s.size < 0 {
				err = w.errf("size must be a non-negative integer")
			}
			s.size, s.hasSize = min(s.size, maxPageSize), true
		case "from":
			var ok bool
			if s.from, ok = f.Value.(int64); !ok || s.from < 0 {
				err = w.errf("from must be a non-negative integer")
			}
			s.hasFrom = true
		case "aggs", "aggregations":
			if aggs != "" {
				err = w.errf("give aggs or aggregations, not both")
				break
			}
			aggs = f.Key
			s.aggs, err = w.aggs(f.Value, 1)
			if s.aggs != nil && s.aggs.Len() == 0 {
				s.aggs = nil
			}
		case "post_filter":
			if pf, ok := asDoc(f.Value); ok && pf.Len() == 0 {
				break
			}
			s.postFilter, err = w.query(f.Value)
		case "_source":
			s.src, err = w.sourceFilter(f.Value)
		case "track_total_hits":
			switch f.Value.(type) {
			case bool, int64:
			default:
				err = w.errf("track_total_hits must be true, false or an integer")
			}
		default:
			err = w.unknown(f.Key, "key")
		}
		w.pop()
		if err != nil {
			return nil, err
		}
	}
	if len(legacyFilter) > 0 {
		if s.query == nil {
			s.query = &boolQ{}
		}
		s.query.conjoin("filter", legacyFilter...)
	}
	return s, nil
}

// topQuery reads source.query as eve-elastic did: every key other than
// bool becomes a clause of bool.must. When query has bool and other keys
// the original dropped the bool; we keep it and add the others to its
// must.
func (w *walker) topQuery(v any) (*boolQ, error) {
	d, ok := asDoc(v)
	if !ok {
		return nil, w.errf("query must be an object")
	}
	w.depth++
	defer func() { w.depth-- }()
	b := &boolQ{}
	var must []any
	for _, f := range d.Fields() {
		if f.Key == "bool" {
			w.push("bool")
			bb, err := w.boolBody(f.Value)
			w.pop()
			if err != nil {
				return nil, err
			}
			b = bb
			continue
		}
		q, err := w.query(doc1(f.Key, f.Value))
		if err != nil {
			return nil, err
		}
		must = append(must, q)
	}
	b.conjoin("must", must...)
	return b, nil
}

// esSort normalises a sort: a name, {name: order}, {name: {options}} or
// an array of those, to [{F: {"order": ..., options...}}, ...]; an object
// naming several fields becomes several entries, in order.
func (w *walker) esSort(v any) ([]any, error) {
	var entries []sources.Field
	add := func(e any) error {
		switch e := e.(type) {
		case string:
			entries = append(entries, sources.Field{Key: e})
		case *sources.Doc:
			entries = append(entries, e.Fields()...)
		default:
			return w.errf("a sort is a field name or an object")
		}
		return nil
	}
	if arr, ok := v.([]any); ok {
		for _, e := range arr {
			if err := add(e); err != nil {
				return nil, err
			}
		}
	} else if err := add(v); err != nil {
		return nil, err
	}
	if len(entries) > maxSortKeys {
		return nil, w.errf("more than %d sort keys", maxSortKeys)
	}
	out := make([]any, len(entries))
	for i, e := range entries {
		s, err := w.sortEntry(e.Key, e.Value)
		if err != nil {
			return nil, err
		}
		out[i] = s
	}
	return out, nil
}

func (w *walker) sortEntry(name string, spec any) (*sources.Doc, error) {
	special := name == "_score" || name == "_doc"
	if !special {
		if name == "_geo_distance" {
			return nil, w.unknown(name, "sort")
		}
		var err error
		if name, err = w.fieldKey(name); err != nil {
			return nil, err
		}
	}
	order := "asc"
	if name == "_score" {
		order = "desc"
	}
	dir := enum("order", "asc", "desc")
	var opts *sources.Doc
	var nested *sources.Doc
	switch s := spec.(type) {
	case nil:
	case string:
		o, ok := dir.check(s)
		if !ok {
			return nil, w.errf("sort order must be asc or desc")
		}
		order = o.(string)
	case *sources.Doc:
		var optSpec []opt
		if !special {
			optSpec = []opt{{name: "missing", kind: kScalar}, {name: "unmapped_type", kind: kString},
				enum("mode", "min", "max", "avg", "sum", "median")}
		}
		var err error
		if opts, err = w.options(s, "sort", optSpec, "order", "nested", "nested_path", "nested_filter"); err != nil {
			return nil, err
		}
		if ov, ok := s.Get("order"); ok {
			o, ok := dir.check(ov)
			if !ok {
				return nil, w.errf("sort order must be asc or desc")
			}
			order = o.(string)
		}
		if nested, err = w.sortNested(s); err != nil {
			return nil, err
		}
		if special && nested != nil {
			return nil, w.errf("%s sorts take only order", name)
		}
	default:
		return nil, w.errf("sort order must be asc or desc, or an object")
	}
	fs := []sources.Field{{Key: "order", Value: order}}
	fs = append(fs, opts.Fields()...)
	if nested != nil {
		fs = append(fs, sources.Field{Key: "nested", Value: nested})
	}
	return doc1(name, sources.NewDoc(fs...)), nil
}

// sortNested reads nested (or the legacy nested_path and nested_filter)
// of a sort: {"path": F, "filter": Q}; the filter stays a filter there.
func (w *walker) sortNested(s *sources.Doc) (*sources.Doc, error) {
	var path, filter any
	nv, hasNested := s.Get("nested")
	lp, hasPath := s.Get("nested_path")
	lf, hasFilter := s.Get("nested_filter")
	switch {
	case hasNested && (hasPath || hasFilter):
		return nil, w.errf("sort takes nested or nested_path, not both")
	case hasNested:
		nd, ok := asDoc(nv)
		if !ok {
			return nil, w.errf("sort nested must be an object")
		}
		if _, err := w.options(nd, "sort nested", nil, "path", "filter"); err != nil {
			return nil, err
		}
		path, _ = nd.Get("path")
		filter, hasFilter = nd.Get("filter")
	case hasPath:
		path = lp
		filter = lf
	case hasFilter:
		return nil, w.errf("nested_filter needs nested_path")
	default:
		return nil, nil
	}
	ps, ok := path.(string)
	if !ok {
		return nil, w.errf("sort nested needs a path")
	}
	name, err := w.field(ps)
	if err != nil {
		return nil, err
	}
	fs := []sources.Field{{Key: "path", Value: name}}
	if hasFilter {
		w.push("filter")
		q, err := w.query(filter)
		w.pop()
		if err != nil {
			return nil, err
		}
		fs = append(fs, sources.Field{Key: "filter", Value: q})
	}
	return sources.NewDoc(fs...), nil
}

// aggs validates aggregations: terms only, with optional sub-aggregations;
// mult is how many buckets each of these makes for (the product of the
// sizes above), so the tree's total is bounded.
func (w *walker) aggs(v any, mult int) (*sources.Doc, error) {
	d, ok := asDoc(v)
	if !ok {
		return nil, w.errf("aggs must be an object")
	}
	out := make([]sources.Field, 0, d.Len())
	for _, f := range d.Fields() {
		name := f.Key
		if name == "" || len(name) > maxPathLen || strings.ContainsAny(name, "[]>\x00") || refused[name] {
			return nil, w.errf("invalid aggregation name %s", quote(name))
		}
		w.push(quote(name))
		a, err := w.agg(f.Value, mult)
		w.pop()
		if err != nil {
			return nil, err
		}
		out = append(out, sources.Field{Key: name, Value: a})
	}
	sortFields(out)
	return sources.NewDoc(out...), nil
}

func (w *walker) agg(v any, mult int) (*sources.Doc, error) {
	a, ok := asDoc(v)
	if !ok {
		return nil, w.errf("an aggregation must be an object")
	}
	var terms *sources.Doc
	var sub any
	subKey := ""
	size := 0
	for _, g := range a.Fields() {
		var err error
		switch g.Key {
		case "terms":
			w.push("terms")
			terms, size, err = w.termsAgg(g.Value)
			w.pop()
		case "aggs", "aggregations":
			if subKey != "" {
				err = w.errf("give aggs or aggregations, not both")
			}
			sub, subKey = g.Value, g.Key
		default:
			err = w.unknown(g.Key, "aggregation type")
		}
		if err != nil {
			return nil, err
		}
	}
	if terms == nil {
		return nil, w.errf("only terms aggregations are supported")
	}
	mult *= size
	w.buckets += mult
	if w.buckets > maxBuckets {
		return nil, w.errf("aggregations would make more than %d buckets", maxBuckets)
	}
	fs := []sources.Field{{Key: "terms", Value: terms}}
	if subKey != "" {
		w.push(subKey)
		s, err := w.aggs(sub, mult)
		w.pop()
		if err != nil {
			return nil, err
		}
		if s.Len() > 0 {
			fs = append(fs, sources.Field{Key: "aggs", Value: s})
		}
	}
	return sources.NewDoc(fs...), nil
}

func (w *walker) termsAgg(v any) (*sources.Doc, int, error) {
	d, ok := asDoc(v)
	if !ok {
		return nil, 0, w.errf("terms must be an object")
	}
	opts, err := w.options(d, "terms", []opt{{name: "size", kind: kInt}, {name: "min_doc_count", kind: kInt},
		{name: "missing", kind: kScalar}}, "field", "order", "include", "exclude")
	if err != nil {
		return nil, 0, err
	}
	fv, _ := d.Get("field")
	fs, ok := fv.(string)
	if !ok {
		return nil, 0, w.errf("terms needs a field")
	}
	field, err := w.field(fs)
	if err != nil {
		return nil, 0, err
	}
	size := int64(10) // Elasticsearch's default
	if sv, ok := opts.Get("size"); ok {
		size = sv.(int64)
	}
	if size < 1 || size > maxAggSize {
		return nil, 0, w.errf("terms size must be between 1 and %d", maxAggSize)
	}
	out := []sources.Field{{Key: "field", Value: field}, {Key: "size", Value: size}}
	if ov, ok := d.Get("order"); ok {
		order, err := w.aggOrder(ov)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, sources.Field{Key: "order", Value: order})
	}
	for _, f := range opts.Fields() {
		if f.Key != "size" {
			out = append(out, f)
		}
	}
	for _, k := range []string{"include", "exclude"} {
		if iv, ok := d.Get(k); ok {
			arr, ok := iv.([]any)
			if !ok || slices.ContainsFunc(arr, func(e any) bool { _, ok := (opt{kind: kScalar}).check(e); return !ok }) {
				return nil, 0, w.errf("%s must be an array of values", k)
			}
			out = append(out, sources.Field{Key: k, Value: arr})
		}
	}
	return sources.NewDoc(out...), int(size), nil
}

// aggOrder reads a terms order: {"_count"|"_key": "asc"|"desc"} or an
// array of those (_term is the old name of _key).
func (w *walker) aggOrder(v any) (any, error) {
	one := func(e any) (*sources.Doc, error) {
		d, ok := asDoc(e)
		if !ok || d.Len() != 1 {
			return nil, w.errf(`terms order must be {"_count" or "_key": "asc" or "desc"}`)
		}
		f := d.Fields()[0]
		key := f.Key
		if key == "_term" {
			key = "_key"
		}
		dir, ok := enum("", "asc", "desc").check(f.Value)
		if key != "_count" && key != "_key" || !ok {
			return nil, w.errf(`terms order must be {"_count" or "_key": "asc" or "desc"}`)
		}
		return doc1(key, dir), nil
	}
	arr, ok := v.([]any)
	if !ok {
		return one(v)
	}
	if len(arr) == 0 || len(arr) > 4 {
		return nil, w.errf("terms order must have one to four criteria")
	}
	out := make([]any, len(arr))
	for i, e := range arr {
		d, err := one(e)
		if err != nil {
			return nil, err
		}
		out[i] = d
	}
	if len(out) == 1 {
		return out[0], nil
	}
	return out, nil
}

// sourceFilter normalises _source to false or {includes, excludes};
// nil means the whole _source.
func (w *walker) sourceFilter(v any) (any, error) {
	var incl, excl any
	switch v := v.(type) {
	case bool:
		if !v {
			return false, nil
		}
		return nil, nil
	case string, []any:
		incl = v
	case *sources.Doc:
		for _, f := range v.Fields() {
			switch f.Key {
			case "includes", "include":
				if incl != nil {
					return nil, w.errf("give includes once")
				}
				incl = f.Value
			case "excludes", "exclude":
				if excl != nil {
					return nil, w.errf("give excludes once")
				}
				excl = f.Value
			default:
				return nil, w.unknown(f.Key, "_source option")
			}
		}
	default:
		return nil, w.errf("_source must be false, a pattern, an array of patterns or {includes, excludes}")
	}
	var fs []sources.Field
	for _, p := range [2]struct {
		key string
		v   any
	}{{"includes", incl}, {"excludes", excl}} {
		var list []any
		switch pv := p.v.(type) {
		case nil:
		case string:
			list = []any{pv}
		case []any:
			list = pv
		default:
			return nil, w.errf("_source %s must be a pattern or an array of patterns", p.key)
		}
		names := make([]string, 0, len(list))
		for _, e := range list {
			s, ok := e.(string)
			if !ok {
				return nil, w.errf("_source %s must be a pattern or an array of patterns", p.key)
			}
			if msg := pathProblem(s); msg != "" {
				return nil, w.errf("%s", msg)
			}
			if hiddenField(w.res, s) {
				return nil, w.errf("field %s cannot be used", quote(s))
			}
			names = append(names, s)
		}
		slices.Sort(names)
		names = slices.Compact(names)
		if len(names) > 0 {
			arr := make([]any, len(names))
			for i, n := range names {
				arr[i] = n
			}
			fs = append(fs, sources.Field{Key: p.key, Value: arr})
		}
	}
	if len(fs) == 0 {
		return nil, nil
	}
	return sources.NewDoc(fs...), nil
}

// parseSearch builds the search body of a search list from source, q,
// df, default_operator, filter, where and sort, as eve-elastic's find did.
func (p *parser) parseSearch() error {
	var spec *sourceSpec
	if raw := p.args.first("source"); raw != "" {
		v, err := decode("source", raw)
		if err != nil {
			return err
		}
		d, ok := asDoc(v)
		if !ok {
			return badf("source: must be a JSON object")
		}
		w := &walker{res: p.res, param: "source"}
		if spec, err = w.source(d); err != nil {
			return err
		}
		if c := spec.doc(); c.Len() > 0 {
			p.keep("source", string(codec.AppendCanonicalJSON(nil, c)))
		}
	}
	var filter *sources.Doc
	if raw := p.args.first("filter"); raw != "" {
		v, err := decode("filter", raw)
		if err != nil {
			return err
		}
		d, ok := asDoc(v)
		if !ok {
			return badf("filter: must be a JSON object (one query)")
		}
		if d.Len() > 0 {
			w := &walker{res: p.res, param: "filter"}
			if filter, err = w.query(d); err != nil {
				return err
			}
			p.keep("filter", string(codec.AppendCanonicalJSON(nil, filter)))
		}
	}
	clause, err := p.textParams()
	if err != nil {
		return err
	}

	b := &boolQ{}
	if spec != nil && spec.query != nil {
		b = spec.query.clone()
	}
	if clause != nil {
		b.conjoin("must", clause)
	}
	if filter != nil {
		b.conjoin("filter", filter)
	}
	b.conjoin("filter", p.whereTerms...)

	var sort []any
	switch {
	case spec != nil && spec.hasSort:
		sort = spec.sort
	case len(p.urlSort) > 0:
		sort = sortBody(p.urlSort)
	default:
		sort = sortBody(p.res.DefaultSort)
	}
	size, from := int64(p.q.MaxResults), int64(p.q.Skip())
	if spec != nil && spec.hasSize {
		size = spec.size
	}
	if spec != nil && spec.hasFrom {
		from = spec.from
	}
	if p.walk {
		// A walk pages by position: no from, and no result window.
		if from > 0 {
			return badf("cursor: cannot be combined with source's from")
		}
		if err := walkSort(sort); err != nil {
			return err
		}
	} else if from > window || from+size > window {
		return badf("source: from %d + size %d is beyond the %d results that can be paged", from, size, window)
	}
	fs := make([]sources.Field, 0, 8)
	fs = append(fs, sources.Field{Key: "query", Value: b.query()}, sources.Field{Key: "sort", Value: sort},
		sources.Field{Key: "size", Value: size})
	if from > 0 {
		fs = append(fs, sources.Field{Key: "from", Value: from})
	}
	if spec != nil {
		if spec.aggs != nil {
			fs = append(fs, sources.Field{Key: "aggs", Value: spec.aggs})
		}
		if spec.postFilter != nil {
			fs = append(fs, sources.Field{Key: "post_filter", Value: spec.postFilter})
		}
		if spec.src != nil {
			fs = append(fs, sources.Field{Key: "_source", Value: spec.src})
		}
	}
	fs = append(fs, sources.Field{Key: "track_total_hits", Value: int64(window)})
	p.q.Search = sources.NewDoc(fs...)
	return nil
}

// sortBody is the body's sort for URL or default keys.
func sortBody(keys []sources.SortKey) []any {
	out := make([]any, len(keys))
	for i, k := range keys {
		order := "asc"
		if k.Desc {
			order = "desc"
		}
		out[i] = doc1(k.Field, doc1("order", order))
	}
	return out
}

// textParams reads q, df and default_operator: q becomes a query_string
// (lenient, with the operator and df as default field) or, when q is a
// double-quoted phrase and df is given, a match_phrase on df. The
// original gave 500 for q with a source lacking a query; we just create
// the query.
func (p *parser) textParams() (*sources.Doc, error) {
	op := "OR"
	if raw := p.args.first("default_operator"); raw != "" {
		switch strings.ToUpper(raw) {
		case "OR":
		case "AND":
			op = "AND"
		default:
			return nil, badf("default_operator: must be AND or OR")
		}
	}
	df := p.args.first("df")
	if df != "" {
		if msg := pathProblem(df); msg != "" {
			return nil, badf("df: %s", msg)
		}
		if hiddenField(p.res, df) {
			return nil, badf("df: field %s cannot be used", quote(df))
		}
	}
	q := p.args.first("q")
	if q == "" {
		return nil, nil
	}
	p.keep("q", q)
	if df != "" {
		p.keep("df", df)
	}
	if op != "OR" {
		p.keep("default_operator", op)
	}
	if t := strings.TrimSpace(q); df != "" && len(t) > 0 && t[0] == '"' && t[len(t)-1] == '"' {
		return doc1("match_phrase", doc1(df, doc1("query", strings.Trim(t, `"`)))), nil
	}
	if err := scanQueryString(q, func(f string) error {
		if hiddenField(p.res, f) {
			return badf("q: field %s cannot be used", quote(f))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	fs := []sources.Field{{Key: "query", Value: q}}
	if df != "" {
		fs = append(fs, sources.Field{Key: "default_field", Value: df})
	}
	fs = append(fs, sources.Field{Key: "default_operator", Value: op}, sources.Field{Key: "lenient", Value: true})
	return doc1("query_string", sources.NewDoc(fs...)), nil
}
