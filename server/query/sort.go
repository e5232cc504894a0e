package query

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// parseSort reads the URL sort: a Python or JSON literal list of
// (field, direction) pairs, or Eve's comma form -name,_id. Document lists
// get q.Sort (the resource default when absent); search lists keep it for
// the body unless source has its own sort. Keyed as JSON pairs, elided
// when equal to the resource default.
func (p *parser) parseSort() error {
	raw := p.args.first("sort")
	var keys []sources.SortKey
	if raw != "" {
		var err error
		if keys, err = parseSortValue(raw); err != nil {
			return err
		}
		seen := make(map[string]bool, len(keys))
		for i := range keys {
			if p.res.Search && keys[i].Field == "_type" {
				keys[i].Field = "_resource" // eve-elastic's fix_query renames the key
			}
			f := keys[i].Field
			if msg := pathProblem(f); msg != "" {
				return badf("sort: %s", msg)
			}
			if hiddenField(p.res, f) {
				return badf("sort: field %s cannot be used", quote(f))
			}
			if seen[f] {
				return badf("sort: field %s appears twice", quote(f))
			}
			seen[f] = true
		}
	}
	if len(keys) > 0 && !slices.Equal(keys, p.res.DefaultSort) {
		p.sort = canonicalSort(keys)
	}
	switch {
	case p.search():
		p.urlSort = keys
	case p.list && len(keys) > 0:
		p.q.Sort = keys
	case p.list:
		p.q.Sort = slices.Clone(p.res.DefaultSort)
	}
	return nil
}

// canonicalSort encodes keys as JSON pairs: [["f",1],["g",-1]].
func canonicalSort(keys []sources.SortKey) string {
	pairs := make([]any, len(keys))
	for i, k := range keys {
		dir := int64(1)
		if k.Desc {
			dir = -1
		}
		pairs[i] = []any{k.Field, dir}
	}
	return string(codec.AppendCanonicalJSON(nil, pairs))
}

// parseSortValue parses the sort syntax without judging the fields.
func parseSortValue(raw string) ([]sources.SortKey, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return nil, badf("sort: empty")
	}
	if c := s[0]; strings.IndexByte(`[("'{0123456789`, c) >= 0 ||
		(c == '-' || c == '+') && len(s) > 1 && s[1] >= '0' && s[1] <= '9' {
		return parseSortLiteral(s)
	}
	return parseSortComma(s)
}

