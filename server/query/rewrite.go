package query

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/grammar"
)

// A walker validates Elasticsearch query DSL from a client (source,
// filter) against sources/grammar's query types and rewrites it to the long
// forms backends rely on, applying eve-elastic's legacy rewrites
// (fix_query) on the way. Output documents are built in a fixed key order
// whatever the input's, so equivalent inputs give identical bodies.
type walker struct {
	res     *sources.Resource
	param   string // "source", "filter": the start of every message
	at      []step // where in the input we are, for messages
	depth   int    // queries nested in queries
	buckets int    // aggregation buckets asked for so far
}

type step struct {
	key string
	idx int // -1 for a key
}

func (w *walker) push(key string) { w.at = append(w.at, step{key: key, idx: -1}) }
func (w *walker) pushIdx(i int)   { w.at = append(w.at, step{idx: i}) }
func (w *walker) pop()            { w.at = w.at[:len(w.at)-1] }

// errf builds a 400 naming the parameter and the place in it.
func (w *walker) errf(format string, args ...any) error {
	var b strings.Builder
	b.WriteString(w.param)
	b.WriteString(": ")
	for i, s := range w.at {
		switch {
		case s.idx >= 0:
			fmt.Fprintf(&b, "[%d]", s.idx)
		case i > 0:
			b.WriteByte('.')
			fallthrough
		default:
			b.WriteString(s.key)
		}
	}
	if len(w.at) > 0 {
		b.WriteString(": ")
	}
	fmt.Fprintf(&b, format, args...)
	return &Error{Status: 400, Message: b.String()}
}

// refused are features we never forward, wherever they appear: scripts,
// stored and computed fields, highlights and inner hits (they bypass
// excluded-field removal), cross-index lookups, and query smuggling.
var refused = map[string]bool{
	"script": true, "script_score": true, "function_score": true, "runtime_mappings": true,
	"script_fields": true, "stored_fields": true, "docvalue_fields": true, "highlight": true,
	"inner_hits": true, "suggest": true, "collapse": true, "rescore": true, "percolate": true,
	"more_like_this": true, "_script": true, "wrapper": true,
}

// unknown refuses a key the grammar does not have.
func (w *walker) unknown(key, what string) error {
	if refused[key] {
		return w.errf("%s is not allowed", quote(key))
	}
	return w.errf("unsupported %s %s", what, quote(key))
}

// fieldKey validates a field name used as a key in the DSL (term, range,
// sort...): eve-elastic's fix_query renamed the key _type to _resource.
func (w *walker) fieldKey(name string) (string, error) {
	if name == "_type" {
		name = "_resource"
	}
	return w.field(name)
}

// field validates a field name used as a value (exists, nested path,
// aggregation field).
func (w *walker) field(name string) (string, error) {
	if refused[name] && name != "highlight" {
		// {"term": {"script": ...}} would be a field named script to ES,
		// but nobody means that; highlight is a real item field.
		return "", w.unknown(name, "")
	}
	if msg := pathProblem(name); msg != "" {
		return "", w.errf("%s", msg)
	}
	if hiddenField(w.res, name) {
		return "", w.errf("field %s cannot be used", quote(name))
	}
	return name, nil
}

// boostedField validates an entry of a fields list: a name or pattern
// with an optional ^boost.
func (w *walker) boostedField(v any) (string, error) {
	s, ok := v.(string)
	if !ok {
		return "", w.errf("fields must be an array of field names")
	}
	name, boost, ok := strings.Cut(s, "^")
	if ok {
		if _, err := strconv.ParseFloat(boost, 64); err != nil {
			return "", w.errf("invalid boost in %s", quote(s))
		}
	}
	if msg := pathProblem(name); msg != "" {
		return "", w.errf("%s", msg)
	}
	if hiddenField(w.res, name) {
		return "", w.errf("field %s cannot be used", quote(name))
	}
	return s, nil
}

func (w *walker) fieldList(v any) ([]any, error) {
	var in []any
	switch v := v.(type) {
	case string:
		in = []any{v}
	case []any:
		in = v
	default:
		return nil, w.errf("fields must be an array of field names")
	}
	out := make([]any, len(in))
	for i, e := range in {
		f, err := w.boostedField(e)
		if err != nil {
			return nil, err
		}
		out[i] = f
	}
	return out, nil
}

