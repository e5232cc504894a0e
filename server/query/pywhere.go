package query

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// decodeWhere reads the where parameter as Eve did: as JSON first and,
// when that fails, as a Python expression (Eve's eve/io/mongo/parser.py,
// which eve-elastic uses too). Either way the result is the value the
// JSON form would have decoded to, so everything after (the operator
// allow-list, hidden fields, limits, the canonical key) is shared: a
// Python where and its JSON twin are the same query.
func decodeWhere(raw string) (any, error) {
	v, jsonErr := decode("where", raw)
	if jsonErr == nil {
		return v, nil
	}
	d, pyErr := parsePyWhere(raw)
	if pyErr == nil {
		// Through JSON text and back: the very value, limits and checks
		// of the JSON form.
		return decode("where", string(codec.AppendJSON(nil, d)))
	}
	if t := strings.TrimLeft(raw, " \t\n\r\f"); t != "" && (t[0] == '{' || t[0] == '[') {
		return nil, jsonErr // meant as JSON: say what is wrong with it
	}
	return nil, pyErr
}

// parsePyWhere translates Eve's Python where syntax:
//
//	expr     = and { "or" and }
//	and      = term { "and" term }
//	term     = "(" expr ")" | name op value
//	name     = identifier { "." identifier }
//	op       = "==" | "!=" | "<" | "<=" | ">" | ">="
//	value    = string | number | True | False | None | name
//	         | "[" [ value { "," value } [ "," ] ] "]"
//	         | ObjectId( string ) | datetime( int, int, int [, int [, int [, int ]]] )
//
// name == v becomes {"name": v}, the other operators {"name": {"$ne": v}}
// and so on; a chain of and (or) becomes {"$and": [...]} ({"$or"}), one
// per chain as Python groups them (parentheses start a new one).
// ObjectId("…") becomes its 24 hex digits and datetime(…) its
// 2006-01-02T15:04:05+0000 text: the JSON spellings, which the backends
// read as an ObjectId and a date. A bare name as a value is its text, as
// in Eve (name == Arts is name == "Arts").
//
// Where Eve's visitor went wrong we translate what the expression says
// (a negative number keeps its sign; True, False, None and lists are
// themselves, where Eve substituted the field name or the last element)
// and refuse what it dropped silently or crashed on: not, in, is, chained
// comparisons, a field on the right, arithmetic, other calls, several
// statements. Anything outside the grammar is a 400 naming the problem.
func parsePyWhere(raw string) (*sources.Doc, error) {
	p := &pyParser{lex: pyLexer{src: raw}}
	if raw != "" && isPySpace(raw[0]) {
		return nil, badf("where: unexpected indent (Python syntax)")
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	d, err := p.expr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.unexpected("the end of the expression")
	}
	return d, nil
}

type pyKind int

const (
	tEOF pyKind = iota
	tName
	tString
	tInt
	tFloat
	tOp    // == != < <= > >=
	tPunct // ( ) [ ] ,
	tOther // anything else Python knows: reported, never parsed
	tKeyword
)

type pyToken struct {
	kind pyKind
	text string // the source text; for strings and numbers, the value below
	str  string
	i    int64
	f    float64
}

type pyLexer struct {
	src     string
	pos     int
	depth   int  // open brackets: newlines inside them are whitespace
	started bool // a token has been read: a new line ends the expression
}

