package sandbox

import (
	"strconv"
	"strings"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/grammar"
)

// query_string and simple_query_string: a documented subset of Lucene's
// classic syntax (see the package comment), compiled to the same query
// nodes as the JSON queries.

type qsTokenKind int

const (
	qsTerm   qsTokenKind = iota // a word, possibly field:word
	qsPhrase                    // "..."
	qsRange                     // [a TO b] or {a TO b}
	qsOpen                      // (
	qsClose                     // )
	qsAnd                       // AND && (query_string), + between terms (simple)
	qsOr                        // OR || (query_string), | (simple)
	qsNot                       // NOT ! (query_string)
	qsPlus                      // + modifier (query_string)
	qsMinus                     // - modifier
	qsEOF
)

type qsToken struct {
	kind  qsTokenKind
	field string // field: prefix, unescaped
	text  string // term text (escapes kept for wildcard terms), phrase, or range
	slop  int
	// Range parts.
	lo, hi         string
	loIncl, hiIncl bool
}

// lexQueryString reads the tokens of grammar's lexer (the one the
// server's validator scans) into the parser's: a field name and its colon
// become the field of the token after them, ~N after a term or phrase its
// slop, field:>x and the like a range.
func lexQueryString(s string, simple bool) ([]qsToken, error) {
	var toks []grammar.Token
	if simple {
		toks = grammar.LexSimpleQueryString(s)
	} else {
		toks = grammar.LexQueryString(s)
	}
	var out []qsToken
	i := 0
	// slop reads the ~N and ^N after the token before toks[i] and returns
	// the slop.
	slop := func() int {
		n := 0
		for i < len(toks) && (toks[i].Kind == grammar.Fuzzy || toks[i].Kind == grammar.Boost) {
			if toks[i].Kind == grammar.Fuzzy {
				if v, err := strconv.Atoi(toks[i].Text); err == nil {
					n = v
				}
			}
			i++
		}
		return n
	}
	for i < len(toks) {
		t := toks[i]
		i++
		var field string
		if t.Kind == grammar.Term && i < len(toks) && toks[i].Kind == grammar.Colon {
			field = grammar.Unescape(t.Text)
			i++
			if i >= len(toks) {
				return nil, invalid("query_string: nothing after %s:", field)
			}
			t = toks[i]
			i++
		}
		switch t.Kind {
		case grammar.Term:
			if field != "" && (strings.HasPrefix(t.Text, ">") || strings.HasPrefix(t.Text, "<")) {
				r, err := compareTok(field, t.Text)
				if err != nil {
					return nil, err
				}
				out = append(out, r)
				continue
			}
			out = append(out, qsToken{kind: qsTerm, field: field, text: t.Text, slop: slop()})
			continue
		case grammar.Regexp:
			// Not supported: the expression is a literal term.
			out = append(out, qsToken{kind: qsTerm, field: field, text: "/" + t.Text + "/", slop: slop()})
			continue
		case grammar.Phrase:
			out = append(out, qsToken{kind: qsPhrase, field: field, text: t.Text, slop: slop()})
			continue
		case grammar.Range:
			r, err := rangeTok(field, t)
			if err != nil {
				return nil, err
			}
			slop()
			out = append(out, r)
			continue
		case grammar.Open:
			out = append(out, qsToken{kind: qsOpen, field: field}) // field:(a b): the group's default field
			continue
		}
		if field != "" {
			return nil, invalid("query_string: nothing after %s:", field)
		}
		switch t.Kind {
		case grammar.Close:
			out = append(out, qsToken{kind: qsClose})
		case grammar.And:
			out = append(out, qsToken{kind: qsAnd})
		case grammar.Or:
			out = append(out, qsToken{kind: qsOr})
		case grammar.Not:
			out = append(out, qsToken{kind: qsNot})
		case grammar.Plus:
			out = append(out, qsToken{kind: qsPlus})
		case grammar.Minus:
			out = append(out, qsToken{kind: qsMinus})
		case grammar.Stray:
			if t.Text == `"` {
				return nil, invalid("query_string: unterminated phrase")
			}
			// Another lone special character: ignored, as lenient parsing would.
		}
		// A colon with no field before it, or a ^ or ~ after a group: ignored.
	}
	return append(out, qsToken{kind: qsEOF}), nil
}

