package sandbox

import (
	"strconv"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// A searchEnv is what one search (or one Store) evaluates queries with.
type searchEnv struct {
	now time.Time
	an  *analyzer
	// resource is the value of _resource for documents that have none:
	// Superdesk's indexer stores the resource name in every document.
	resource string
}

// An evalCtx evaluates a query against documents; nested queries push
// scopes.
type evalCtx struct {
	env    *searchEnv
	scopes []scope
}

// A scope is one element of a nested array being evaluated: field paths
// under path resolve in elem.
type scope struct {
	path string
	elem *sources.Doc
}

// A fieldRef is a field a query names.
type fieldRef struct {
	name string   // as written
	segs []string // of name
	// base is name without a .keyword/.raw suffix: the exact value of the
	// field at base is meant.
	base     string
	baseSegs []string
	html     bool // body_html: analysed with tags stripped
	all      bool // "*": every field
	pattern  bool // a field name with *
	isID     bool // _id, a keyword
}

func newFieldRef(name string) (fieldRef, error) {
	if name == "" || len(name) > 1024 {
		return fieldRef{}, invalid("bad field name %q", name)
	}
	f := fieldRef{name: name}
	switch {
	case name == "*" || name == "*.*":
		f.all = true
		return f, nil
	case strings.Contains(name, "*"):
		f.pattern = true
		return f, nil
	case name == "_id":
		f.isID = true
		return f, nil
	}
	f.segs = strings.Split(name, ".")
	for _, s := range f.segs {
		if s == "" {
			return fieldRef{}, invalid("bad field name %q", name)
		}
	}
	for _, suffix := range []string{".keyword", ".raw"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			f.base = base
			f.baseSegs = f.segs[:len(f.segs)-1]
		}
	}
	path := name
	if f.base != "" {
		path = f.base
	}
	f.html = isHTMLField(path)
	return f, nil
}

// visitor receives one value of a field: kw when the value is meant
// exactly (a keyword), html when it is analysed as HTML. It returns true
// to stop.
type visitor func(v any, kw, html bool) bool

// visit calls fn for each value the field holds in d, arrays flattened as
// ES flattens them. It reports whether fn stopped.
func (c *evalCtx) visit(d *sources.Doc, f *fieldRef, fn visitor) bool {
	switch {
	case f.isID:
		id, _ := d.Get("_id")
		if s, ok := sources.IDString(normalize(id)); ok {
			return fn(s, true, false)
		}
		return false
	case f.all:
		return visitLeaves(c.root(d), "", func(path string, v any) bool {
			return path != "_id" && fn(v, false, isHTMLField(path))
		})
	case f.pattern:
		return visitLeaves(c.root(d), "", func(path string, v any) bool {
			if !simpleMatch(f.name, path) {
				return false
			}
			return fn(v, false, isHTMLField(path))
		})
	}
	if f.base != "" {
		// The exact value of base if base holds values; otherwise a real
		// field named *.keyword or *.raw.
		scalar := false
		c.walk(d, f.base, f.baseSegs, func(v any) bool {
			_, isDoc := v.(*sources.Doc)
			scalar = !isDoc
			return scalar
		})
		if scalar {
			return c.walk(d, f.base, f.baseSegs, func(v any) bool { return fn(v, true, false) })
		}
	}
	return c.walk(d, f.name, f.segs, func(v any) bool { return fn(v, false, f.html) })
}

// root is the document the current scope evaluates: the nested element,
// or d.
func (c *evalCtx) root(d *sources.Doc) *sources.Doc {
	if n := len(c.scopes); n > 0 {
		return c.scopes[n-1].elem
	}
	return d
}

// walk resolves a path in the current scope. Inside a nested query only
// paths under the nested path have values, as in ES.
func (c *evalCtx) walk(d *sources.Doc, path string, segs []string, fn func(any) bool) bool {
	if n := len(c.scopes); n > 0 {
		s := c.scopes[n-1]
		if !strings.HasPrefix(path, s.path+".") {
			return false
		}
		return esWalk(s.elem, segs[strings.Count(s.path, ".")+1:], fn)
	}
	if len(segs) == 1 && segs[0] == "_resource" && !d.Has("_resource") && c.env.resource != "" {
		return fn(c.env.resource)
	}
	return esWalk(d, segs, fn)
}

// esWalk calls fn for the values at segs under v, arrays flattened at
// every level.
func esWalk(v any, segs []string, fn func(any) bool) bool {
	v = normalize(v)
	if a, ok := v.([]any); ok {
		for _, e := range a {
			if esWalk(e, segs, fn) {
				return true
			}
		}
		return false
	}
	if len(segs) == 0 {
		return fn(v)
	}
	d, ok := v.(*sources.Doc)
	if !ok {
		return false
	}
	next, ok := d.Get(segs[0])
	if !ok {
		return false
	}
	return esWalk(next, segs[1:], fn)
}

