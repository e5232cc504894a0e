package sandbox

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// A query is a compiled ES query: whether a document matches, and its
// crude score (see the package comment).
type query interface {
	eval(c *evalCtx, d *sources.Doc) (bool, float64)
}

// maxQueryDepth bounds the nesting of compiled queries.
const maxQueryDepth = 100

// compileQuery compiles {"<type>": {...}}.
func (env *searchEnv) compileQuery(v any, depth int) (query, error) {
	if depth > maxQueryDepth {
		return nil, invalid("query nested too deeply")
	}
	d, ok := normalize(v).(*sources.Doc)
	if !ok || d.Len() != 1 {
		return nil, invalid("a query must be an object with one key")
	}
	f := d.Fields()[0]
	body, ok := normalize(f.Value).(*sources.Doc)
	if !ok {
		return nil, invalid("%s needs an object", f.Key)
	}
	switch f.Key {
	case "bool":
		return env.compileBool(body, depth)
	case "term":
		return env.compileTerm(body)
	case "terms":
		return env.compileTerms(body)
	case "match", "match_phrase", "match_phrase_prefix", "match_bool_prefix":
		return env.compileMatch(f.Key, body)
	case "multi_match":
		return env.compileMultiMatch(body)
	case "match_all":
		return constQ{match: true, score: boostOf(body)}, nil
	case "match_none":
		return constQ{}, nil
	case "range":
		return env.compileRange(body)
	case "exists":
		name, ok := body.String("field")
		if !ok {
			return nil, invalid("exists needs a field")
		}
		fr, err := newFieldRef(name)
		if err != nil {
			return nil, err
		}
		return existsQ{f: fr, boost: boostOf(body)}, nil
	case "ids":
		vals, _ := body.Get("values")
		list, ok := normalize(vals).([]any)
		if !ok {
			return nil, invalid("ids needs values")
		}
		set := map[string]bool{}
		for _, e := range list {
			s, ok := sources.IDString(normalize(e))
			if !ok {
				return nil, invalid("ids values must be strings")
			}
			set[s] = true
		}
		return idsQ{set: set, boost: boostOf(body)}, nil
	case "prefix", "wildcard":
		return env.compilePattern(f.Key, body)
	case "query_string", "simple_query_string":
		return env.compileQueryString(f.Key, body, depth)
	case "nested":
		return env.compileNested(body, depth)
	case "constant_score":
		fq, ok := body.Get("filter")
		if !ok {
			return nil, invalid("constant_score needs a filter")
		}
		q, err := env.compileQuery(fq, depth+1)
		if err != nil {
			return nil, err
		}
		return constantScoreQ{q: q, boost: boostOf(body)}, nil
	case "dis_max":
		qs, err := env.compileList(body, "queries", depth)
		if err != nil {
			return nil, err
		}
		tie, _ := number(mustGet(body, "tie_breaker"))
		return disMaxQ{qs: qs, tie: tie, boost: boostOf(body)}, nil
	}
	return nil, invalid("unsupported query %q", f.Key)
}

func mustGet(d *sources.Doc, key string) any {
	v, _ := d.Get(key)
	return v
}

func boostOf(d *sources.Doc) float64 {
	if b, ok := number(mustGet(d, "boost")); ok {
		return b
	}
	return 1
}

// compileList compiles a clause list: an array of queries, or one query.
func (env *searchEnv) compileList(d *sources.Doc, key string, depth int) ([]query, error) {
	v, ok := d.Get(key)
	if !ok {
		return nil, nil
	}
	list, isList := normalize(v).([]any)
	if !isList {
		list = []any{v}
	}
	qs := make([]query, 0, len(list))
	for _, e := range list {
		q, err := env.compileQuery(e, depth+1)
		if err != nil {
			return nil, err
		}
		qs = append(qs, q)
	}
	return qs, nil
}

type constQ struct {
	match bool
	score float64
}

func (q constQ) eval(*evalCtx, *sources.Doc) (bool, float64) { return q.match, q.score }

// An msm is a minimum_should_match: an integer or a percentage of the
// optional clauses, negative meaning "all but".
type msm struct {
	set, pct bool
	n        int
}