// Option kinds.
type kind int

const (
	kScalar kind = iota // string, number or bool
	kString
	kNum
	kInt // non-negative integer
	kBool
	kMSM // minimum_should_match: an integer or a string such as "75%"
)

// An opt is one option of a query or aggregation. With enum set, the
// value is a string matched case-insensitively and normalised to the
// enum's spelling.
type opt struct {
	name string
	kind kind
	enum []string
}

func enum(name string, values ...string) opt { return opt{name: name, kind: kString, enum: values} }

// options validates the keys of d (except those the caller handles,
// named in special) against spec and returns the options in spec order.
func (w *walker) options(d *sources.Doc, what string, spec []opt, special ...string) (*sources.Doc, error) {
	out := make([]sources.Field, 0, d.Len())
	for _, f := range d.Fields() {
		if slices.Contains(special, f.Key) {
			continue
		}
		i := slices.IndexFunc(spec, func(o opt) bool { return o.name == f.Key })
		if i < 0 {
			return nil, w.unknown(f.Key, what+" option")
		}
		v, ok := spec[i].check(f.Value)
		if !ok {
			return nil, w.errf("invalid %s %s", what, quote(f.Key))
		}
		out = append(out, sources.Field{Key: f.Key, Value: v})
	}
	slices.SortStableFunc(out, func(a, b sources.Field) int {
		return slices.IndexFunc(spec, func(o opt) bool { return o.name == a.Key }) -
			slices.IndexFunc(spec, func(o opt) bool { return o.name == b.Key })
	})
	return sources.NewDoc(out...), nil
}

func (o opt) check(v any) (any, bool) {
	switch o.kind {
	case kScalar:
		switch v.(type) {
		case string, int64, float64, bool:
			return v, true
		}
	case kString:
		s, ok := v.(string)
		if !ok || len(o.enum) == 0 {
			return v, ok
		}
		for _, e := range o.enum {
			if strings.EqualFold(s, e) {
				return e, true
			}
		}
	case kNum:
		return v, isNum(v)
	case kInt:
		n, ok := v.(int64)
		return v, ok && n >= 0
	case kBool:
		_, ok := v.(bool)
		return v, ok
	case kMSM:
		switch v := v.(type) {
		case int64:
			return v, true
		case string:
			return v, v != "" && len(v) <= 64 && strings.Trim(v, "0123456789%<- ") == ""
		}
	}
	return nil, false
}

func asDoc(v any) (*sources.Doc, bool) {
	d, ok := v.(*sources.Doc)
	return d, ok && d != nil
}

// A boolQ is a bool query being built; clause lists stay slices until
// the end so clauses can be added.
type boolQ struct {
	must, filter, should, mustNot []any
	msm, boost, name              any
}

func (b *boolQ) empty() bool {
	return len(b.must)+len(b.filter)+len(b.should)+len(b.mustNot) == 0 && b.msm == nil && b.boost == nil && b.name == nil
}

func (b *boolQ) clone() *boolQ {
	c := *b
	c.must, c.filter, c.should, c.mustNot = slices.Clip(b.must), slices.Clip(b.filter), slices.Clip(b.should), slices.Clip(b.mustNot)
	return &c
}

// body is the bool's object, in a fixed key order.
func (b *boolQ) body() *sources.Doc {
	fs := make([]sources.Field, 0, 7)
	add := func(k string, v any, ok bool) {
		if ok {
			fs = append(fs, sources.Field{Key: k, Value: v})
		}
	}
	add("must", b.must, len(b.must) > 0)
	add("filter", b.filter, len(b.filter) > 0)
	add("should", b.should, len(b.should) > 0)
	add("must_not", b.mustNot, len(b.mustNot) > 0)
	add("minimum_should_match", b.msm, b.msm != nil)
	add("boost", b.boost, b.boost != nil)
	add("_name", b.name, b.name != nil)
	return sources.NewDoc(fs...)
}

func (b *boolQ) query() *sources.Doc { return doc1("bool", b.body()) }

