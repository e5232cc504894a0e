package sandbox

import (
	"cmp"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// Search answers an Elasticsearch search body over one collection's
// documents, with ES semantics for the validated search grammar and the
// text-analysis rule of the package comment. now anchors date math ("now"
// in ranges); the zero time means the current time.
//
// Hits are copies: the stored document with _id a string (as ES returns
// it; every ObjectID becomes its hex string, as in an ES _source),
// _resource removed and _source filtering applied. Total counts the hits
// after post_filter, saturated at sources.MaxTotal (or at an integer
// track_total_hits; exact for true). Aggregations are computed over the
// query's matches before post_filter.
//
// A body it cannot evaluate is an error wrapping sources.ErrInvalid.
func Search(docs []*sources.Doc, body *sources.Doc, now time.Time) (*sources.Result, error) {
	res, _, err := SearchSorted(docs, body, now)
	return res, err
}

// SearchSorted is Search, and the sort values of each hit as
// Elasticsearch writes them in hits[].sort and reads them back in
// search_after: numbers (dates as epoch milliseconds, booleans as 0 or
// 1, _doc and _shard_doc as the document's place in docs) and strings;
// null for a document without a value, which the sandbox, having no
// mappings, writes for every field type (Elasticsearch writes null for
// keywords only, and its numeric extremes for numbers and dates).
//
// search_after holds the sort values of the hit to continue after: the
// hits are those that sort after it, so a sort that ends with a unique
// field pages without gaps or repeats.
func SearchSorted(docs []*sources.Doc, body *sources.Doc, now time.Time) (*sources.Result, [][]any, error) {
	if now.IsZero() {
		now = time.Now()
	}
	env := &searchEnv{now: now, an: newAnalyzer()}
	return env.searchSorted(docSlice(docs), body)
}

type searchReq struct {
	query      query
	post       query
	sort       []sortSpec
	after      []any // search_after; nil: from the first hit
	from, size int
	aggs       []*aggSpec
	src        sourceFilter
	totalLimit int // -1: exact
}

func (env *searchEnv) compileBody(body *sources.Doc) (*searchReq, error) {
	r := &searchReq{query: constQ{match: true, score: 1}, size: 10, totalLimit: sources.MaxTotal}
	sortSet := false
	for _, f := range body.Fields() {
		var err error
		v := normalize(f.Value)
		switch f.Key {
		case "query":
			r.query, err = env.compileQuery(v, 0)
		case "post_filter":
			r.post, err = env.compileQuery(v, 0)
		case "sort":
			r.sort, err = env.compileSort(v)
			sortSet = true
		case "size", "from":
			n, ok := asInt(v)
			if !ok || n < 0 || n > 1<<30 {
				return nil, invalid("%s must be a non-negative integer", f.Key)
			}
			if f.Key == "size" {
				r.size = int(n)
			} else {
				r.from = int(n)
			}
		case "aggs", "aggregations":
			r.aggs, err = env.compileAggs(v, 0)
		case "_source":
			r.src, err = parseSource(v)
		case "track_total_hits":
			switch t := v.(type) {
			case bool:
				if t {
					r.totalLimit = -1
				}
			default:
				n, ok := asInt(t)
				if !ok || n < 0 {
					return nil, invalid("bad track_total_hits")
				}
				r.totalLimit = int(min(n, 1<<30))
			}
		case "search_after":
			var ok bool
			if r.after, ok = v.([]any); !ok || len(r.after) == 0 {
				err = invalid("search_after must be a non-empty array")
			}
		case "min_score", "timeout", "version", "seq_no_primary_term", "explain", "track_scores":
			// No effect on which documents come back, or not supported
			// meaningfully: ignored.
		default:
			err = invalid("unsupported search key %q", f.Key)
		}
		if err != nil {
			return nil, err
		}
	}
	if !sortSet || len(r.sort) == 0 {
		r.sort = []sortSpec{{kind: sortScore, desc: true}} // ES's default
	}
	if r.after != nil && len(r.after) != len(r.sort) {
		return nil, invalid("search_after has %d value(s) but sort has %d", len(r.after), len(r.sort))
	}
	return r, nil
}

type hit struct {
	i     int
	doc   *sources.Doc
	score float64
	keys  []sortKey
}

func (env *searchEnv) search(set docSet, body *sources.Doc) (*sources.Result, error) {
	res, _, err := env.searchSorted(set, body)
	return res, err
}

func (env *searchEnv) searchSorted(set docSet, body *sources.Doc) (*sources.Result, [][]any, error) {
	req, err := env.compileBody(body)
	if err != nil {
		return nil, nil, err
	}
	if len(req.aggs) == 0 && orderable(req.sort) {
		return env.searchInOrder(set, req, sortJSON(body))
	}
	return env.scan(set, req)
}

// scan answers a search by evaluating every document, as sortHits and
// the aggregations need: sorts by _score, nested filters, aggregations.
// Each document is read for the fields the query reads, and keeps those
// the rest of the search reads.
func (env *searchEnv) scan(set docSet, req *searchReq) (*sources.Result, [][]any, error) {
	var read, keep fieldSet
	read.query(req.query)
	keep.query(req.post)
	keep.sorts(req.sort)
	keep.aggs(req.aggs)
	keep.add("_id")
	read.all = read.all || keep.all
	for _, n := range keep.names {
		read.add(n)
	}
	keepAll := minDocCountZero(req.aggs)
	type part struct {
		hits []hit
		all  []*sources.Doc // every document, for min_doc_count 0
	}
	parts, err := inParts(set.size(), 256, func(lo, hi int) (part, error) {
		var pt part
		c := &evalCtx{env: env}
		for i := lo; i < hi; i++ {
			d, err := read.read(set, i)
			if err != nil {
				return pt, err
			}
			if d == nil {
				continue
			}
			ok, s := req.query.eval(c, d)
			if ok || keepAll {
				d = keep.pick(d)
			}
			if ok {
				pt.hits = append(pt.hits, hit{i: i, doc: d, score: s})
			}
			if keepAll {
				pt.all = append(pt.all, d)
			}
		}
		return pt, nil
	})
	if err != nil {
		return nil, nil, err
	}
	var hits []hit
	var all []*sources.Doc
	for _, pt := range parts {
		hits = append(hits, pt.hits...)
		all = append(all, pt.all...)
	}
	c := &evalCtx{env: env}
	res := &sources.Result{}
	if len(req.aggs) > 0 {
		matched := make([]*sources.Doc, len(hits))
		for i, h := range hits {
			matched[i] = h.doc
		}
		var err error
		if res.Aggregations, err = c.runAggs(req.aggs, matched, all); err != nil {
			return nil, nil, err
		}
	}
	if req.post != nil {
		hits = slices.DeleteFunc(hits, func(h hit) bool {
			ok, _ := req.post.eval(c, h.doc)
			return !ok
		})
	}
	res.Total = len(hits)
	if req.totalLimit >= 0 && res.Total > req.totalLimit {
		res.Total = req.totalLimit
	}
	if err := c.sortHits(hits, req.sort); err != nil {
		return nil, nil, err
	}
	if req.after != nil {
		after, err := c.env.afterKeys(req.after)
		if err != nil {
			return nil, nil, err
		}
		hits = hits[sort.Search(len(hits), func(i int) bool { return compareHitKeys(hits[i].keys, after, req.sort) > 0 }):]
	}
	start := min(req.from, len(hits))
	end := min(start+req.size, len(hits))
	res.Docs = make([]*sources.Doc, 0, end-start)
	values := make([][]any, 0, end-start)
	for _, h := range hits[start:end] {
		d, err := set.doc(h.i)
		if err != nil {
			return nil, nil, err
		}
		res.Docs = append(res.Docs, req.src.apply(d))
		values = append(values, sortValuesOf(h.keys))
	}
	return res, values, nil
}

// minDocCountZero reports whether an aggregation lists the terms of
// every document.
func minDocCountZero(specs []*aggSpec) bool {
	for _, a := range specs {
		if a.minDocCount == 0 || minDocCountZero(a.sub) {
			return true
		}
	}
	return false
}

// sortValuesOf writes a hit's sort keys as Elasticsearch's sort values.
func sortValuesOf(keys []sortKey) []any {
	out := make([]any, len(keys))
	for i, k := range keys {
		switch {
		case k.missing:
			out[i] = nil
		case k.isStr:
			out[i] = k.str
		case k.num == math.Trunc(k.num) && math.Abs(k.num) < 1<<53:
			out[i] = int64(k.num)
		default:
			out[i] = k.num
		}
	}
	return out
}

// afterKeys reads search_after's values as sort keys: null is a
// document without a value; numbers and strings are themselves.
func (env *searchEnv) afterKeys(vals []any) ([]sortKey, error) {
	keys := make([]sortKey, len(vals))
	for i, v := range vals {
		switch v := normalize(v).(type) {
		case nil:
			keys[i] = sortKey{missing: true}
		case int64:
			keys[i] = sortKey{num: float64(v)}
		case float64:
			keys[i] = sortKey{num: v}
		case bool:
			keys[i], _ = env.sortKeyOf(v, false, false)
		case string:
			keys[i] = sortKey{isStr: true, str: v}
		default:
			return nil, invalid("search_after value %d is not a number, a string or null", i)
		}
	}
	return keys, nil
}

// Sorting.

const (
	sortField = iota
	sortScore
	sortDoc
)

type sortSpec struct {
	kind         int
	f            fieldRef
	desc         bool
	missingFirst bool
	missing      *sortKey // a value for documents without one
	mode         string
	nestedPath   string
	nestedSegs   []string
	nestedFilter query
}

// A sortKey is one sort value: numbers (and dates as epoch millis, and
// booleans as 0/1) before strings.
type sortKey struct {
	missing bool
	isStr   bool
	num     float64
	str     string
}

func compareSortKey(a, b sortKey) int {
	if a.isStr != b.isStr {
		if a.isStr {
			return 1
		}
		return -1
	}
	if a.isStr {
		return strings.Compare(a.str, b.str)
	}
	return cmp.Compare(a.num, b.num)
}

func (env *searchEnv) compileSort(v any) ([]sortSpec, error) {
	list, ok := v.([]any)
	if !ok {
		list = []any{v}
	}
	var specs []sortSpec
	for _, e := range list {
		switch e := normalize(e).(type) {
		case string:
			s, err := env.newSortSpec(e, nil)
			if err != nil {
				return nil, err
			}
			specs = append(specs, s)
		case *sources.Doc:
			for _, f := range e.Fields() {
				s, err := env.newSortSpec(f.Key, normalize(f.Value))
				if err != nil {
					return nil, err
				}
				specs = append(specs, s)
			}
		default:
			return nil, invalid("bad sort")
		}
	}
	return specs, nil
}

func (env *searchEnv) newSortSpec(name string, params any) (sortSpec, error) {
	s := sortSpec{kind: sortField}
	switch name {
	case "_score":
		s.kind, s.desc = sortScore, true
	case "_doc", "_shard_doc":
		// _shard_doc is a point in time's order of its shards' documents:
		// one shard here, so the order of the documents.
		s.kind = sortDoc
	default:
		fr, err := newFieldRef(name)
		if err != nil || fr.all || fr.pattern {
			return s, invalid("bad sort field %q", name)
		}
		s.f = fr
	}
	var p *sources.Doc
	switch x := params.(type) {
	case nil:
	case string:
		p = sources.D("order", x)
	case *sources.Doc:
		p = x
	default:
		return s, invalid("bad sort on %q", name)
	}
	for _, f := range p.Fields() {
		v := normalize(f.Value)
		switch f.Key {
		case "order":
			o, _ := v.(string)
			switch strings.ToLower(o) {
			case "asc":
				s.desc = false
			case "desc":
				s.desc = true
			default:
				return s, invalid("bad sort order %v", f.Value)
			}
		case "missing":
			switch v {
			case "_last":
				s.missingFirst = false
			case "_first":
				s.missingFirst = true
			default:
				k, ok := env.sortKeyOf(v, false, false)
				if !ok {
					return s, invalid("bad sort missing %v", f.Value)
				}
				s.missing = &k
			}
		case "mode":
			m, _ := v.(string)
			switch m {
			case "min", "max", "avg", "sum", "median":
				s.mode = m
			default:
				return s, invalid("bad sort mode %v", f.Value)
			}
		case "nested":
			nd, ok := v.(*sources.Doc)
			if !ok {
				return s, invalid("bad nested sort")
			}
			path, ok := nd.String("path")
			if !ok {
				return s, invalid("nested sort needs a path")
			}
			s.nestedPath = path
			s.nestedSegs = strings.Split(path, ".")
			if fq, ok := nd.Get("filter"); ok {
				q, err := env.compileQuery(fq, 0)
				if err != nil {
					return s, err
				}
				s.nestedFilter = q
			}
		case "unmapped_type", "numeric_type", "format":
		default:
			return s, invalid("unsupported sort option %q", f.Key)
		}
	}
	return s, nil
}

// sortKeyOf reads a stored value as a sort key; strings that are dates
// sort as dates unless meant exactly (.keyword).
func (env *searchEnv) sortKeyOf(v any, kw, html bool) (sortKey, bool) {
	switch v := v.(type) {
	case int64:
		return sortKey{num: float64(v)}, true
	case float64:
		return sortKey{num: v}, true
	case bool:
		if v {
			return sortKey{num: 1}, true
		}
		return sortKey{}, true
	case time.Time:
		return sortKey{num: float64(v.UnixMilli())}, true
	case sources.ObjectID:
		return sortKey{isStr: true, str: v.Hex()}, true
	case string:
		// As the analyzer reads dates (analyzed.isDate), without keeping
		// an analysis of every value sorted on: HTML is never a date.
		if !kw && !html {
			if t, ok := parseStoredDate(v); ok {
				return sortKey{num: float64(t.UnixMilli())}, true
			}
		}
		return sortKey{isStr: true, str: v}, true
	}
	return sortKey{}, false
}

func (c *evalCtx) sortValue(d *sources.Doc, s *sortSpec) (sortKey, error) {
	var vals []sortKey
	collect := func() {
		c.visit(d, &s.f, func(v any, kw, html bool) bool {
			if k, ok := c.env.sortKeyOf(v, kw, html); ok {
				vals = append(vals, k)
			}
			return false
		})
	}
	if s.nestedPath != "" {
		for _, e := range c.elems(d, s.nestedPath, s.nestedSegs) {
			c.scopes = append(c.scopes, scope{path: s.nestedPath, elem: e})
			ok := true
			if s.nestedFilter != nil {
				ok, _ = s.nestedFilter.eval(c, d)
			}
			if ok {
				collect()
			}
			c.scopes = c.scopes[:len(c.scopes)-1]
		}
	} else {
		collect()
	}
	if len(vals) == 0 {
		if s.missing != nil {
			return *s.missing, nil
		}
		return sortKey{missing: true}, nil
	}
	mode := s.mode
	if mode == "" {
		mode = "min"
		if s.desc {
			mode = "max"
		}
	}
	switch mode {
	case "min":
		return slices.MinFunc(vals, compareSortKey), nil
	case "max":
		return slices.MaxFunc(vals, compareSortKey), nil
	}
	nums := make([]float64, 0, len(vals))
	for _, k := range vals {
		if k.isStr {
			return sortKey{}, invalid("sort mode %s on a string field %s", mode, s.f.name)
		}
		nums = append(nums, k.num)
	}
	var r float64
	switch mode {
	case "sum", "avg":
		for _, n := range nums {
			r += n
		}
		if mode == "avg" {
			r /= float64(len(nums))
		}
	case "median":
		slices.Sort(nums)
		n := len(nums)
		r = nums[n/2]
		if n%2 == 0 {
			r = (nums[n/2-1] + nums[n/2]) / 2
		}
	}
	return sortKey{num: r}, nil
}

// sortHits orders hits by the specs, then by _id ascending.
func (c *evalCtx) sortHits(hits []hit, specs []sortSpec) error {
	for i := range hits {
		h := &hits[i]
		h.keys = make([]sortKey, len(specs))
		for j := range specs {
			s := &specs[j]
			switch s.kind {
			case sortScore:
				h.keys[j] = sortKey{num: h.score}
			case sortDoc:
				h.keys[j] = sortKey{num: float64(h.i)}
			default:
				k, err := c.sortValue(h.doc, s)
				if err != nil {
					return err
				}
				h.keys[j] = k
			}
		}
	}
	ids := make(map[*sources.Doc]string, len(hits))
	for _, h := range hits {
		id, _ := h.doc.Get("_id")
		ids[h.doc], _ = sources.IDString(normalize(id))
	}
	slices.SortStableFunc(hits, func(a, b hit) int {
		if c := compareHitKeys(a.keys, b.keys, specs); c != 0 {
			return c
		}
		return strings.Compare(ids[a.doc], ids[b.doc])
	})
	return nil
}

// compareHitKeys orders two hits' sort keys by the specs: missing values
// where the spec puts them, others in the spec's direction.
func compareHitKeys(a, b []sortKey, specs []sortSpec) int {
	for j := range specs {
		ka, kb := a[j], b[j]
		switch {
		case ka.missing && kb.missing:
			continue
		case ka.missing || kb.missing:
			first := ka.missing == specs[j].missingFirst
			if first {
				return -1
			}
			return 1
		}
		c := compareSortKey(ka, kb)
		if specs[j].desc {
			c = -c
		}
		if c != 0 {
			return c
		}
	}
	return 0
}

// _source filtering.

type sourceFilter struct {
	disabled           bool
	includes, excludes []string
}

func parseSource(v any) (sourceFilter, error) {
	var s sourceFilter
	strs := func(v any) ([]string, error) {
		switch x := normalize(v).(type) {
		case string:
			return []string{x}, nil
		case []any:
			out := make([]string, 0, len(x))
			for _, e := range x {
				str, ok := normalize(e).(string)
				if !ok {
					return nil, invalid("_source patterns must be strings")
				}
				out = append(out, str)
			}
			return out, nil
		}
		return nil, invalid("bad _source")
	}
	var err error
	switch x := v.(type) {
	case bool:
		s.disabled = !x
	case string, []any:
		s.includes, err = strs(x)
	case *sources.Doc:
		for _, f := range x.Fields() {
			switch f.Key {
			case "includes", "include":
				s.includes, err = strs(f.Value)
			case "excludes", "exclude":
				s.excludes, err = strs(f.Value)
			default:
				err = invalid("unsupported _source key %q", f.Key)
			}
			if err != nil {
				return s, err
			}
		}
	default:
		err = invalid("bad _source")
	}
	return s, err
}

// apply returns the hit for a stored document: a copy with ObjectIDs as
// strings, without _resource, filtered; _id is always kept, and comes
// last, as on the real stack: Elasticsearch keeps _id out of _source and
// eve-elastic appended the hit's _id to it.
func (s sourceFilter) apply(d *sources.Doc) *sources.Doc {
	out := make([]sources.Field, 0, d.Len())
	var id *sources.Field
	for _, f := range d.Fields() {
		switch {
		case f.Key == "_id":
			id = &sources.Field{Key: f.Key, Value: hitValue(f.Value, 0)}
			continue
		case f.Key == "_resource" || s.disabled:
			continue
		}
		if v, ok := s.field(f.Key, f.Value); ok {
			out = append(out, sources.Field{Key: f.Key, Value: v})
		}
	}
	if id != nil {
		out = append(out, *id)
	}
	return sources.NewDoc(out...)
}

// field filters the value at path p; it reports false when nothing of it
// is kept.
func (s sourceFilter) field(p string, v any) (any, bool) {
	if anyMatch(s.excludes, p) {
		return nil, false
	}
	full := len(s.includes) == 0 || anyMatch(s.includes, p)
	if !full && !couldMatchBelow(s.includes, p) {
		return nil, false
	}
	switch x := normalize(v).(type) {
	case *sources.Doc:
		if full && len(s.excludes) == 0 {
			return hitValue(x, 0), true
		}
		sub := s.doc(x, p, full)
		if !full && sub.Len() == 0 {
			return nil, false
		}
		return sub, true
	case []any:
		if full && len(s.excludes) == 0 {
			return hitValue(x, 0), true
		}
		out := []any{}
		for _, e := range x {
			switch ev := normalize(e).(type) {
			case *sources.Doc:
				if sub := s.doc(ev, p, full); full || sub.Len() > 0 {
					out = append(out, sub)
				}
			default:
				if full {
					out = append(out, hitValue(ev, 0))
				}
			}
		}
		if !full && len(out) == 0 {
			return nil, false
		}
		return out, true
	}
	if !full {
		return nil, false
	}
	return hitValue(v, 0), true
}

func (s sourceFilter) doc(d *sources.Doc, prefix string, full bool) *sources.Doc {
	sub := s
	if full {
		sub.includes = nil // everything below is included
	}
	out := make([]sources.Field, 0, d.Len())
	for _, f := range d.Fields() {
		if v, ok := sub.field(prefix+"."+f.Key, f.Value); ok {
			out = append(out, sources.Field{Key: f.Key, Value: v})
		}
	}
	return sources.NewDoc(out...)
}

func anyMatch(patterns []string, p string) bool {
	for _, pat := range patterns {
		if simpleMatch(pat, p) {
			return true
		}
	}
	return false
}

func couldMatchBelow(patterns []string, p string) bool {
	p += "."
	for _, pat := range patterns {
		pre := pat
		if i := strings.IndexByte(pat, '*'); i >= 0 {
			pre = pat[:i]
			if strings.HasPrefix(p, pre) {
				return true
			}
		}
		if strings.HasPrefix(pre, p) {
			return true
		}
	}
	return false
}

// hitValue copies a stored value as ES would return it: ObjectIDs become
// their hex strings.
func hitValue(v any, depth int) any {
	switch x := normalize(v).(type) {
	case sources.ObjectID:
		return x.Hex()
	case *sources.Doc:
		if depth > maxValueDepth {
			return sources.NewDoc()
		}
		out := make([]sources.Field, x.Len())
		for i, f := range x.Fields() {
			out[i] = sources.Field{Key: f.Key, Value: hitValue(f.Value, depth+1)}
		}
		return sources.NewDoc(out...)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = hitValue(e, depth+1)
		}
		return out
	default:
		return x
	}
}