func parseMSM(v any) (msm, error) {
	switch v := normalize(v).(type) {
	case nil:
		return msm{}, nil
	case int64:
		return msm{set: true, n: int(max(min(v, 1<<30), -1<<30))}, nil
	case float64:
		if v != math.Trunc(v) || math.Abs(v) > 1<<30 {
			return msm{}, invalid("bad minimum_should_match %v", v)
		}
		return msm{set: true, n: int(v)}, nil
	case string:
		s := strings.TrimSpace(v)
		pct := strings.HasSuffix(s, "%")
		n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
		if err != nil || n > 1<<30 || n < -1<<30 {
			return msm{}, invalid("unsupported minimum_should_match %q", v)
		}
		return msm{set: true, pct: pct, n: n}, nil
	}
	return msm{}, invalid("bad minimum_should_match")
}

// required is how many of total optional clauses must match, as ES
// computes it.
func (m msm) required(total int) int {
	r := m.n
	if m.pct {
		r = m.n * total / 100
	}
	if r < 0 {
		r += total
	}
	return max(r, 0)
}

type boolQ struct {
	must, filter, should, mustNot []query
	msm                           msm
	boost                         float64
}

func (env *searchEnv) compileBool(d *sources.Doc, depth int) (query, error) {
	q := boolQ{boost: boostOf(d)}
	for _, f := range d.Fields() {
		var err error
		switch f.Key {
		case "must":
			q.must, err = env.compileList(d, f.Key, depth)
		case "filter":
			q.filter, err = env.compileList(d, f.Key, depth)
		case "should":
			q.should, err = env.compileList(d, f.Key, depth)
		case "must_not":
			q.mustNot, err = env.compileList(d, f.Key, depth)
		case "minimum_should_match":
			q.msm, err = parseMSM(f.Value)
		case "boost", "_name", "adjust_pure_negative":
		default:
			err = invalid("unsupported bool key %q", f.Key)
		}
		if err != nil {
			return nil, err
		}
	}
	return q, nil
}

func (q boolQ) eval(c *evalCtx, d *sources.Doc) (bool, float64) {
	score := 0.0
	for _, m := range q.must {
		ok, s := m.eval(c, d)
		if !ok {
			return false, 0
		}
		score += s
	}
	for _, m := range q.filter {
		if ok, _ := m.eval(c, d); !ok {
			return false, 0
		}
	}
	for _, m := range q.mustNot {
		if ok, _ := m.eval(c, d); ok {
			return false, 0
		}
	}
	need := 0
	if q.msm.set {
		need = q.msm.required(len(q.should))
	}
	if len(q.must) == 0 && len(q.filter) == 0 && len(q.should) > 0 {
		need = max(need, 1)
	}
	if need > len(q.should) {
		return false, 0
	}
	matched := 0
	for i, m := range q.should {
		if len(q.should)-i+matched < need {
			return false, 0 // cannot reach need any more
		}
		if ok, s := m.eval(c, d); ok {
			matched++
			score += s
		}
	}
	if matched < need {
		return false, 0
	}
	if len(q.must) == 0 && len(q.should) == 0 && len(q.filter) == 0 {
		score = 1 // match_all, or the match_all ES adds to a pure negation
	}
	return true, score * q.boost
}

type disMaxQ struct {
	qs         []query
	tie, boost float64
}

func (q disMaxQ) eval(c *evalCtx, d *sources.Doc) (bool, float64) {
	found := false
	best, sum := 0.0, 0.0
	for _, m := range q.qs {
		if ok, s := m.eval(c, d); ok {
			found = true
			best = max(best, s)
			sum += s
		}
	}
	return found, (best + q.tie*(sum-best)) * q.boost
}

type constantScoreQ struct {
	q     query
	boost float64
}

func (q constantScoreQ) eval(c *evalCtx, d *sources.Doc) (bool, float64) {
	ok, _ := q.q.eval(c, d)
	return ok, q.boost
}

// fieldAndParams reads {F: {params}} or the short {F: value}, ignoring
// the top-level keys ES allows beside the field.
func fieldAndParams(kind string, d *sources.Doc, valueKey string) (fieldRef, *sources.Doc, error) {
	var name string
	var params *sources.Doc
	for _, f := range d.Fields() {
		switch f.Key {
		case "boost", "_name":
			continue
		}
		if name != "" {
			return fieldRef{}, nil, invalid("%s takes one field", kind)
		}
		name = f.Key
		if p, ok := normalize(f.Value).(*sources.Doc); ok {
			params = p
		} else {
			params = sources.D(valueKey, f.Value)
		}
	}
	if name == "" {
		return fieldRef{}, nil, invalid("%s needs a field", kind)
	}
	fr, err := newFieldRef(name)
	return fr, params, err
}