// parseSortComma reads -name,_id: '-' for descending, whitespace around
// items trimmed, empty items refused (the original gave 400 or 500).
func parseSortComma(s string) ([]sources.SortKey, error) {
	var keys []sources.SortKey
	for item := range strings.SplitSeq(s, ",") {
		item = strings.TrimSpace(item)
		k := sources.SortKey{Field: item}
		if f, ok := strings.CutPrefix(item, "-"); ok {
			k = sources.SortKey{Field: strings.TrimSpace(f), Desc: true}
		}
		if k.Field == "" {
			return nil, badf("sort: empty field name in %s", quote(s))
		}
		if strings.ContainsAny(k.Field, " \t\r\n\"'()[]{}") {
			return nil, badf("sort: invalid field name %s (use -name,_id or [[\"name\", -1]])", quote(k.Field))
		}
		if len(keys) == maxSortKeys {
			return nil, badf("sort: more than %d keys", maxSortKeys)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// parseSortLiteral reads what Python's ast.literal_eval would give for a
// sort: a list or tuple of (string, 1|-1) pairs. JSON arrays of pairs are
// the same literal.
func parseSortLiteral(s string) ([]sources.SortKey, error) {
	l := lexer{s: s}
	v, err := l.value(0)
	if err != nil {
		return nil, err
	}
	l.space()
	if l.i != len(l.s) {
		return nil, badf("sort: unexpected %s at offset %d", quote(l.s[l.i:l.i+1]), l.i)
	}
	list, ok := v.([]any)
	if !ok {
		return nil, badf(`sort: must be a list of (field, direction) pairs, e.g. [("name", -1)]`)
	}
	if len(list) > maxSortKeys {
		return nil, badf("sort: more than %d keys", maxSortKeys)
	}
	keys := make([]sources.SortKey, 0, len(list))
	for _, e := range list {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			return nil, badf(`sort: must be a list of (field, direction) pairs, e.g. [("name", -1)]`)
		}
		f, ok := pair[0].(string)
		if !ok {
			return nil, badf("sort: a field name must be a string")
		}
		switch pair[1] {
		case int64(1):
			keys = append(keys, sources.SortKey{Field: f})
		case int64(-1):
			keys = append(keys, sources.SortKey{Field: f, Desc: true})
		default:
			return nil, badf("sort: the direction of %s must be 1 or -1", quote(f))
		}
	}
	return keys, nil
}

// A lexer reads the literal subset sort needs: lists [..], tuples (..),
// single- or double-quoted strings with escapes, and integers.
type lexer struct {
	s string
	i int
}

func (l *lexer) space() {
	for l.i < len(l.s) && strings.IndexByte(" \t\r\n", l.s[l.i]) >= 0 {
		l.i++
	}
}

func (l *lexer) errf(what string) error {
	return badf("sort: %s at offset %d", what, l.i)
}

func (l *lexer) value(depth int) (any, error) {
	l.space()
	if l.i >= len(l.s) {
		return nil, l.errf("unexpected end")
	}
	switch c := l.s[l.i]; {
	case c == '[' || c == '(':
		if depth >= 4 {
			return nil, l.errf("nested too deeply")
		}
		return l.seq(depth)
	case c == '"' || c == '\'':
		return l.str()
	case c == '-' || c == '+' || c >= '0' && c <= '9':
		return l.int()
	}
	return nil, l.errf("invalid syntax")
}

// seq reads a list or tuple; "(x)" without a comma is just x, as in Python.
func (l *lexer) seq(depth int) (any, error) {
	open := l.s[l.i]
	closer := byte(']')
	if open == '(' {
		closer = ')'
	}
	l.i++
	var items []any
	comma := false
	for {
		l.space()
		if l.i < len(l.s) && l.s[l.i] == closer {
			l.i++
			break
		}
		if len(items) > 0 && !comma {
			return nil, l.errf("expected ',' or " + quote(string(closer)))
		}
		v, err := l.value(depth + 1)
		if err != nil {
			return nil, err
		}
		items = append(items, v)
		if len(items) > maxSortKeys {
			return nil, badf("sort: more than %d keys", maxSortKeys)
		}
		l.space()
		comma = l.i < len(l.s) && l.s[l.i] == ','
		if comma {
			l.i++
		}
	}
	if open == '(' && len(items) == 1 && !comma {
		return items[0], nil
	}
	if items == nil {
		items = []any{}
	}
	return items, nil
}

func (l *lexer) int() (any, error) {
	start := l.i
	neg := false
	if c := l.s[l.i]; c == '-' || c == '+' {
		neg = c == '-'
		l.i++
		l.space()
	}
	digits := l.i
	for l.i < len(l.s) && l.s[l.i] >= '0' && l.s[l.i] <= '9' {
		l.i++
	}
	if l.i == digits {
		l.i = start
		return nil, l.errf("invalid syntax")
	}
	if l.i < len(l.s) && strings.IndexByte(".eEjJ_xXoObB", l.s[l.i]) >= 0 {
		return nil, l.errf("only integer directions are allowed")
	}
	n, err := strconv.ParseInt(l.s[digits:l.i], 10, 64)
	if err != nil {
		return nil, l.errf("integer out of range")
	}
	if neg {
		n = -n
	}
	return n, nil
}

func (l *lexer) str() (any, error) {
	q := l.s[l.i]
	l.i++
	var b strings.Builder
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case c == q:
			l.i++
			return b.String(), nil
		case c == '\n' || c == '\r':
			return nil, l.errf("unterminated string")
		case c != '\\':
			b.WriteByte(c)
			l.i++
			continue
		}
		l.i++
		if l.i >= len(l.s) {
			break
		}
		e := l.s[l.i]
		l.i++
		switch e {
		case '\\', '\'', '"', '/':
			b.WriteByte(e)
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'x', 'u', 'U':
			n := 2
			if e == 'u' {
				n = 4
			} else if e == 'U' {
				n = 8
			}
			if l.i+n > len(l.s) {
				return nil, l.errf("truncated escape")
			}
			r, err := strconv.ParseUint(l.s[l.i:l.i+n], 16, 32)
			if err != nil || r > utf8.MaxRune || r >= 0xD800 && r <= 0xDFFF {
				return nil, l.errf("invalid escape")
			}
			b.WriteRune(rune(r))
			l.i += n
		default:
			return nil, l.errf("unsupported escape")
		}
	}
	return nil, l.errf("unterminated string")
}