// merge adds o's clauses to b (several legacy keys in one object, as
// fix_query merged them); it reports false on conflicting options.
func (b *boolQ) merge(o *boolQ) bool {
	b.must = append(b.must, o.must...)
	b.filter = append(b.filter, o.filter...)
	b.should = append(b.should, o.should...)
	b.mustNot = append(b.mustNot, o.mustNot...)
	for _, p := range []struct {
		dst *any
		src any
	}{{&b.msm, o.msm}, {&b.boost, o.boost}, {&b.name, o.name}} {
		switch {
		case p.src == nil:
		case *p.dst == nil:
			*p.dst = p.src
		case *p.dst != p.src:
			return false
		}
	}
	return true
}

// conjoin adds required clauses (must or filter). A bool of only should
// clauses needs one of them to match; with a must or filter beside them
// it would need none, so the requirement is made explicit first. (The
// original appended without it and silently widened such queries.)
func (b *boolQ) conjoin(kind string, qs ...any) {
	if len(qs) == 0 {
		return
	}
	if len(b.should) > 0 && len(b.must) == 0 && len(b.filter) == 0 && b.msm == nil {
		b.msm = int64(1)
	}
	if kind == "must" {
		b.must = append(b.must, qs...)
	} else {
		b.filter = append(b.filter, qs...)
	}
}

// legacyBool reports whether key becomes a bool query (bool itself and
// grammar's legacy forms); several of them in one object merge, as
// fix_query merged them.
func legacyBool(key string) bool {
	qt, ok := grammar.QueryTypeByName(key)
	return ok && (qt.Bool || key == "bool")
}

// query validates and normalises one query object.
func (w *walker) query(v any) (*sources.Doc, error) {
	d, ok := asDoc(v)
	if !ok {
		return nil, w.errf("a query must be an object")
	}
	if d.Len() == 0 {
		return nil, w.errf("empty query")
	}
	w.depth++
	defer func() { w.depth-- }()
	if w.depth > maxQueryDepth {
		return nil, w.errf("queries nested more than %d deep", maxQueryDepth)
	}
	if d.Len() > 1 {
		b := &boolQ{}
		for _, f := range d.Fields() {
			if !legacyBool(f.Key) {
				if refused[f.Key] {
					return nil, w.unknown(f.Key, "")
				}
				return nil, w.errf("a query object holds one query type, not %d (%s, ...); combine them with bool", d.Len(), quote(d.Fields()[0].Key))
			}
			w.push(f.Key)
			sub, err := w.boolOf(f.Key, f.Value)
			w.pop()
			if err != nil {
				return nil, err
			}
			if !b.merge(sub) {
				return nil, w.errf("conflicting bool options")
			}
		}
		return b.query(), nil
	}
	f := d.Fields()[0]
	w.push(f.Key)
	defer w.pop()
	if _, ok := grammar.QueryTypeByName(f.Key); !ok {
		return nil, w.unknown(f.Key, "query type") // grammar's table is the allow-list
	}
	if legacyBool(f.Key) {
		b, err := w.boolOf(f.Key, f.Value)
		if err != nil {
			return nil, err
		}
		return b.query(), nil
	}
	var out any
	var err error
	switch f.Key {
	case "term":
		out, err = w.term(f.Value)
	case "terms":
		out, err = w.terms(f.Value)
	case "match":
		out, err = w.fieldQuery(f.Value, "query", kScalar, []opt{{name: "query", kind: kScalar},
			enum("operator", "or", "and"), {name: "minimum_should_match", kind: kMSM}, {name: "boost", kind: kNum},
			{name: "lenient", kind: kBool}, enum("zero_terms_query", "none", "all")})
	case "match_phrase":
		out, err = w.fieldQuery(f.Value, "query", kString, []opt{{name: "query", kind: kString},
			{name: "slop", kind: kInt}, {name: "boost", kind: kNum}})
	case "match_phrase_prefix":
		out, err = w.fieldQuery(f.Value, "query", kString, []opt{{name: "query", kind: kString},
			{name: "slop", kind: kInt}, {name: "max_expansions", kind: kInt}, {name: "boost", kind: kNum}})
	case "prefix":
		out, err = w.fieldQuery(f.Value, "value", kString, []opt{{name: "value", kind: kString},
			{name: "case_insensitive", kind: kBool}, {name: "boost", kind: kNum}})
	case "wildcard":
		out, err = w.wildcard(f.Value)
	case "multi_match":
		out, err = w.multiMatch(f.Value)
	case "match_all":
		out, err = w.plainOptions(f.Value, "match_all", []opt{{name: "boost", kind: kNum}})
	case "match_none":
		out, err = w.plainOptions(f.Value, "match_none", nil)
	case "range":
		out, err = w.rangeQuery(f.Value)
	case "exists":
		out, err = w.exists(f.Value)
	case "ids":
		out, err = w.ids(f.Value)
	case "query_string":
		out, err = w.queryString(f.Value)
	case "simple_query_string":
		out, err = w.simpleQueryString(f.Value)
	case "nested":
		out, err = w.nested(f.Value)
	case "constant_score":
		out, err = w.constantScore(f.Value)
	case "dis_max":
		out, err = w.disMax(f.Value)
	default:
		return nil, w.unknown(f.Key, "query type")
	}
	if err != nil {
		return nil, err
	}
	return doc1(f.Key, out), nil
}