type termQ struct {
	f     fieldRef
	vals  []termVal
	ci    bool
	boost float64
}

func (env *searchEnv) compileTerm(d *sources.Doc) (query, error) {
	fr, p, err := fieldAndParams("term", d, "value")
	if err != nil {
		return nil, err
	}
	v, ok := p.Get("value")
	if !ok {
		return nil, invalid("term needs a value")
	}
	tv, err := newTermVal(v, env.now)
	if err != nil {
		return nil, err
	}
	ci, _ := normalize(mustGet(p, "case_insensitive")).(bool)
	return termQ{f: fr, vals: []termVal{tv}, ci: ci, boost: boostOf(p)}, nil
}

func (env *searchEnv) compileTerms(d *sources.Doc) (query, error) {
	var q termQ
	q.boost = boostOf(d)
	found := false
	for _, f := range d.Fields() {
		switch f.Key {
		case "boost", "_name":
			continue
		}
		if found {
			return nil, invalid("terms takes one field")
		}
		found = true
		fr, err := newFieldRef(f.Key)
		if err != nil {
			return nil, err
		}
		q.f = fr
		list, ok := normalize(f.Value).([]any)
		if !ok {
			return nil, invalid("terms needs an array of values")
		}
		for _, e := range list {
			tv, err := newTermVal(e, env.now)
			if err != nil {
				return nil, err
			}
			q.vals = append(q.vals, tv)
		}
	}
	if !found {
		return nil, invalid("terms needs a field")
	}
	return q, nil
}

func (q termQ) eval(c *evalCtx, d *sources.Doc) (bool, float64) {
	ok := c.visit(d, &q.f, func(v any, kw, html bool) bool {
		for i := range q.vals {
			if c.termMatches(v, kw, html, &q.vals[i], q.ci) {
				return true
			}
		}
		return false
	})
	return ok, q.boost
}

type existsQ struct {
	f     fieldRef
	boost float64
}

func (q existsQ) eval(c *evalCtx, d *sources.Doc) (bool, float64) {
	ok := c.visit(d, &q.f, func(v any, _, _ bool) bool { return hasValue(v, 0) })
	return ok, q.boost
}

// hasValue: null, empty arrays and objects holding no value are missing.
func hasValue(v any, depth int) bool {
	if depth > maxValueDepth {
		return false
	}
	switch v := normalize(v).(type) {
	case nil:
		return false
	case *sources.Doc:
		for _, f := range v.Fields() {
			if hasValue(f.Value, depth+1) {
				return true
			}
		}
		return false
	case []any:
		for _, e := range v {
			if hasValue(e, depth+1) {
				return true
			}
		}
		return false
	}
	return true
}

type idsQ struct {
	set   map[string]bool
	boost float64
}

func (q idsQ) eval(_ *evalCtx, d *sources.Doc) (bool, float64) {
	id, _ := d.Get("_id")
	s, ok := sources.IDString(normalize(id))
	return ok && q.set[s], q.boost
}

type patternQ struct {
	f      fieldRef
	prefix bool
	value  string
	lower  string
	ci     bool
	boost  float64
}

func (env *searchEnv) compilePattern(kind string, d *sources.Doc) (query, error) {
	fr, p, err := fieldAndParams(kind, d, "value")
	if err != nil {
		return nil, err
	}
	v, ok := p.Get("value")
	if !ok && kind == "wildcard" {
		v, ok = p.Get("wildcard")
	}
	s, isStr := normalize(v).(string)
	if !ok || !isStr {
		return nil, invalid("%s needs a string value", kind)
	}
	ci, _ := normalize(mustGet(p, "case_insensitive")).(bool)
	return patternQ{f: fr, prefix: kind == "prefix", value: s, lower: strings.ToLower(s), ci: ci, boost: boostOf(p)}, nil
}

func (q patternQ) test(s, pattern string) bool {
	if q.prefix {
		return strings.HasPrefix(s, pattern)
	}
	return globMatch(pattern, s)
}

func (q patternQ) eval(c *evalCtx, d *sources.Doc) (bool, float64) {
	ok := c.visit(d, &q.f, func(v any, kw, html bool) bool {
		var s string
		switch v := v.(type) {
		case string:
			s = v
		case sources.ObjectID:
			s, kw = v.Hex(), true
		default:
			return false
		}
		if q.test(s, q.value) || (q.ci && q.test(strings.ToLower(s), q.lower)) {
			return true
		}
		if kw {
			return false
		}
		pat := q.value
		if q.ci {
			pat = q.lower
		}
		for _, t := range c.env.an.analyze(s, html).tokens {
			if q.test(t, pat) {
				return true
			}
		}
		return false
	})
	return ok, q.boost
}