// visitLeaves calls fn with the dotted path and value of every scalar in
// v, arrays flattened.
func visitLeaves(v any, prefix string, fn func(path string, v any) bool) bool {
	return visitLeavesDepth(v, prefix, fn, 0)
}

func visitLeavesDepth(v any, prefix string, fn func(path string, v any) bool, depth int) bool {
	if depth > maxValueDepth {
		return false
	}
	switch x := normalize(v).(type) {
	case *sources.Doc:
		for _, f := range x.Fields() {
			p := f.Key
			if prefix != "" {
				p = prefix + "." + f.Key
			}
			if visitLeavesDepth(f.Value, p, fn, depth+1) {
				return true
			}
		}
		return false
	case []any:
		for _, e := range x {
			if visitLeavesDepth(e, prefix, fn, depth+1) {
				return true
			}
		}
		return false
	case nil:
		return false
	default:
		return fn(prefix, x)
	}
}

// A termVal is a value a term-level query compares with: its string form
// and, when it reads as one, a number, a boolean and a date range (a date
// without a time matches the whole day, as ES's date term query does).
type termVal struct {
	s, lower     string
	num          float64
	isNum        bool
	b, isBool    bool
	tLo, tHi     int64 // epoch millis
	isTime       bool
	isStringForm bool // the query value was a string
}

func newTermVal(v any, now time.Time) (termVal, error) {
	var t termVal
	switch v := normalize(v).(type) {
	case string:
		t.s = v
		t.isStringForm = true
		if n, ok := parseNumber(v); ok {
			t.num, t.isNum = n, true
		}
		switch v {
		case "true":
			t.b, t.isBool = true, true
		case "false":
			t.isBool = true
		}
		if !t.isNum || len(v) == 4 {
			p := &dateParser{now: now, loc: time.UTC}
			lo, ok1, err1 := p.parse(v, false)
			hi, ok2, err2 := p.parse(v, true)
			if err1 == nil && err2 == nil && ok1 && ok2 {
				t.tLo, t.tHi, t.isTime = lo.UnixMilli(), hi.UnixMilli(), true
			}
		}
	case int64:
		t.s = strconv.FormatInt(v, 10)
		t.num, t.isNum = float64(v), true
		t.tLo, t.tHi, t.isTime = v, v, true
	case float64:
		t.s = string(codec.AppendJSON(nil, v))
		t.num, t.isNum = v, true
		t.tLo, t.tHi, t.isTime = int64(v), int64(v), true
	case bool:
		t.s = strconv.FormatBool(v)
		t.b, t.isBool = v, true
	case time.Time:
		t.s = v.UTC().Format(sources.DateLayout)
		t.tLo, t.tHi, t.isTime = v.UnixMilli(), v.UnixMilli(), true
	case sources.ObjectID:
		t.s = v.Hex()
	default:
		return t, invalid("a term value must be a string, number or boolean, not %T", v)
	}
	t.lower = strings.ToLower(t.s)
	return t, nil
}

// parseNumber reads a decimal number; unlike strconv it refuses NaN,
// infinities, hex and underscores.
func parseNumber(s string) (float64, bool) {
	if s == "" || len(s) > 64 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9') && c != '.' && c != '-' && c != '+' && c != 'e' && c != 'E' {
			return 0, false
		}
	}
	n, err := strconv.ParseFloat(s, 64)
	return n, err == nil
}

// termMatches applies the term rule (see the package comment) to one
// stored value.
func (c *evalCtx) termMatches(v any, kw, html bool, t *termVal, ci bool) bool {
	switch v := v.(type) {
	case string:
		return c.stringTerm(v, kw, html, t, ci)
	case sources.ObjectID:
		return c.stringTerm(v.Hex(), true, false, t, ci)
	case int64:
		return t.isNum && float64(v) == t.num
	case float64:
		return t.isNum && v == t.num
	case bool:
		return t.isBool && v == t.b
	case time.Time:
		ms := v.UnixMilli()
		return t.isTime && ms >= t.tLo && ms <= t.tHi
	}
	return false
}

func (c *evalCtx) stringTerm(s string, kw, html bool, t *termVal, ci bool) bool {
	if s == t.s || (ci && strings.ToLower(s) == t.lower) {
		return true
	}
	if kw {
		return false
	}
	a := c.env.an.analyze(s, html)
	if t.isTime && a.isDate {
		if ms := a.date.UnixMilli(); ms >= t.tLo && ms <= t.tHi {
			return true
		}
	}
	if ci {
		return a.has(t.lower)
	}
	return a.has(t.s)
}
