package query

import (
	"errors"
	"slices"
	"strings"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// decode parses a JSON parameter value strictly (duplicate keys, invalid
// UTF-8 and trailing data refused) and no deeper than maxDepth.
func decode(name, raw string) (any, error) {
	v, err := codec.DecodeJSON([]byte(raw), codec.DecodeOptions{Strict: true, MaxDepth: maxDepth})
	if err == nil {
		return v, nil
	}
	if errors.Is(err, codec.ErrTooDeep) {
		return nil, badf("%s: nested more than %d levels deep", name, maxDepth)
	}
	if se, ok := errors.AsType[*codec.SyntaxError](err); ok {
		return nil, badf("%s: invalid JSON: %s", name, se.Error())
	}
	return nil, badf("%s: invalid JSON", name)
}

// pathProblem says what is wrong with a field path, "" if nothing: it must
// be non-empty dotted names, no empty segment, no segment starting with $,
// no NUL, at most maxPathLen bytes.
func pathProblem(p string) string {
	switch {
	case p == "":
		return "empty field name"
	case len(p) > maxPathLen:
		return "field name longer than 256 bytes"
	case strings.IndexByte(p, 0) >= 0:
		return "field name contains NUL"
	}
	for seg := range strings.SplitSeq(p, ".") {
		if seg == "" {
			return "field name " + quote(p) + " has an empty segment"
		}
		if seg[0] == '$' {
			return "field name " + quote(p) + " has a segment starting with $"
		}
	}
	return ""
}

func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strings.ToValidUTF8(`"`+strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`)+`"`, "?")
}

// isPattern reports whether a field name is a wildcard pattern.
func isPattern(name string) bool { return strings.ContainsAny(name, "*?") }

// hiddenField reports whether a client may not use name: it is hidden
// (sources.Resource.Hidden), or it is a wildcard pattern that could match
// a hidden field, a document holding one, or anything inside one.
//
// It is the one rule every parameter naming a field goes through (where,
// sort, projection, projections, source, filter, q, df), so a path at or
// below an excluded field is refused however it is spelt: dotted,
// through array indexes (a.0.b), in another case, or as a pattern.
func hiddenField(res *sources.Resource, name string) bool {
	if res.Hidden(name) {
		return true
	}
	if !isPattern(name) {
		return false
	}
	name = sources.FoldName(name)
	for _, x := range res.Excluded {
		if !res.Hidden(x) {
			continue // a queryable timestamp
		}
		if newGlob(name).reachesField(x) {
			return true
		}
		for _, n := range res.Nested {
			// n.<any name>.x is shaped like a top-level x.
			g := newGlob(name)
			if g.feed(n+".") && g.anyNameThenDot() && g.reachesField(x) {
				return true
			}
		}
	}
	return false
}

// A glob runs a field pattern (* any run of characters, ? any one) as an
// NFA over pattern positions, so it can say whether a pattern could match
// any string of a family, not just one string.
type glob struct {
	p   string
	cur []bool
}

func newGlob(p string) *glob {
	g := &glob{p: p, cur: make([]bool, len(p)+1)}
	g.cur[0] = true
	g.close(g.cur)
	return g
}

func (g *glob) clone() *glob { return &glob{p: g.p, cur: slices.Clone(g.cur)} }

// close adds the positions after each star the set is at (a star may
// match nothing); one forward pass suffices as the edges go forward.
func (g *glob) close(s []bool) {
	for i := 0; i < len(g.p); i++ {
		if s[i] && g.p[i] == '*' {
			s[i+1] = true
		}
	}
}

// step consumes one byte (anyNonDot: any byte but '.') and reports
// whether the pattern can still match.
func (g *glob) step(c byte, anyNonDot bool) bool {
	next := make([]bool, len(g.cur))
	alive := false
	for i := 0; i < len(g.p); i++ {
		if !g.cur[i] {
			continue
		}
		switch pc := g.p[i]; {
		case pc == '*':
			next[i] = true
		case pc == '?', anyNonDot && pc != '.', !anyNonDot && pc == c:
			next[i+1] = true
		default:
			continue
		}
		alive = true
	}
	g.close(next)
	g.cur = next
	return alive
}

func (g *glob) feed(s string) bool {
	for i := 0; i < len(s); i++ {
		if !g.step(s[i], false) {
			return false
		}
	}
	return true
}

func (g *glob) accepts() bool { return g.cur[len(g.p)] }

// anyNameThenDot consumes one or more characters other than '.' (every
// possible name at once), then a '.'.
func (g *glob) anyNameThenDot() bool {
	if !g.step(0, true) {
		return false
	}
	acc := slices.Clone(g.cur)
	for {
		g.step(0, true)
		grew := false
		for i, on := range g.cur {
			if on && !acc[i] {
				acc[i], grew = true, true
			}
		}
		g.cur = slices.Clone(acc)
		if !grew {
			break
		}
	}
	return g.feed(".")
}

// reachesField reports whether, from here, the pattern could match x, a
// dotted prefix of x (a document holding x), or x followed by '.' and
// anything (a field inside x, such as x.keyword).
func (g *glob) reachesField(x string) bool {
	h := g.clone()
	for i := 0; i < len(x); i++ {
		if !h.step(x[i], false) {
			return false
		}
		if (i+1 == len(x) || x[i+1] == '.') && h.accepts() {
			return true
		}
	}
	return h.step('.', false)
}

// parseProjection reads projection (or, on search lists when projection
// is absent, eve-elastic's projections list) into q.Fields and keys it in
// canonical form: an object of the fields kept (1) or dropped (0).
func (p *parser) parseProjection() error {
	name := "projection"
	raw := p.args.first(name)
	if raw == "" && p.search() {
		name = "projections"
		raw = p.args.first(name)
	}
	if raw == "" {
		return nil
	}
	v, err := decode(name, raw)
	if err != nil {
		return err
	}
	var incl, excl []string
	switch v := v.(type) {
	case *sources.Doc:
		if name == "projections" {
			return badf("projections: must be a JSON array of field names")
		}
		for _, f := range v.Fields() {
			on, ok := projectionFlag(f.Value)
			if !ok {
				return badf("projection: the value of %s must be 0, 1, true or false", quote(f.Key))
			}
			if on {
				incl = append(incl, f.Key)
			} else {
				excl = append(excl, f.Key)
			}
		}
	case []any:
		if name == "projection" {
			// Eve takes an object only; eve-elastic's projections is
			// the array form.
			return badf("projection: must be a JSON object of 0/1, not an array")
		}
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return badf("%s: an array must hold field names", name)
			}
			incl = append(incl, s)
		}
	default:
		if name == "projections" {
			return badf("projections: must be a JSON array of field names")
		}
		return badf("projection: must be a JSON object of 0/1")
	}
	for _, f := range append(slices.Clip(incl), excl...) {
		if msg := pathProblem(f); msg != "" {
			return badf("projection: %s", msg)
		}
		if hiddenField(p.res, f) {
			return badf("projection: field %s cannot be used", quote(f))
		}
	}
	proj := sources.Projection{Fields: incl}
	if len(incl) == 0 {
		// _id is always returned: excluding it is a no-op.
		proj = sources.Projection{Fields: slices.DeleteFunc(excl, func(f string) bool { return f == "_id" }), Exclude: true}
	}
	slices.Sort(proj.Fields)
	proj.Fields = slices.Compact(proj.Fields)
	if a, b, ok := overlap(proj.Fields); ok {
		return badf("projection: fields %s and %s overlap", quote(a), quote(b))
	}
	if proj.IsZero() {
		return nil
	}
	p.q.Fields = proj
	flag := int64(1)
	if proj.Exclude {
		flag = 0
	}
	canon := make([]sources.Field, len(proj.Fields))
	for i, f := range proj.Fields {
		canon[i] = sources.Field{Key: f, Value: flag}
	}
	p.keep("projection", string(codec.AppendCanonicalJSON(nil, sources.NewDoc(canon...))))
	return nil
}

// projectionFlag reads a projection value: 0, 1, true or false. Anything
// else (a "$password" expression, an operator object) is refused: MongoDB
// would evaluate it.
func projectionFlag(v any) (on, ok bool) {
	switch v := v.(type) {
	case bool:
		return v, true
	case int64:
		return v == 1, v == 0 || v == 1
	}
	return false, false
}

// overlap finds two fields of a sorted list where one is inside the other
// (a and a.b), which MongoDB refuses as a path collision.
func overlap(fields []string) (string, string, bool) {
	set := make(map[string]bool, len(fields))
	for _, f := range fields {
		set[f] = true
	}
	for _, f := range fields {
		for i := 0; i < len(f); i++ {
			if f[i] == '.' && set[f[:i]] {
				return f[:i], f, true
			}
		}
	}
	return "", "", false
}