// matchQ is match, match_phrase, match_phrase_prefix, and each field of a
// multi_match or query_string term. With several fields, tokens found in
// any of them count (cross_fields).
type matchQ struct {
	fields  []fieldRef
	text    string
	tokens  []string
	tv      termVal // the query as a term, for fields that are not text
	and     bool
	msm     msm
	zeroAll bool
	phrase  bool
	prefix  bool // the last token is a prefix (match_phrase_prefix, match_bool_prefix)
	slop    int
	boost   float64
}

func (env *searchEnv) compileMatch(kind string, d *sources.Doc) (query, error) {
	fr, p, err := fieldAndParams(kind, d, "query")
	if err != nil {
		return nil, err
	}
	return env.newMatch(kind, []fieldRef{fr}, p)
}

func (env *searchEnv) newMatch(kind string, fields []fieldRef, p *sources.Doc) (*matchQ, error) {
	v, ok := p.Get("query")
	if !ok {
		return nil, invalid("%s needs a query", kind)
	}
	tv, err := newTermVal(v, env.now)
	if err != nil {
		return nil, err
	}
	q := &matchQ{fields: fields, text: tv.s, tokens: tokenize(tv.s, false), tv: tv, boost: boostOf(p)}
	switch kind {
	case "match_phrase":
		q.phrase = true
	case "match_phrase_prefix":
		q.phrase, q.prefix = true, true
	case "match_bool_prefix":
		q.prefix = true
	}
	if op, ok := p.String("operator"); ok {
		switch strings.ToLower(op) {
		case "and":
			q.and = true
		case "or":
		default:
			return nil, invalid("bad operator %q", op)
		}
	}
	if q.msm, err = parseMSM(mustGet(p, "minimum_should_match")); err != nil {
		return nil, err
	}
	if z, ok := p.String("zero_terms_query"); ok {
		q.zeroAll = strings.EqualFold(z, "all")
	}
	if s, ok := asInt(normalize(mustGet(p, "slop"))); ok && s > 0 {
		q.slop = int(min(s, 1<<20))
	}
	return q, nil
}

func (q *matchQ) eval(c *evalCtx, d *sources.Doc) (bool, float64) {
	if len(q.tokens) == 0 && !q.tv.isNum && !q.tv.isBool {
		return q.zeroAll, q.boost
	}
	var found []bool
	if !q.phrase {
		found = make([]bool, len(q.tokens))
	}
	count, whole := 0, false
	visit := func(v any, kw, html bool) bool {
		var s string
		switch x := v.(type) {
		case string:
			s = x
		case sources.ObjectID:
			s, kw = x.Hex(), true
		case nil, *sources.Doc:
			return false
		default:
			if c.termMatches(v, kw, html, &q.tv, false) {
				whole = true
				return true
			}
			return false
		}
		if kw {
			if s == q.text {
				whole = true
			}
			return whole
		}
		a := c.env.an.analyze(s, html)
		if q.phrase {
			if phraseAt(a.tokens, q.tokens, q.slop, q.prefix) {
				whole = true
			}
			return whole
		}
		for i, t := range q.tokens {
			if found[i] {
				continue
			}
			hit := false
			if q.prefix && i == len(q.tokens)-1 {
				for _, at := range a.tokens {
					if strings.HasPrefix(at, t) {
						hit = true
						break
					}
				}
			} else {
				hit = a.has(t)
			}
			if hit {
				found[i] = true
				count++
			}
		}
		return count == len(q.tokens)
	}
	for i := range q.fields {
		if c.visit(d, &q.fields[i], visit) {
			break
		}
	}
	switch {
	case whole:
		return true, q.boost
	case q.phrase || len(q.tokens) == 0:
		return false, 0
	case q.and:
		return count == len(q.tokens), q.boost * float64(count)
	}
	need := 1
	if q.msm.set {
		need = max(q.msm.required(len(q.tokens)), 1)
	}
	return count >= need, q.boost * float64(count)
}