// boolOf turns bool and the legacy forms into a bool query:
// filtered → filter + must, and → must, or → should with
// minimum_should_match 1, not → must_not, {"query": X} → must.
func (w *walker) boolOf(kind string, v any) (*boolQ, error) {
	b := &boolQ{}
	var err error
	switch kind {
	case "bool":
		return w.boolBody(v)
	case "filtered":
		d, ok := asDoc(v)
		if !ok {
			return nil, w.errf("filtered must be an object")
		}
		for _, f := range d.Fields() {
			w.push(f.Key)
			switch f.Key {
			case "filter":
				b.filter, err = w.clauses(f.Value)
			case "query":
				b.must, err = w.clauses(f.Value)
			default:
				err = w.unknown(f.Key, "filtered option")
			}
			w.pop()
			if err != nil {
				return nil, err
			}
		}
	case "and":
		b.must, err = w.clauses(v)
	case "or":
		if b.should, err = w.clauses(v); err == nil && len(b.should) == 0 {
			err = w.errf("or needs at least one query")
		}
		b.msm = int64(1)
	case "not":
		inner := v
		if d, ok := asDoc(v); ok && d.Has("filter") {
			if d.Len() != 1 {
				return nil, w.errf("not takes a query or {\"filter\": query}")
			}
			inner, _ = d.Get("filter")
		}
		if b.mustNot, err = w.clauses(inner); err == nil && len(b.mustNot) == 0 {
			err = w.errf("not needs a query")
		}
	case "query":
		b.must, err = w.clauses(v)
	}
	if err != nil {
		return nil, err
	}
	return b, nil
}