func rangeTok(field string, t grammar.Token) (qsToken, error) {
	if t.Closed == 0 {
		return qsToken{}, invalid("query_string: unterminated range")
	}
	if len(t.Parts) != 3 || t.Parts[1] != "TO" {
		return qsToken{}, invalid("query_string: ranges are [a TO b]")
	}
	return qsToken{kind: qsRange, field: field, lo: unquote(t.Parts[0]), hi: unquote(t.Parts[2]),
		loIncl: t.Open == '[', hiIncl: t.Closed == ']'}, nil
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// compareTok reads the >x, >=x, <x or <=x of field:>x.
func compareTok(field, text string) (qsToken, error) {
	op := text[:1]
	if len(text) > 1 && text[1] == '=' {
		op = text[:2]
	}
	v := text[len(op):]
	if v == "" {
		return qsToken{}, invalid("query_string: nothing after %s", op)
	}
	t := qsToken{kind: qsRange, field: field, lo: "*", hi: "*"}
	switch op {
	case ">":
		t.lo = v
	case ">=":
		t.lo, t.loIncl = v, true
	case "<":
		t.hi = v
	case "<=":
		t.hi, t.hiIncl = v, true
	}
	return t, nil
}

// The parser builds Lucene's clause lists: each clause MUST, SHOULD or
// MUST_NOT, by QueryParserBase.addClause's rules.

type occur int

const (
	occShould occur = iota
	occMust
	occMustNot
)

type qsClause struct {
	q   query
	occ occur
}

type qsParser struct {
	env    *searchEnv
	toks   []qsToken
	pos    int
	and    bool // default_operator AND
	fields []fieldRef
	depth  int
	simple bool
}

func (env *searchEnv) compileQueryString(kind string, d *sources.Doc, depth int) (query, error) {
	text, ok := d.String("query")
	if !ok {
		return nil, invalid("%s needs a query string", kind)
	}
	p := &qsParser{env: env, depth: depth, simple: kind == "simple_query_string"}
	if op, ok := d.String("default_operator"); ok {
		switch strings.ToUpper(op) {
		case "AND":
			p.and = true
		case "OR":
		default:
			return nil, invalid("bad default_operator %q", op)
		}
	}
	var names []string
	if df, ok := d.String("default_field"); ok {
		names = append(names, df)
	}
	if fv, ok := d.Get("fields"); ok {
		list, ok := normalize(fv).([]any)
		if !ok {
			return nil, invalid("%s fields must be an array", kind)
		}
		for _, e := range list {
			s, ok := normalize(e).(string)
			if !ok {
				return nil, invalid("%s fields must be strings", kind)
			}
			names = append(names, stripBoost(s))
		}
	}
	if len(names) == 0 {
		names = []string{"*"}
	}
	for _, n := range names {
		fr, err := newFieldRef(n)
		if err != nil {
			return nil, err
		}
		p.fields = append(p.fields, fr)
	}
	toks, err := lexQueryString(text, p.simple)
	if err != nil {
		return nil, err
	}
	p.toks = toks
	q, err := p.parseQuery(0)
	if err != nil {
		return nil, err
	}
	if p.toks[p.pos].kind != qsEOF {
		return nil, invalid("%s: unbalanced parentheses", kind)
	}
	return constantBoost{q: q, boost: boostOf(d)}, nil
}

type constantBoost struct {
	q     query
	boost float64
}

func (q constantBoost) eval(c *evalCtx, d *sources.Doc) (bool, float64) {
	ok, s := q.q.eval(c, d)
	return ok, s * q.boost
}

func (p *qsParser) peek() qsToken { return p.toks[p.pos] }

// parseQuery reads clauses up to ')' or the end.
func (p *qsParser) parseQuery(level int) (query, error) {
	if level > maxQueryDepth {
		return nil, invalid("query_string nested too deeply")
	}
	var clauses []qsClause
	for {
		t := p.peek()
		if t.kind == qsEOF || t.kind == qsClose {
			break
		}
		conj := qsEOF
		if t.kind == qsAnd || t.kind == qsOr {
			conj = t.kind
			p.pos++
			t = p.peek()
		}
		mods := qsEOF
		switch t.kind {
		case qsNot, qsMinus:
			mods = qsNot
			p.pos++
		case qsPlus:
			mods = qsPlus
			p.pos++
		}
		q, err := p.parseClause(level)
		if err != nil {
			return nil, err
		}
		clauses = p.addClause(clauses, conj, mods, q)
	}
	return clausesQuery(clauses), nil
}

// addClause is Lucene's QueryParserBase.addClause.
func (p *qsParser) addClause(clauses []qsClause, conj, mods qsTokenKind, q query) []qsClause {
	if n := len(clauses); n > 0 && conj == qsAnd && clauses[n-1].occ != occMustNot {
		clauses[n-1].occ = occMust
	}
	if n := len(clauses); n > 0 && p.and && conj == qsOr && clauses[n-1].occ != occMustNot {
		clauses[n-1].occ = occShould
	}
	if q == nil {
		return clauses
	}
	prohibited := mods == qsNot
	var required bool
	if !p.and {
		required = mods == qsPlus || (conj == qsAnd && !prohibited)
	} else {
		required = !prohibited && conj != qsOr
	}
	occ := occShould
	switch {
	case prohibited:
		occ = occMustNot
	case required:
		occ = occMust
	}
	return append(clauses, qsClause{q: q, occ: occ})
}

// clausesQuery is the BooleanQuery of the clauses; a purely negative one
// matches everything else, as ES makes it.
func clausesQuery(clauses []qsClause) query {
	if len(clauses) == 1 && clauses[0].occ != occMustNot {
		return clauses[0].q
	}
	b := boolQ{boost: 1}
	for _, c := range clauses {
		switch c.occ {
		case occMust:
			b.must = append(b.must, c.q)
		case occShould:
			b.should = append(b.should, c.q)
		case occMustNot:
			b.mustNot = append(b.mustNot, c.q)
		}
	}
	if len(clauses) == 0 {
		return constQ{} // an empty query string matches nothing
	}
	return b
}

func (p *qsParser) parseClause(level int) (query, error) {
	t := p.peek()
	p.pos++
	switch t.kind {
	case qsOpen:
		saved := p.fields
		if t.field != "" {
			fr, err := newFieldRef(t.field)
			if err != nil {
				return nil, err
			}
			p.fields = []fieldRef{fr}
		}
		q, err := p.parseQuery(level + 1)
		p.fields = saved
		if err != nil {
			return nil, err
		}
		if p.peek().kind != qsClose {
			return nil, invalid("query_string: missing )")
		}
		p.pos++
		return q, nil
	case qsTerm:
		return p.termQuery(t)
	case qsPhrase:
		return p.perField(t.field, func(f fieldRef) (query, error) {
			return p.env.newMatch("match_phrase", []fieldRef{f}, sources.D("query", t.text, "slop", int64(t.slop)))
		})
	case qsRange:
		return p.perField(t.field, func(f fieldRef) (query, error) {
			r := sources.D()
			if t.lo != "*" {
				r.Set(map[bool]string{true: "gte", false: "gt"}[t.loIncl], t.lo)
			}
			if t.hi != "*" {
				r.Set(map[bool]string{true: "lte", false: "lt"}[t.hiIncl], t.hi)
			}
			return p.env.compileRange(sources.D(f.name, r))
		})
	case qsClose, qsEOF:
		return nil, invalid("query_string: a clause is missing")
	}
	return nil, invalid("query_string: unexpected operator")
}

// perField builds the query for each field in effect (the token's own, or
// the defaults) and combines them as a dis_max.
func (p *qsParser) perField(field string, build func(fieldRef) (query, error)) (query, error) {
	fields := p.fields
	if field != "" {
		fr, err := newFieldRef(field)
		if err != nil {
			return nil, err
		}
		fields = []fieldRef{fr}
	}
	if len(fields) == 1 {
		return build(fields[0])
	}
	dm := disMaxQ{boost: 1}
	for _, f := range fields {
		q, err := build(f)
		if err != nil {
			return nil, err
		}
		dm.qs = append(dm.qs, q)
	}
	return dm, nil
}

func (p *qsParser) termQuery(t qsToken) (query, error) {
	if t.field == "_exists_" {
		fr, err := newFieldRef(grammar.Unescape(t.text))
		if err != nil {
			return nil, err
		}
		return existsQ{f: fr, boost: 1}, nil
	}
	if t.field == "*" && t.text == "*" {
		return constQ{match: true, score: 1}, nil
	}
	if !p.simple && hasWildcard(t.text) {
		if t.text == "*" {
			return p.perField(t.field, func(f fieldRef) (query, error) { return existsQ{f: f, boost: 1}, nil })
		}
		return p.perField(t.field, func(f fieldRef) (query, error) {
			pat := t.text
			if f.base == "" {
				pat = strings.ToLower(pat) // wildcard terms are normalised for text fields
			}
			return patternQ{f: f, value: pat, lower: strings.ToLower(pat), boost: 1}, nil
		})
	}
	text := grammar.Unescape(t.text)
	prefix := false
	if p.simple && strings.HasSuffix(text, "*") {
		text, prefix = strings.TrimSuffix(text, "*"), true
	}
	op := "or"
	if p.and {
		op = "and"
	}
	kind := "match"
	if prefix {
		kind = "match_bool_prefix"
	}
	return p.perField(t.field, func(f fieldRef) (query, error) {
		return p.env.newMatch(kind, []fieldRef{f}, sources.D("query", text, "operator", op))
	})
}