// phraseAt reports whether the query tokens appear in order in the field's
// tokens with at most slop extra positions in total between them (ES's
// slop also allows transpositions; the sandbox does not).
func phraseAt(field, phrase []string, slop int, prefixLast bool) bool {
	if len(phrase) == 0 {
		return false
	}
	eq := func(i, j int) bool {
		if prefixLast && j == len(phrase)-1 {
			return strings.HasPrefix(field[i], phrase[j])
		}
		return field[i] == phrase[j]
	}
	for start := range field {
		if !eq(start, 0) {
			continue
		}
		pos, gaps, ok := start, 0, true
		for j := 1; j < len(phrase) && ok; j++ {
			next := -1
			for k := pos + 1; k < len(field) && k-pos-1+gaps <= slop; k++ {
				if eq(k, j) {
					next = k
					break
				}
			}
			if next < 0 {
				ok = false
				break
			}
			gaps += next - pos - 1
			pos = next
		}
		if ok {
			return true
		}
	}
	return false
}

func (env *searchEnv) compileMultiMatch(d *sources.Doc) (query, error) {
	var fields []fieldRef
	if fv, ok := d.Get("fields"); ok {
		list, ok := normalize(fv).([]any)
		if !ok {
			return nil, invalid("multi_match fields must be an array")
		}
		for _, e := range list {
			name, ok := normalize(e).(string)
			if !ok {
				return nil, invalid("multi_match fields must be strings")
			}
			fr, err := newFieldRef(stripBoost(name))
			if err != nil {
				return nil, err
			}
			fields = append(fields, fr)
		}
	}
	if len(fields) == 0 {
		fields = []fieldRef{{name: "*", all: true}}
	}
	kind := "match"
	typ, _ := d.String("type")
	switch typ {
	case "", "best_fields", "most_fields":
	case "cross_fields":
		return env.newMatch(kind, fields, d)
	case "phrase":
		kind = "match_phrase"
	case "phrase_prefix":
		kind = "match_phrase_prefix"
	case "bool_prefix":
		kind = "match_bool_prefix"
	default:
		return nil, invalid("unsupported multi_match type %q", typ)
	}
	dm := disMaxQ{boost: 1}
	if tie, ok := number(mustGet(d, "tie_breaker")); ok {
		dm.tie = tie
	}
	if typ == "most_fields" {
		dm.tie = 1
	}
	for _, f := range fields {
		m, err := env.newMatch(kind, []fieldRef{f}, d)
		if err != nil {
			return nil, err
		}
		dm.qs = append(dm.qs, m)
	}
	return dm, nil
}

// stripBoost removes a ^boost suffix from a field name.
func stripBoost(name string) string {
	if i := strings.LastIndexByte(name, '^'); i > 0 {
		if _, err := strconv.ParseFloat(name[i+1:], 64); err == nil {
			return name[:i]
		}
	}
	return name
}

// A bound is one side of a range, read every way the stored values may
// need it.
type bound struct {
	op     string // gt gte lt lte
	num    float64
	isNum  bool
	str    string
	isStr  bool
	ms     int64
	isTime bool
}

func (b bound) holds(c int) bool {
	switch b.op {
	case "gt":
		return c > 0
	case "gte":
		return c >= 0
	case "lt":
		return c < 0
	}
	return c <= 0
}

type rangeQ struct {
	f      fieldRef
	bounds []bound
	boost  float64
}

func (env *searchEnv) compileRange(d *sources.Doc) (query, error) {
	fr, p, err := fieldAndParams("range", d, "")
	if err != nil {
		return nil, err
	}
	format, _ := p.String("format")
	tz, _ := p.String("time_zone")
	dp, err := newDateParser(env.now, format, tz)
	if err != nil {
		return nil, err
	}
	q := rangeQ{f: fr, boost: boostOf(p)}
	for _, f := range p.Fields() {
		op := f.Key
		switch op {
		case "from", "to", "include_lower", "include_upper":
			return nil, invalid("range %s is not supported; use gt, gte, lt, lte", op)
		case "gt", "gte", "lt", "lte":
		case "format", "time_zone", "relation", "boost", "_name":
			continue
		default:
			return nil, invalid("unsupported range key %q", op)
		}
		v := normalize(f.Value)
		if v == nil {
			continue // an open end
		}
		b := bound{op: op}
		switch x := v.(type) {
		case int64:
			b.num, b.isNum = float64(x), true
		case float64:
			b.num, b.isNum = x, true
		case string:
			b.str, b.isStr = x, true
			b.num, b.isNum = parseNumber(x)
		case time.Time:
		case sources.ObjectID:
			b.str, b.isStr = x.Hex(), true
		default:
			return nil, invalid("bad range bound %v", f.Value)
		}
		if !b.isNum || format != "" || b.isStr {
			t, ok, err := dp.parse(v, op == "gt" || op == "lte")
			if err != nil {
				return nil, err
			}
			if ok {
				b.ms, b.isTime = t.UnixMilli(), true
			}
		} else {
			b.ms, b.isTime = dp.fromNumber(b.num).UnixMilli(), true
		}
		q.bounds = append(q.bounds, b)
	}
	return q, nil
}

