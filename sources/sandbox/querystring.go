package sandbox

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/prodapi/prodapi/sources"
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

type qsLexer struct {
	s      []rune
	pos    int
	simple bool
	toks   []qsToken
}

func isQSSpecial(r rune, simple bool) bool {
	if simple {
		return strings.ContainsRune(`+|-"()~`, r) || unicode.IsSpace(r)
	}
	return strings.ContainsRune(`+-&|!(){}[]^"~:\`, r) || unicode.IsSpace(r)
}

func lexQueryString(s string, simple bool) ([]qsToken, error) {
	l := &qsLexer{s: []rune(s), simple: simple}
	for {
		l.skipSpace()
		if l.pos >= len(l.s) {
			l.toks = append(l.toks, qsToken{kind: qsEOF})
			return l.toks, nil
		}
		if err := l.next(); err != nil {
			return nil, err
		}
	}
}

func (l *qsLexer) skipSpace() {
	for l.pos < len(l.s) && unicode.IsSpace(l.s[l.pos]) {
		l.pos++
	}
}

func (l *qsLexer) emit(k qsTokenKind) { l.toks = append(l.toks, qsToken{kind: k}) }

func (l *qsLexer) next() error {
	r := l.s[l.pos]
	rest := string(l.s[l.pos:min(len(l.s), l.pos+4)])
	switch {
	case r == '(':
		l.pos++
		l.emit(qsOpen)
		return nil
	case r == ')':
		l.pos++
		l.emit(qsClose)
		return nil
	case l.simple && r == '+':
		l.pos++
		l.emit(qsAnd)
		return nil
	case l.simple && r == '|':
		l.pos++
		l.emit(qsOr)
		return nil
	case r == '^' || r == '~':
		l.suffixes() // a boost or fuzziness after a group: ignored
		return nil
	case r == '-':
		l.pos++
		l.emit(qsMinus)
		return nil
	case !l.simple && r == '+':
		l.pos++
		l.emit(qsPlus)
		return nil
	case !l.simple && r == '!':
		l.pos++
		l.emit(qsNot)
		return nil
	case !l.simple && (strings.HasPrefix(rest, "&&") || strings.HasPrefix(rest, "||")):
		l.pos += 2
		if r == '&' {
			l.emit(qsAnd)
		} else {
			l.emit(qsOr)
		}
		return nil
	case !l.simple && l.word("AND"):
		l.emit(qsAnd)
		return nil
	case !l.simple && l.word("OR"):
		l.emit(qsOr)
		return nil
	case !l.simple && l.word("NOT"):
		l.emit(qsNot)
		return nil
	}
	var field string
	if !l.simple {
		// A field prefix: chars up to an unescaped ':'.
		if f, n, ok := l.fieldPrefix(); ok {
			field = f
			l.pos += n
			if l.pos >= len(l.s) {
				return invalid("query_string: nothing after %s:", f)
			}
			switch l.s[l.pos] {
			case '(':
				// field:(a b): the group's default field.
				l.toks = append(l.toks, qsToken{kind: qsOpen, field: field})
				l.pos++
				return nil
			case '[', '{':
				return l.rangeTok(field)
			}
			if r := l.s[l.pos]; r == '>' || r == '<' {
				return l.compareTok(field)
			}
		}
	}
	if l.s[l.pos] == '"' {
		return l.phrase(field)
	}
	if !l.simple && (l.s[l.pos] == '[' || l.s[l.pos] == '{') {
		return l.rangeTok(field)
	}
	text := l.term()
	if text == "" {
		l.pos++ // a lone special character: ignored, as lenient parsing would
		return nil
	}
	l.toks = append(l.toks, qsToken{kind: qsTerm, field: field, text: text, slop: l.suffixes()})
	return nil
}

func (l *qsLexer) word(w string) bool {
	end := l.pos + len(w)
	if end > len(l.s) || string(l.s[l.pos:end]) != w {
		return false
	}
	if end < len(l.s) && !unicode.IsSpace(l.s[end]) && l.s[end] != '(' && l.s[end] != '"' {
		return false
	}
	l.pos = end
	return true
}

func (l *qsLexer) fieldPrefix() (string, int, bool) {
	var b strings.Builder
	for i := l.pos; i < len(l.s); i++ {
		r := l.s[i]
		switch {
		case r == '\\' && i+1 < len(l.s):
			i++
			b.WriteRune(l.s[i])
		case r == ':':
			if b.Len() == 0 {
				return "", 0, false
			}
			return b.String(), i - l.pos + 1, true
		case r == '*' || r == '.' || r == '_' || r == '-' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		default:
			return "", 0, false
		}
	}
	return "", 0, false
}

// term reads a word; escapes are kept (wildcard patterns need them) and
// removed later for plain terms.
func (l *qsLexer) term() string {
	start := l.pos
	for l.pos < len(l.s) {
		r := l.s[l.pos]
		if r == '\\' && l.pos+1 < len(l.s) {
			l.pos += 2
			continue
		}
		if r == '-' && l.pos > start {
			l.pos++ // a hyphen inside a word
			continue
		}
		if r == '*' || r == '?' {
			l.pos++
			continue
		}
		if isQSSpecial(r, l.simple) {
			break
		}
		l.pos++
	}
	return string(l.s[start:l.pos])
}

// suffixes reads ~N and ^N after a term or phrase; it returns the slop.
func (l *qsLexer) suffixes() int {
	slop := 0
	for l.pos < len(l.s) && (l.s[l.pos] == '~' || l.s[l.pos] == '^') {
		kind := l.s[l.pos]
		l.pos++
		start := l.pos
		for l.pos < len(l.s) && (unicode.IsDigit(l.s[l.pos]) || l.s[l.pos] == '.') {
			l.pos++
		}
		if kind == '~' {
			if n, err := strconv.Atoi(string(l.s[start:l.pos])); err == nil {
				slop = n
			}
		}
	}
	return slop
}

func (l *qsLexer) phrase(field string) error {
	l.pos++ // "
	var b strings.Builder
	for l.pos < len(l.s) && l.s[l.pos] != '"' {
		if l.s[l.pos] == '\\' && l.pos+1 < len(l.s) {
			l.pos++
		}
		b.WriteRune(l.s[l.pos])
		l.pos++
	}
	if l.pos >= len(l.s) && !l.simple {
		return invalid("query_string: unterminated phrase")
	}
	l.pos++ // "
	l.toks = append(l.toks, qsToken{kind: qsPhrase, field: field, text: b.String(), slop: l.suffixes()})
	return nil
}

func (l *qsLexer) rangeTok(field string) error {
	open := l.s[l.pos]
	end := -1
	for i := l.pos + 1; i < len(l.s); i++ {
		if l.s[i] == ']' || l.s[i] == '}' {
			end = i
			break
		}
	}
	if end < 0 {
		return invalid("query_string: unterminated range")
	}
	inner := strings.Fields(string(l.s[l.pos+1 : end]))
	if len(inner) != 3 || inner[1] != "TO" {
		return invalid("query_string: ranges are [a TO b]")
	}
	t := qsToken{kind: qsRange, field: field, lo: unquote(inner[0]), hi: unquote(inner[2]),
		loIncl: open == '[', hiIncl: l.s[end] == ']'}
	l.pos = end + 1
	l.suffixes()
	l.toks = append(l.toks, t)
	return nil
}

func unquote(s string) string {
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		return s[1 : len(s)-1]
	}
	return s
}

// compareTok reads field:>x, >=x, <x, <=x.
func (l *qsLexer) compareTok(field string) error {
	op := string(l.s[l.pos])
	l.pos++
	if l.pos < len(l.s) && l.s[l.pos] == '=' {
		op += "="
		l.pos++
	}
	v := l.term()
	if v == "" {
		return invalid("query_string: nothing after %s", op)
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
	l.toks = append(l.toks, t)
	return nil
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
		fr, err := newFieldRef(unescape(t.text))
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
	text := unescape(t.text)
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

func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