func isPySpace(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

var pyKeywords = map[string]bool{
	"and": true, "or": true, "not": true, "in": true, "is": true, "True": true, "False": true, "None": true,
	"if": true, "else": true, "lambda": true, "for": true, "await": true, "yield": true, "del": true,
	"import": true, "from": true, "as": true, "assert": true, "async": true, "break": true, "class": true,
	"continue": true, "def": true, "elif": true, "except": true, "finally": true, "global": true,
	"nonlocal": true, "pass": true, "raise": true, "return": true, "try": true, "while": true, "with": true,
}

func (l *pyLexer) token() (pyToken, error) {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		switch {
		case isPySpace(c):
			l.pos++
			continue
		case c == '\\' && strings.HasPrefix(l.src[l.pos:], "\\\n"):
			l.pos += 2 // explicit line joining
			continue
		case c == '\n' || c == '\r':
			if l.depth > 0 {
				l.pos++
				continue
			}
			if !l.started {
				// A blank line before the expression; the next line
				// must not be indented.
				l.pos++
				if l.pos < len(l.src) && isPySpace(l.src[l.pos]) {
					return pyToken{}, badf("where: unexpected indent (Python syntax)")
				}
				continue
			}
			if strings.TrimLeft(l.src[l.pos:], " \t\f\r\n") == "" {
				l.pos = len(l.src) // trailing white space
				continue
			}
			return pyToken{}, badf("where: one expression only (Python syntax): a new line starts another")
		}
		break
	}
	if l.pos >= len(l.src) {
		return pyToken{kind: tEOF}, nil
	}
	l.started = true
	start := l.pos
	c := l.src[l.pos]
	switch {
	case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		j := l.pos + 1
		for j < len(l.src) && (l.src[j] == '_' || 'a' <= l.src[j] && l.src[j] <= 'z' || 'A' <= l.src[j] && l.src[j] <= 'Z' || '0' <= l.src[j] && l.src[j] <= '9') {
			j++
		}
		word := l.src[l.pos:j]
		if j < len(l.src) && (l.src[j] == '\'' || l.src[j] == '"') && len(word) <= 2 {
			return l.stringToken(word)
		}
		if j < len(l.src) && l.src[j] >= utf8.RuneSelf {
			return pyToken{}, badf("where: names must be ASCII (Python syntax)")
		}
		l.pos = j
		if pyKeywords[word] {
			return pyToken{kind: tKeyword, text: word}, nil
		}
		return pyToken{kind: tName, text: word}, nil
	case c == '\'' || c == '"':
		return l.stringToken("")
	case '0' <= c && c <= '9' || c == '.' && l.pos+1 < len(l.src) && '0' <= l.src[l.pos+1] && l.src[l.pos+1] <= '9':
		return l.number()
	case c == '(' || c == '[':
		l.pos++
		l.depth++
		return pyToken{kind: tPunct, text: string(c)}, nil
	case c == ')' || c == ']':
		l.pos++
		l.depth = max(l.depth-1, 0)
		return pyToken{kind: tPunct, text: string(c)}, nil
	case c == ',':
		l.pos++
		return pyToken{kind: tPunct, text: ","}, nil
	}
	for _, op := range []string{"==", "!=", "<=", ">=", "<", ">"} {
		if strings.HasPrefix(l.src[l.pos:], op) {
			l.pos += len(op)
			return pyToken{kind: tOp, text: op}, nil
		}
	}
	_, size := utf8.DecodeRuneInString(l.src[l.pos:])
	l.pos += size
	return pyToken{kind: tOther, text: l.src[start:l.pos]}, nil
}

// number lexes a Python number: decimal, 0x/0o/0b integers, floats with
// fraction and exponent, underscores between digits.
func (l *pyLexer) number() (pyToken, error) {
	j := l.pos
	isFloat := false
	if s := l.src[j:]; len(s) > 1 && s[0] == '0' && strings.ContainsRune("xXoObB", rune(s[1])) {
		j += 2
		for j < len(l.src) && (isHex(l.src[j]) || l.src[j] == '_') {
			j++
		}
	} else {
		digits := func() {
			for j < len(l.src) && ('0' <= l.src[j] && l.src[j] <= '9' || l.src[j] == '_') {
				j++
			}
		}
		digits()
		if j < len(l.src) && l.src[j] == '.' {
			isFloat = true
			j++
			digits()
		}
		if j < len(l.src) && (l.src[j] == 'e' || l.src[j] == 'E') {
			isFloat = true
			j++
			if j < len(l.src) && (l.src[j] == '+' || l.src[j] == '-') {
				j++
			}
			digits()
		}
	}
	text := l.src[l.pos:j]
	l.pos = j
	if j < len(l.src) && (l.src[j] == '_' || l.src[j] == 'j' || l.src[j] == 'J' || l.src[j] == '.' ||
		'a' <= l.src[j] && l.src[j] <= 'z' || 'A' <= l.src[j] && l.src[j] <= 'Z') {
		return pyToken{}, badf("where: invalid number %s (Python syntax)", quote(text+l.src[j:j+1]))
	}
	bad := badf("where: invalid number %s (Python syntax)", quote(text))
	if strings.Contains(text, "__") || strings.HasSuffix(text, "_") || strings.Contains(text, "_.") ||
		strings.Contains(text, "._") || strings.Contains(text, "_e") || strings.Contains(text, "_E") ||
		strings.Contains(text, "e_") || strings.Contains(text, "E_") {
		return pyToken{}, bad
	}
	clean := strings.ReplaceAll(text, "_", "")
	if isFloat {
		mant, _, _ := strings.Cut(strings.ToLower(clean), "e")
		if mant == "." || strings.HasSuffix(strings.ToLower(clean), "e") || strings.HasSuffix(clean, "+") || strings.HasSuffix(clean, "-") {
			return pyToken{}, bad
		}
		f, err := strconv.ParseFloat(clean, 64)
		if err != nil || math.IsInf(f, 0) {
			return pyToken{}, badf("where: number %s out of range", quote(text))
		}
		return pyToken{kind: tFloat, text: text, f: f}, nil
	}
	base := 10
	digits := clean
	if len(clean) > 1 && clean[0] == '0' && strings.ContainsRune("xXoObB", rune(clean[1])) {
		base = map[byte]int{'x': 16, 'o': 8, 'b': 2}[clean[1]|0x20]
		digits = clean[2:]
	} else if len(clean) > 1 && clean[0] == '0' && strings.Trim(clean, "0") != "" {
		return pyToken{}, badf("where: leading zeros in %s are not allowed (Python syntax)", quote(text))
	}
	if digits == "" {
		return pyToken{}, bad
	}
	n, err := strconv.ParseInt(digits, base, 64)
	if err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return pyToken{}, badf("where: number %s out of range", quote(text))
		}
		return pyToken{}, bad
	}
	return pyToken{kind: tInt, text: text, i: n}, nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// stringToken lexes a string literal with an optional u or r prefix