func (q rangeQ) eval(c *evalCtx, d *sources.Doc) (bool, float64) {
	ok := c.visit(d, &q.f, func(v any, kw, _ bool) bool {
		switch v := v.(type) {
		case int64:
			return q.numeric(float64(v))
		case float64:
			return q.numeric(v)
		case time.Time:
			return q.date(v.UnixMilli())
		case sources.ObjectID:
			return q.str(v.Hex())
		case string:
			if !kw {
				if a := c.env.an.analyze(v, false); a.isDate {
					return q.date(a.date.UnixMilli())
				}
				if n, ok := parseNumber(v); ok && q.allNum() {
					return q.numeric(n)
				}
			}
			return q.str(v)
		}
		return false
	})
	return ok, q.boost
}

func (q rangeQ) allNum() bool {
	for _, b := range q.bounds {
		if !b.isNum {
			return false
		}
	}
	return true
}

func (q rangeQ) numeric(n float64) bool {
	for _, b := range q.bounds {
		if !b.isNum || !b.holds(compareFloat(n, b.num)) {
			return false
		}
	}
	return true
}

func (q rangeQ) date(ms int64) bool {
	for _, b := range q.bounds {
		if !b.isTime || !b.holds(compareInt(ms, b.ms)) {
			return false
		}
	}
	return true
}

func (q rangeQ) str(s string) bool {
	for _, b := range q.bounds {
		if !b.isStr || !b.holds(strings.Compare(s, b.str)) {
			return false
		}
	}
	return true
}

func compareFloat(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func compareInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

type nestedQ struct {
	path  string
	segs  []string
	q     query
	mode  string
	boost float64
}

func (env *searchEnv) compileNested(d *sources.Doc, depth int) (query, error) {
	path, ok := d.String("path")
	if !ok {
		return nil, invalid("nested needs a path")
	}
	fr, err := newFieldRef(path)
	if err != nil || fr.all || fr.pattern || fr.isID || fr.base != "" {
		return nil, invalid("bad nested path %q", path)
	}
	inner, ok := d.Get("query")
	if !ok {
		return nil, invalid("nested needs a query")
	}
	q, err := env.compileQuery(inner, depth+1)
	if err != nil {
		return nil, err
	}
	mode, _ := d.String("score_mode")
	switch mode {
	case "":
		mode = "avg"
	case "avg", "sum", "max", "min", "none":
	default:
		return nil, invalid("bad score_mode %q", mode)
	}
	return nestedQ{path: path, segs: fr.segs, q: q, mode: mode, boost: boostOf(d)}, nil
}

// elems returns the nested documents at path in the current scope.
func (c *evalCtx) elems(d *sources.Doc, path string, segs []string) []*sources.Doc {
	var out []*sources.Doc
	c.walk(d, path, segs, func(v any) bool {
		if e, ok := v.(*sources.Doc); ok && e != nil {
			out = append(out, e)
		}
		return false
	})
	return out
}

func (q nestedQ) eval(c *evalCtx, d *sources.Doc) (bool, float64) {
	var n int
	var sum, best, least float64
	for _, e := range c.elems(d, q.path, q.segs) {
		c.scopes = append(c.scopes, scope{path: q.path, elem: e})
		ok, s := q.q.eval(c, d)
		c.scopes = c.scopes[:len(c.scopes)-1]
		if !ok {
			continue
		}
		if n == 0 || s < least {
			least = s
		}
		n++
		sum += s
		best = max(best, s)
	}
	if n == 0 {
		return false, 0
	}
	var s float64
	switch q.mode {
	case "avg":
		s = sum / float64(n)
	case "sum":
		s = sum
	case "max":
		s = best
	case "min":
		s = least
	}
	return true, s * q.boost
}

// describe renders a value for error messages, shortened.
func describe(v any) string {
	return fmt.Sprintf("%.100s", codec.AppendJSON(nil, v))
}