func (w *walker) boolBody(v any) (*boolQ, error) {
	d, ok := asDoc(v)
	if !ok {
		return nil, w.errf("bool must be an object")
	}
	b := &boolQ{}
	for _, f := range d.Fields() {
		var err error
		w.push(f.Key)
		switch f.Key {
		case "must", "filter", "should", "must_not":
			var cl []any
			cl, err = w.clauses(f.Value)
			switch f.Key {
			case "must":
				b.must = append(b.must, cl...)
			case "filter":
				b.filter = append(b.filter, cl...)
			case "should":
				b.should = append(b.should, cl...)
			default:
				b.mustNot = append(b.mustNot, cl...)
			}
		case "minimum_should_match":
			var ok bool
			if b.msm, ok = (opt{kind: kMSM}).check(f.Value); !ok {
				err = w.errf("minimum_should_match must be an integer or a string such as \"75%%\"")
			}
		case "boost":
			if b.boost = f.Value; !isNum(f.Value) {
				err = w.errf("boost must be a number")
			}
		case "_name":
			if _, ok := f.Value.(string); !ok {
				err = w.errf("_name must be a string")
			}
			b.name = f.Value
		default:
			err = w.unknown(f.Key, "bool option")
		}
		w.pop()
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// clauses reads a query or an array of queries. Empty objects and null
// are no clause (fix_query dropped empty filters).
func (w *walker) clauses(v any) ([]any, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case *sources.Doc:
		if v.Len() == 0 {
			return nil, nil
		}
		q, err := w.query(v)
		if err != nil {
			return nil, err
		}
		return []any{q}, nil
	case []any:
		out := make([]any, 0, len(v))
		for i, e := range v {
			if d, ok := asDoc(e); ok && d.Len() == 0 {
				continue
			}
			w.pushIdx(i)
			q, err := w.query(e)
			w.pop()
			if err != nil {
				return nil, err
			}
			out = append(out, q)
		}
		return out, nil
	}
	return nil, w.errf("expected a query or an array of queries")
}

// oneField reads {F: spec}, the shape of term, match, range, prefix...
func (w *walker) oneField(v any, what string) (string, any, error) {
	d, ok := asDoc(v)
	if !ok || d.Len() != 1 {
		return "", nil, w.errf("%s takes exactly one field", what)
	}
	f := d.Fields()[0]
	name, err := w.fieldKey(f.Key)
	return name, f.Value, err
}

// fieldQuery normalises {F: short} or {F: {options}} to
// {F: {main: value, options...}}; main is required.
func (w *walker) fieldQuery(v any, main string, short kind, spec []opt) (*sources.Doc, error) {
	what := w.at[len(w.at)-1].key
	name, val, err := w.oneField(v, what)
	if err != nil {
		return nil, err
	}
	d, ok := asDoc(val)
	if !ok {
		if _, ok := (opt{kind: short}).check(val); !ok {
			return nil, w.errf("%s on %s needs a %s", what, quote(name), map[kind]string{kScalar: "value", kString: "string"}[short])
		}
		d = doc1(main, val)
	}
	opts, err := w.options(d, what, spec)
	if err != nil {
		return nil, err
	}
	if !opts.Has(main) {
		return nil, w.errf("%s on %s needs %s", what, quote(name), quote(main))
	}
	return doc1(name, opts), nil
}

func (w *walker) term(v any) (*sources.Doc, error) {
	return w.fieldQuery(v, "value", kScalar, []opt{{name: "value", kind: kScalar},
		{name: "boost", kind: kNum}, {name: "case_insensitive", kind: kBool}})
}

// wildcard accepts the legacy "wildcard" key for the pattern.
func (w *walker) wildcard(v any) (*sources.Doc, error) {
	if d, ok := asDoc(v); ok && d.Len() == 1 {
		if spec, ok := asDoc(d.Fields()[0].Value); ok && spec.Has("wildcard") {
			if spec.Has("value") {
				return nil, w.errf("wildcard takes value or wildcard, not both")
			}
			fs := slices.Clone(spec.Fields())
			for i := range fs {
				if fs[i].Key == "wildcard" {
					fs[i].Key = "value"
				}
			}
			v = doc1(d.Fields()[0].Key, sources.NewDoc(fs...))
		}
	}
	return w.fieldQuery(v, "value", kString, []opt{{name: "value", kind: kString},
		{name: "case_insensitive", kind: kBool}, {name: "boost", kind: kNum}})
}

func (w *walker) terms(v any) (*sources.Doc, error) {
	d, ok := asDoc(v)
	if !ok {
		return nil, w.errf("terms must be an object")
	}
	var out []sources.Field
	var boost any
	for _, f := range d.Fields() {
		if f.Key == "boost" {
			if !isNum(f.Value) {
				return nil, w.errf("boost must be a number")
			}
			boost = f.Value
			continue
		}
		if len(out) > 0 {
			return nil, w.errf("terms takes exactly one field")
		}
		if f.Key == "_name" {
			return nil, w.unknown(f.Key, "terms option")
		}
		name, err := w.fieldKey(f.Key)
		if err != nil {
			return nil, err
		}
		if _, lookup := asDoc(f.Value); lookup {
			return nil, w.errf("terms lookups are not allowed")
		}
		arr, ok := f.Value.([]any)
		if !ok || slices.ContainsFunc(arr, func(e any) bool { _, ok := (opt{kind: kScalar}).check(e); return !ok }) {
			return nil, w.errf("terms on %s needs an array of values", quote(name))
		}
		out = append(out, sources.Field{Key: name, Value: arr})
	}
	if len(out) == 0 {
		return nil, w.errf("terms needs a field")
	}
	if boost != nil {
		out = append(out, sources.Field{Key: "boost", Value: boost})
	}
	return sources.NewDoc(out...), nil
}

func (w *walker) plainOptions(v any, what string, spec []opt) (*sources.Doc, error) {
	d, ok := asDoc(v)
	if !ok {
		return nil, w.errf("%s must be an object", what)
	}
	return w.options(d, what, spec)
}

func (w *walker) multiMatch(v any) (*sources.Doc, error) {
	d, ok := asDoc(v)
	if !ok {
		return nil, w.errf("multi_match must be an object")
	}
	opts, err := w.options(d, "multi_match", []opt{{name: "query", kind: kScalar},
		enum("type", "best_fields", "most_fields", "cross_fields", "phrase", "phrase_prefix", "bool_prefix"),
		enum("operator", "or", "and"), {name: "boost", kind: kNum}}, "fields")
	if err != nil {
		return nil, err
	}
	q, ok := opts.Get("query")
	if !ok {
		return nil, w.errf("multi_match needs a query")
	}
	fv, ok := d.Get("fields")
	if !ok {
		return nil, w.errf("multi_match needs fields")
	}
	fields, err := w.fieldList(fv)
	if err != nil {
		return nil, err
	}
	out := []sources.Field{{Key: "query", Value: q}, {Key: "fields", Value: fields}}
	return sources.NewDoc(append(out, opts.Fields()[1:]...)...), nil
}

// rangeQuery normalises the legacy from/to/include_lower/include_upper to
// gt/gte/lt/lte; a null bound is no bound.
func (w *walker) rangeQuery(v any) (*sources.Doc, error) {
	name, val, err := w.oneField(v, "range")
	if err != nil {
		return nil, err
	}
	d, ok := asDoc(val)
	if !ok {
		return nil, w.errf("range on %s must be an object", quote(name))
	}
	bounds := map[string]any{}
	for _, f := range d.Fields() {
		switch f.Key {
		case "gt", "gte", "lt", "lte", "from", "to":
			switch f.Value.(type) {
			case nil, string, int64, float64:
			default:
				return nil, w.errf("range bound %s must be a string or a number", quote(f.Key))
			}
			bounds[f.Key] = f.Value
		case "include_lower", "include_upper":
			if _, ok := f.Value.(bool); !ok {
				return nil, w.errf("%s must be true or false", f.Key)
			}
			bounds[f.Key] = f.Value
		}
	}
	out := make([]sources.Field, 0, 4)
	for _, side := range [2][4]string{{"from", "include_lower", "gt", "gte"}, {"to", "include_upper", "lt", "lte"}} {
		legacy, incl, excl, inclusive := side[0], side[1], side[2], side[3]
		lv, hasLegacy := bounds[legacy]
		_, hasIncl := bounds[incl]
		_, hasEx := bounds[excl]
		_, hasIn := bounds[inclusive]
		switch {
		case hasEx && hasIn, hasLegacy && (hasEx || hasIn):
			return nil, w.errf("range on %s has two %s bounds", quote(name), map[string]string{"from": "lower", "to": "upper"}[legacy])
		case hasIncl && !hasLegacy:
			return nil, w.errf("%s needs %s", incl, legacy)
		case hasLegacy:
			delete(bounds, legacy)
			if lv != nil {
				if in, _ := bounds[incl].(bool); in || !hasIncl {
					bounds[inclusive] = lv
				} else {
					bounds[excl] = lv
				}
			}
		}
		delete(bounds, incl)
	}
	for _, k := range []string{"gt", "gte", "lt", "lte"} {
		if b := bounds[k]; b != nil {
			out = append(out, sources.Field{Key: k, Value: b})
		}
	}
	opts, err := w.options(d, "range", []opt{{name: "format", kind: kString}, {name: "time_zone", kind: kString},
		enum("relation", "INTERSECTS", "CONTAINS", "WITHIN"), {name: "boost", kind: kNum}},
		"gt", "gte", "lt", "lte", "from", "to", "include_lower", "include_upper")
	if err != nil {
		return nil, err
	}
	return doc1(name, sources.NewDoc(append(out, opts.Fields()...)...)), nil
}

func (w *walker) exists(v any) (*sources.Doc, error) {
	d, ok := asDoc(v)
	if !ok {
		return nil, w.errf("exists must be an object")
	}
	if _, err := w.options(d, "exists", nil, "field"); err != nil {
		return nil, err
	}
	fv, _ := d.Get("field")
	s, ok := fv.(string)
	if !ok {
		return nil, w.errf("exists needs a field")
	}
	name, err := w.field(s)
	if err != nil {
		return nil, err
	}
	return doc1("field", name), nil
}

func (w *walker) ids(v any) (*sources.Doc, error) {
	d, ok := asDoc(v)
	if !ok {
		return nil, w.errf("ids must be an object")
	}
	if _, err := w.options(d, "ids", nil, "values"); err != nil {
		return nil, err
	}
	vals, _ := d.Get("values")
	arr, ok := vals.([]any)
	if !ok || slices.ContainsFunc(arr, func(e any) bool { _, ok := e.(string); return !ok }) {
		return nil, w.errf("ids needs values, an array of strings")
	}
	return doc1("values", arr), nil
}

// Options of query_string and simple_query_string passed through as
// they are; quote_field_suffix is not among them (it would rename fields,
// lock + _user).
var queryStringExtras = []opt{{name: "boost", kind: kNum}, {name: "analyze_wildcard", kind: kBool},
	{name: "allow_leading_wildcard", kind: kBool}, {name: "fuzziness", kind: kScalar},
	{name: "phrase_slop", kind: kInt}, {name: "minimum_should_match", kind: kMSM},
	enum("type", "best_fields", "most_fields", "cross_fields", "phrase", "phrase_prefix", "bool_prefix"),
	{name: "tie_breaker", kind: kNum}, {name: "time_zone", kind: kString},
	{name: "auto_generate_synonyms_phrase_query", kind: kBool}, {name: "fuzzy_max_expansions", kind: kInt},
	{name: "fuzzy_prefix_length", kind: kInt}, {name: "fuzzy_transpositions", kind: kBool},
	{name: "analyzer", kind: kString}, {name: "quote_analyzer", kind: kString}, {name: "escape", kind: kBool}}

var simpleQueryStringExtras = []opt{{name: "boost", kind: kNum}, {name: "flags", kind: kString},
	{name: "analyze_wildcard", kind: kBool}, {name: "minimum_should_match", kind: kMSM},
	{name: "auto_generate_synonyms_phrase_query", kind: kBool}, {name: "fuzzy_max_expansions", kind: kInt},
	{name: "fuzzy_prefix_length", kind: kInt}, {name: "fuzzy_transpositions", kind: kBool},
	{name: "analyzer", kind: kString}}

// textQuery validates the parts query_string and simple_query_string
// share and returns them in order: query, default_field, fields,
// default_operator, lenient, then the extras.
func (w *walker) textQuery(v any, what string, extras []opt, forceLenient bool) (*sources.Doc, error) {
	d, ok := asDoc(v)
	if !ok {
		return nil, w.errf("%s must be an object", what)
	}
	special := []string{"query", "fields", "default_operator", "lenient"}
	if what == "query_string" {
		special = append(special, "default_field")
	}
	opts, err := w.options(d, what, extras, special...)
	if err != nil {
		return nil, err
	}
	out := make([]sources.Field, 0, d.Len()+1)
	qv, _ := d.Get("query")
	text, ok := qv.(string)
	if !ok {
		return nil, w.errf("%s needs a query string", what)
	}
	if err := scanQueryString(text, func(f string) error {
		if hiddenField(w.res, f) {
			return w.errf("the query refers to field %s, which cannot be used", quote(f))
		}
		return nil
	}); err != nil {
		return nil, err
	}
	out = append(out, sources.Field{Key: "query", Value: text})
	if v, ok := d.Get("default_field"); ok {
		s, ok := v.(string)
		if !ok {
			return nil, w.errf("default_field must be a field name")
		}
		name, err := w.field(s)
		if err != nil {
			return nil, err
		}
		out = append(out, sources.Field{Key: "default_field", Value: name})
	}
	if v, ok := d.Get("fields"); ok {
		fields, err := w.fieldList(v)
		if err != nil {
			return nil, err
		}
		out = append(out, sources.Field{Key: "fields", Value: fields})
	}
	if v, ok := d.Get("default_operator"); ok {
		op, ok := enum("", "OR", "AND").check(v)
		if !ok {
			return nil, w.errf("default_operator must be AND or OR")
		}
		out = append(out, sources.Field{Key: "default_operator", Value: op})
	}
	lenient, ok := d.Get("lenient")
	if _, isBool := lenient.(bool); ok && !isBool {
		return nil, w.errf("lenient must be true or false")
	}
	if !ok && forceLenient {
		lenient, ok = true, true // fix_query: query_string gets lenient unless set
	}
	if ok {
		out = append(out, sources.Field{Key: "lenient", Value: lenient})
	}
	return sources.NewDoc(append(out, opts.Fields()...)...), nil
}

func (w *walker) queryString(v any) (*sources.Doc, error) {
	return w.textQuery(v, "query_string", queryStringExtras, true)
}

func (w *walker) simpleQueryString(v any) (*sources.Doc, error) {
	return w.textQuery(v, "simple_query_string", simpleQueryStringExtras, false)
}

// nested takes a query, or the legacy filter (rewritten to
// {"query": {"bool": {"filter": [...]}}}).
func (w *walker) nested(v any) (*sources.Doc, error) {
	d, ok := asDoc(v)
	if !ok {
		return nil, w.errf("nested must be an object")
	}
	opts, err := w.options(d, "nested", []opt{enum("score_mode", "avg", "sum", "min", "max", "none"),
		{name: "ignore_unmapped", kind: kBool}}, "path", "query", "filter")
	if err != nil {
		return nil, err
	}
	pv, _ := d.Get("path")
	ps, ok := pv.(string)
	if !ok {
		return nil, w.errf("nested needs a path")
	}
	path, err := w.field(ps)
	if err != nil {
		return nil, err
	}
	qv, hasQ := d.Get("query")
	fv, hasF := d.Get("filter")
	var q *sources.Doc
	switch {
	case hasQ && hasF:
		return nil, w.errf("nested takes query or filter, not both")
	case hasQ:
		w.push("query")
		q, err = w.query(qv)
		w.pop()
	case hasF:
		w.push("filter")
		var cl []any
		if cl, err = w.clauses(fv); err == nil {
			q = (&boolQ{filter: cl}).query()
		}
		w.pop()
	default:
		return nil, w.errf("nested needs a query")
	}
	if err != nil {
		return nil, err
	}
	out := []sources.Field{{Key: "path", Value: path}, {Key: "query", Value: q}}
	return sources.NewDoc(append(out, opts.Fields()...)...), nil
}

func (w *walker) constantScore(v any) (*sources.Doc, error) {
	d, ok := asDoc(v)
	if !ok {
		return nil, w.errf("constant_score must be an object")
	}
	opts, err := w.options(d, "constant_score", []opt{{name: "boost", kind: kNum}}, "filter")
	if err != nil {
		return nil, err
	}
	fv, ok := d.Get("filter")
	if !ok {
		return nil, w.errf("constant_score needs a filter")
	}
	w.push("filter")
	q, err := w.query(fv)
	w.pop()
	if err != nil {
		return nil, err
	}
	return sources.NewDoc(append([]sources.Field{{Key: "filter", Value: q}}, opts.Fields()...)...), nil
}

func (w *walker) disMax(v any) (*sources.Doc, error) {
	d, ok := asDoc(v)
	if !ok {
		return nil, w.errf("dis_max must be an object")
	}
	opts, err := w.options(d, "dis_max", []opt{{name: "tie_breaker", kind: kNum}, {name: "boost", kind: kNum}}, "queries")
	if err != nil {
		return nil, err
	}
	qv, _ := d.Get("queries")
	if _, ok := qv.([]any); !ok {
		return nil, w.errf("dis_max needs queries, an array")
	}
	w.push("queries")
	qs, err := w.clauses(qv)
	w.pop()
	if err != nil {
		return nil, err
	}
	if len(qs) == 0 {
		return nil, w.errf("dis_max needs at least one query")
	}
	return sources.NewDoc(append([]sources.Field{{Key: "queries", Value: qs}}, opts.Fields()...)...), nil
}