// (b and f make bytes and f-strings, which Eve never translated).
func (l *pyLexer) stringToken(prefix string) (pyToken, error) {
	raw := false
	switch strings.ToLower(prefix) {
	case "", "u":
	case "r":
		raw = true
	default:
		return pyToken{}, badf("where: %s-prefixed strings are not supported (Python syntax)", quote(prefix))
	}
	start := l.pos
	l.pos += len(prefix)
	q := l.src[l.pos]
	if strings.HasPrefix(l.src[l.pos:], strings.Repeat(string(q), 3)) {
		return pyToken{}, badf("where: triple-quoted strings are not supported (Python syntax)")
	}
	l.pos++
	var b strings.Builder
	for {
		if l.pos >= len(l.src) || l.src[l.pos] == '\n' || l.src[l.pos] == '\r' {
			return pyToken{}, badf("where: unterminated string (Python syntax)")
		}
		c := l.src[l.pos]
		switch {
		case c == q:
			l.pos++
			s := b.String()
			if !utf8.ValidString(s) {
				return pyToken{}, badf("where: string is not valid UTF-8")
			}
			return pyToken{kind: tString, text: l.src[start:l.pos], str: s}, nil
		case c == '\\' && raw:
			// A raw string keeps the backslash and the next character.
			if l.pos+1 >= len(l.src) {
				return pyToken{}, badf("where: unterminated string (Python syntax)")
			}
			b.WriteString(l.src[l.pos : l.pos+2])
			l.pos += 2
		case c == '\\':
			if err := l.escape(&b); err != nil {
				return pyToken{}, err
			}
		default:
			b.WriteByte(c)
			l.pos++
		}
	}
}

