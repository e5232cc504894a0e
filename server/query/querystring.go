package query

import (
	"strings"
	"unicode/utf8"
)

// scanQueryString calls check with every field name a Lucene query string
// (query_string, simple_query_string, q) refers to: the field of each
// "field:" clause, unescaped, wildcards and all. When the text uses
// _exists_:name, where the value is a field name, every term and phrase
// in it is checked too (conservatively: we do not parse which terms the
// _exists_ applies to).
//
// It lexes as Lucene's classic QueryParser does, far enough to know what
// is a field: backslash escapes, quoted phrases, /regular expressions/
// (longest match, \/ inside), and [ranges} (where ':' means nothing). Text
// Lucene would fail to lex is scanned as plain text: Elasticsearch refuses
// such a query anyway, and skipping nothing we do not understand means no
// field reference can hide behind a quote or slash.
func scanQueryString(s string, check func(field string) error) error {
	var terms []string
	exists := false
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case isSpace(s, i) > 0:
			i += isSpace(s, i)
		case c == '"':
			end := quotedEnd(s, i)
			if end < 0 {
				i++
				continue
			}
			terms = append(terms, unescape(s[i+1:end]))
			i = end + 1
		case c == '/':
			end := regexEnd(s, i)
			if end < 0 {
				i++
				continue
			}
			i = end + 1
		case c == '[' || c == '{':
			i = rangeEnd(s, i+1)
		case c == '\\' || c == '*' || c == '?' || termStart(c):
			name, j := readTerm(s, i)
			terms = append(terms, name)
			k := j
			for k < len(s) && isSpace(s, k) > 0 {
				k += isSpace(s, k)
			}
			if k < len(s) && s[k] == ':' {
				if name == "_exists_" {
					exists = true
				} else if err := check(name); err != nil {
					return err
				}
			}
			i = j
		default:
			i++
		}
	}
	if exists {
		for _, t := range terms {
			if t == "_exists_" || t == "" {
				continue
			}
			if err := check(t); err != nil {
				return err
			}
		}
	}
	return nil
}

// isSpace returns the length of Lucene whitespace at s[i] (space, tab,
// CR, LF, U+3000), 0 if there is none.
func isSpace(s string, i int) int {
	switch s[i] {
	case ' ', '\t', '\n', '\r':
		return 1
	}
	if strings.HasPrefix(s[i:], "\u3000") {
		return len("\u3000")
	}
	return 0
}

// termStart reports whether c may start a term (Lucene's _TERM_START_CHAR
// without escapes).
func termStart(c byte) bool {
	return strings.IndexByte(" \t\n\r+-!():^[]\"{}~*?\\/", c) < 0
}

// readTerm reads a term (with wildcards) from s[i], returning it
// unescaped and the index after it.
func readTerm(s string, i int) (string, int) {
	var b strings.Builder
	j := i
	for j < len(s) {
		c := s[j]
		switch {
		case c == '\\':
			if j+1 >= len(s) {
				return b.String(), len(s)
			}
			_, size := utf8.DecodeRuneInString(s[j+1:])
			b.WriteString(s[j+1 : j+1+size])
			j += 1 + size
			continue
		case isSpace(s, j) > 0:
			return b.String(), j
		case termStart(c) || c == '-' || c == '+' || c == '*' || c == '?':
			b.WriteByte(c)
			j++
			continue
		}
		break
	}
	return b.String(), j
}

func unescape(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for j := 0; j < len(s); j++ {
		if s[j] == '\\' && j+1 < len(s) {
			j++
		}
		b.WriteByte(s[j])
	}
	return b.String()
}

// quotedEnd finds the closing quote of a phrase starting at s[i]:
// "(non-quote-non-backslash | \any)*"; -1 when unterminated.
func quotedEnd(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			j++
		case '"':
			return j
		}
	}
	return -1
}

// regexEnd finds the closing slash of a regular expression starting at
// s[i]: /(non-slash | \/)*/, the longest such token as Lucene's lexer
// takes it; -1 when there is none.
func regexEnd(s string, i int) int {
	last := -1
	for j := i + 1; j < len(s); j++ {
		if s[j] != '/' {
			continue
		}
		if s[j-1] != '\\' {
			return j
		}
		last = j // may end here, or be an escaped slash; longest wins
	}
	return last
}

// rangeEnd skips the inside of a range from s[j] and returns the index
// after its closing ] or }: tokens are quoted strings
// "(non-quote | \")+" or runs without space, ] or }, the longer winning.
func rangeEnd(s string, j int) int {
	for j < len(s) {
		switch c := s[j]; {
		case c == ']' || c == '}':
			return j + 1
		case c == ' ':
			j++
		case c == '"':
			g := goopEnd(s, j)
			if q := rangeQuotedEnd(s, j); q >= 0 && q+1 > g {
				g = q + 1
			}
			j = g
		default:
			j = goopEnd(s, j)
		}
	}
	return len(s)
}

func goopEnd(s string, j int) int {
	for j < len(s) && s[j] != ' ' && s[j] != ']' && s[j] != '}' {
		j++
	}
	return j
}

// rangeQuotedEnd finds the longest "(non-quote | \")+" token at s[j],
// returning the index of its closing quote, -1 if none.
func rangeQuotedEnd(s string, j int) int {
	last := -1
	for k := j + 1; k < len(s); k++ {
		if s[k] != '"' {
			continue
		}
		if k == j+1 {
			return -1 // "" has no content, and a bare quote cannot be content
		}
		if s[k-1] != '\\' {
			return k
		}
		last = k
	}
	return last
}