// escape decodes one backslash escape of a str literal at l.pos.
func (l *pyLexer) escape(b *strings.Builder) error {
	if l.pos+1 >= len(l.src) {
		return badf("where: unterminated string (Python syntax)")
	}
	c := l.src[l.pos+1]
	simple := map[byte]string{'\\': `\`, '\'': `'`, '"': `"`, 'a': "\a", 'b': "\b", 'f': "\f", 'n': "\n",
		'r': "\r", 't': "\t", 'v': "\v", '\n': ""}
	if s, ok := simple[c]; ok {
		b.WriteString(s)
		l.pos += 2
		return nil
	}
	hexRune := func(n int) error {
		h := l.src[l.pos+2:]
		if len(h) < n {
			return badf("where: truncated \\%c escape (Python syntax)", c)
		}
		v, err := strconv.ParseUint(h[:n], 16, 32)
		if err != nil || !isAllHex(h[:n]) {
			return badf("where: truncated \\%c escape (Python syntax)", c)
		}
		r := rune(v)
		if r > utf8.MaxRune || 0xD800 <= r && r <= 0xDFFF {
			return badf("where: escape \\%c%s is not a character", c, h[:n])
		}
		b.WriteRune(r)
		l.pos += 2 + n
		return nil
	}
	switch {
	case c == 'x':
		return hexRune(2)
	case c == 'u':
		return hexRune(4)
	case c == 'U':
		return hexRune(8)
	case '0' <= c && c <= '7':
		j, v := l.pos+1, 0
		for k := 0; k < 3 && j < len(l.src) && '0' <= l.src[j] && l.src[j] <= '7'; k++ {
			v = v*8 + int(l.src[j]-'0')
			j++
		}
		b.WriteRune(rune(v))
		l.pos = j
		return nil
	case c == 'N':
		return badf(`where: \N{...} escapes are not supported (Python syntax)`)
	}
	// Python keeps an unknown escape as it is.
	b.WriteByte('\\')
	l.pos++
	return nil
}

func isAllHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isHex(s[i]) {
			return false
		}
	}
	return true
}

// pyParser is a recursive-descent parser over pyLexer's tokens.
type pyParser struct {
	lex   pyLexer
	tok   pyToken
	depth int // nested parentheses and lists
}

func (p *pyParser) next() error {
	t, err := p.lex.token()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *pyParser) is(kind pyKind, text string) bool { return p.tok.kind == kind && p.tok.text == text }

func (p *pyParser) unexpected(wanted string) *Error {
	switch {
	case p.tok.kind == tEOF:
		return badf("where: unexpected end, expected %s (Python syntax)", wanted)
	case p.tok.kind == tKeyword && (p.tok.text == "not" || p.tok.text == "in" || p.tok.text == "is"):
		return badf("where: %s is not supported; use the JSON form ($not, $in, $nin, $exists)", quote(p.tok.text))
	}
	return badf("where: unexpected %s, expected %s (Python syntax)", quote(p.tok.text), wanted)
}

// maxPyNesting is Python's own limit on nested brackets. It only bounds
// the parser's recursion: the result is held to the JSON form's depth
// limit afterwards.
const maxPyNesting = 200

// enter counts an open parenthesis or bracket.
func (p *pyParser) enter() error {
	p.depth++
	if p.depth > maxPyNesting {
		return badf("where: too many nested parentheses (Python syntax)")
	}
	return nil
}

func (p *pyParser) expr() (*sources.Doc, error) { return p.chain("or", p.and) }

func (p *pyParser) and() (*sources.Doc, error) { return p.chain("and", p.term) }

// chain parses operand { keyword operand } into {"$<keyword>": [...]}.
func (p *pyParser) chain(keyword string, operand func() (*sources.Doc, error)) (*sources.Doc, error) {
	first, err := operand()
	if err != nil {
		return nil, err
	}
	if !p.is(tKeyword, keyword) {
		return first, nil
	}
	list := []any{first}
	for p.is(tKeyword, keyword) {
		if err := p.next(); err != nil {
			return nil, err
		}
		d, err := operand()
		if err != nil {
			return nil, err
		}
		list = append(list, d)
	}
	return doc1("$"+keyword, list), nil
}

func (p *pyParser) term() (*sources.Doc, error) {
	if p.is(tPunct, "(") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		if err := p.next(); err != nil {
			return nil, err
		}
		d, err := p.expr()
		if err != nil {
			return nil, err
		}
		if !p.is(tPunct, ")") {
			return nil, p.unexpected(`")"`)
		}
		p.depth--
		return d, p.next()
	}
	var name string
	switch p.tok.kind {
	case tName:
		var err error
		if name, err = p.dotted(); err != nil {
			return nil, err
		}
	case tString:
		// Eve's visitor reads a string on the left as the field name.
		name = p.tok.str
		if err := p.next(); err != nil {
			return nil, err
		}
	default:
		return nil, p.unexpected("a comparison such as name == \"value\"")
	}
	if p.tok.kind != tOp {
		return nil, p.unexpected("a comparison operator (== != < <= > >=)")
	}
	op := p.tok.text
	if err := p.next(); err != nil {
		return nil, err
	}
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	if p.tok.kind == tOp {
		return nil, badf("where: chained comparisons are not supported; join them with and")
	}
	if op != "==" {
		v = doc1(map[string]string{"!=": "$ne", "<": "$lt", "<=": "$lte", ">": "$gt", ">=": "$gte"}[op], v)
	}
	return doc1(name, v), nil
}

// dotted reads name { "." name }.
func (p *pyParser) dotted() (string, error) {
	name := p.tok.text
	if err := p.next(); err != nil {
		return "", err
	}
	for p.is(tOther, ".") {
		if err := p.next(); err != nil {
			return "", err
		}
		if p.tok.kind != tName {
			return "", p.unexpected("a name after \".\"")
		}
		name += "." + p.tok.text
		if err := p.next(); err != nil {
			return "", err
		}
	}
	return name, nil
}

func (p *pyParser) value() (any, error) {
	t := p.tok
	switch t.kind {
	case tString:
		return t.str, p.next()
	case tInt:
		return t.i, p.next()
	case tFloat:
		return t.f, p.next()
	case tKeyword:
		switch t.text {
		case "True":
			return true, p.next()
		case "False":
			return false, p.next()
		case "None":
			return nil, p.next()
		}
	case tOther:
		if t.text == "-" || t.text == "+" {
			if err := p.next(); err != nil {
				return nil, err
			}
			switch p.tok.kind {
			case tInt:
				n := p.tok.i
				if t.text == "-" {
					n = -n
				}
				return n, p.next()
			case tFloat:
				f := p.tok.f
				if t.text == "-" {
					f = -f
				}
				return f, p.next()
			}
			return nil, p.unexpected("a number after " + quote(t.text))
		}
	case tPunct:
		if t.text == "[" {
			return p.list()
		}
	case tName:
		name, err := p.dotted()
		if err != nil {
			return nil, err
		}
		if p.is(tPunct, "(") {
			return p.call(name)
		}
		return name, nil // Eve's visitor reads a bare name as its text
	}
	return nil, p.unexpected("a value (a string, a number, True, False, None, a list, ObjectId(...) or datetime(...))")
}

func (p *pyParser) list() (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	out := []any{}
	for !p.is(tPunct, "]") {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		if p.is(tPunct, ",") {
			if err := p.next(); err != nil {
				return nil, err
			}
			continue
		}
		if !p.is(tPunct, "]") {
			return nil, p.unexpected(`"," or "]"`)
		}
	}
	p.depth--
	return out, p.next()
}

// call reads ObjectId("…") or datetime(y, m, d[, H[, M[, S]]]), the two
// calls Eve's visitor knew.
func (p *pyParser) call(name string) (any, error) {
	if name != "ObjectId" && name != "datetime" {
		return nil, badf("where: unknown function %s; only ObjectId(...) and datetime(...) (Python syntax)", quote(name))
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	var args []pyToken
	for !p.is(tPunct, ")") {
		neg := false
		if p.is(tOther, "-") {
			neg = true
			if err := p.next(); err != nil {
				return nil, err
			}
		}
		t := p.tok
		if t.kind != tString && t.kind != tInt {
			return nil, p.unexpected("a literal argument of " + name)
		}
		if neg {
			if t.kind != tInt {
				return nil, p.unexpected("a number after \"-\"")
			}
			t.i = -t.i
		}
		args = append(args, t)
		if err := p.next(); err != nil {
			return nil, err
		}
		if p.is(tPunct, ",") {
			if err := p.next(); err != nil {
				return nil, err
			}
			continue
		}
		if !p.is(tPunct, ")") {
			return nil, p.unexpected(`"," or ")"`)
		}
	}
	if err := p.next(); err != nil {
		return nil, err
	}
	if name == "ObjectId" {
		if len(args) != 1 || args[0].kind != tString {
			return nil, badf("where: ObjectId takes one string of 24 hex digits")
		}
		if _, ok := sources.ParseObjectID(args[0].str); !ok {
			return nil, badf("where: ObjectId(%s): not 24 hex digits", quote(args[0].str))
		}
		return args[0].str, nil
	}
	if len(args) < 3 || len(args) > 6 {
		return nil, badf("where: datetime takes year, month, day[, hour[, minute[, second]]]")
	}
	var n [6]int64
	for i, a := range args {
		if a.kind != tInt {
			return nil, badf("where: datetime takes integers")
		}
		n[i] = a.i
	}
	t := time.Date(int(n[0]), time.Month(n[1]), int(n[2]), int(n[3]), int(n[4]), int(n[5]), 0, time.UTC)
	if n[0] < 1 || n[0] > 9999 || t.Year() != int(n[0]) || int64(t.Month()) != n[1] || int64(t.Day()) != n[2] ||
		int64(t.Hour()) != n[3] || int64(t.Minute()) != n[4] || int64(t.Second()) != n[5] {
		return nil, badf("where: datetime(...) is not a valid date and time")
	}
	return t.Format(sources.DateLayout), nil
}
