package grammar

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// The one lexer of Lucene's query-string syntaxes: the classic syntax of
// query_string and q (LexQueryString), which the server scans for the
// fields a query refers to and the sandbox parses, and the syntax of
// simple_query_string (LexSimpleQueryString).

// A TokenKind is the kind of a query-string token.
type TokenKind int

const (
	Term   TokenKind = iota + 1 // a word, with * and ? wildcards; Text as written, escapes kept
	Phrase                      // "...": Text is the inside, unescaped
	Regexp                      // /.../ (classic only): Text is the inside, as written
	Range                       // [a TO b] or {a TO b} (classic only): see Parts, Open, Closed
	Colon                       // : after a field name (classic only)
	And                         // AND && (classic), + (simple)
	Or                          // OR || (classic), | (simple)
	Not                         // NOT ! (classic only)
	Plus                        // + (classic only)
	Minus                       // -
	Open                        // (
	Close                       // )
	Boost                       // ^N: Text is N
	Fuzzy                       // ~N: Text is N, "" for a bare ~
	Stray                       // a character Lucene would fail to lex, such as an unterminated " or /
)

// A Token is one token of a query string.
type Token struct {
	Kind TokenKind
	Text string
	// Parts are a Range's tokens as written (quoted ones with their
	// quotes), such as ["a", "TO", "b"]; Open and Closed are its brackets,
	// Closed 0 when the range runs to the end of the text.
	Parts        []string
	Open, Closed byte
}

// LexQueryString lexes the classic syntax as Lucene's QueryParser does:
// backslash escapes, quoted phrases, /regular expressions/ (longest match,
// \/ inside), [ranges} (where ':' means nothing), words AND, OR, NOT, &&
// and || only when the whole word is one, ^ and ~ with their numbers.
// Text Lucene would fail to lex becomes Stray tokens and plain text
// rather than an error, so that a scan for field names skips nothing.
func LexQueryString(s string) []Token {
	toks := make([]Token, 0, 8) // most query strings are a few words: one allocation
	add := func(k TokenKind, text string) { toks = append(toks, Token{Kind: k, Text: text}) }
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case spaceLen(s, i) > 0:
			i += spaceLen(s, i)
		case c == '"':
			end := quotedEnd(s, i)
			if end < 0 {
				add(Stray, `"`)
				i++
				continue
			}
			add(Phrase, Unescape(s[i+1:end]))
			i = end + 1
		case c == '/':
			end := regexEnd(s, i)
			if end < 0 {
				add(Stray, "/")
				i++
				continue
			}
			add(Regexp, s[i+1:end])
			i = end + 1
		case c == '[' || c == '{':
			end, parts, closed := rangeEnd(s, i+1)
			toks = append(toks, Token{Kind: Range, Text: s[i:end], Parts: parts, Open: c, Closed: closed})
			i = end
		case c == '(':
			add(Open, "(")
			i++
		case c == ')':
			add(Close, ")")
			i++
		case c == ':':
			add(Colon, ":")
			i++
		case c == '+':
			add(Plus, "+")
			i++
		case c == '-':
			add(Minus, "-")
			i++
		case c == '!':
			add(Not, "!")
			i++
		case c == '^' || c == '~':
			j := numberEnd(s, i+1)
			if c == '^' {
				add(Boost, s[i+1:j])
			} else {
				add(Fuzzy, s[i+1:j])
			}
			i = j
		case c == '\\' || c == '*' || c == '?' || termStart(c):
			j := termEnd(s, i)
			switch w := s[i:j]; w {
			case "AND", "&&":
				add(And, w)
			case "OR", "||":
				add(Or, w)
			case "NOT":
				add(Not, w)
			default:
				add(Term, w)
			}
			i = j
		default: // ] and }
			add(Stray, string(c))
			i++
		}
	}
	return toks
}

// Unescape removes the backslash escapes of a term or phrase; a trailing
// lone backslash goes too.
func Unescape(s string) string {
	if strings.IndexByte(s, '\\') < 0 {
		return s
	}
	var b strings.Builder
	for j := 0; j < len(s); j++ {
		if s[j] == '\\' {
			j++
			if j == len(s) {
				break
			}
		}
		b.WriteByte(s[j])
	}
	return b.String()
}

// spaceLen returns the length of Lucene whitespace at s[i] (space, tab,
// CR, LF, U+3000), 0 if there is none.
func spaceLen(s string, i int) int {
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

// termEnd returns the index after the term (with wildcards and escapes)
// starting at s[i].
func termEnd(s string, i int) int {
	j := i
	for j < len(s) {
		c := s[j]
		switch {
		case c == '\\':
			if j+1 >= len(s) {
				return len(s)
			}
			_, size := utf8.DecodeRuneInString(s[j+1:])
			j += 1 + size
		case spaceLen(s, j) > 0:
			return j
		case termStart(c) || c == '-' || c == '+' || c == '*' || c == '?':
			j++
		default:
			return j
		}
	}
	return j
}

// numberEnd returns the index after the number (digits, then optionally
// a dot and digits) at s[i].
func numberEnd(s string, i int) int {
	digits := func(j int) int {
		for j < len(s) && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		return j
	}
	j := digits(i)
	if j > i && j+1 < len(s) && s[j] == '.' && s[j+1] >= '0' && s[j+1] <= '9' {
		j = digits(j + 1)
	}
	return j
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

// rangeEnd lexes the inside of a range from s[j] and returns the index
// after its closing ] or } (len(s) and 0 when there is none) and its
// tokens: quoted strings "(non-quote | \")+" or runs without space, ]
// or }, the longer winning.
func rangeEnd(s string, j int) (int, []string, byte) {
	var parts []string
	for j < len(s) {
		switch c := s[j]; {
		case c == ']' || c == '}':
			return j + 1, parts, c
		case c == ' ':
			j++
		case c == '"':
			g := goopEnd(s, j)
			if q := rangeQuotedEnd(s, j); q >= 0 && q+1 > g {
				g = q + 1
			}
			parts = append(parts, s[j:g])
			j = g
		default:
			g := goopEnd(s, j)
			parts = append(parts, s[j:g])
			j = g
		}
	}
	return len(s), parts, 0
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

// LexSimpleQueryString lexes the syntax of simple_query_string, as
// Elasticsearch's SimpleQueryParser reads it: + (And), | (Or), - (Minus,
// a hyphen inside a word is part of it), "phrases" (an unterminated one
// runs to the end), parentheses, ~N after a term or phrase (Fuzzy), and
// words up to whitespace or one of +|-"()~, with backslash escapes kept
// in Text. A ^ or ~ (and its number) where a word would start is Stray.
func LexSimpleQueryString(s string) []Token {
	var toks []Token
	r := []rune(s)
	add := func(k TokenKind, text string) { toks = append(toks, Token{Kind: k, Text: text}) }
	special := func(c rune) bool { return strings.ContainsRune(`+|-"()~`, c) || unicode.IsSpace(c) }
	suffixes := func(i int) int {
		for i < len(r) && (r[i] == '~' || r[i] == '^') {
			k := Fuzzy
			if r[i] == '^' {
				k = Boost
			}
			start := i + 1
			i = start
			for i < len(r) && (unicode.IsDigit(r[i]) || r[i] == '.') {
				i++
			}
			add(k, string(r[start:i]))
		}
		return i
	}
	for i := 0; i < len(r); {
		c := r[i]
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '(':
			add(Open, "(")
			i++
		case c == ')':
			add(Close, ")")
			i++
		case c == '+':
			add(And, "+")
			i++
		case c == '|':
			add(Or, "|")
			i++
		case c == '-':
			add(Minus, "-")
			i++
		case c == '^' || c == '~': // where a word would start: nothing's suffix
			j := i + 1
			for j < len(r) && (unicode.IsDigit(r[j]) || r[j] == '.') {
				j++
			}
			add(Stray, string(r[i:j]))
			i = j
		case c == '"':
			var b strings.Builder
			i++
			for i < len(r) && r[i] != '"' {
				if r[i] == '\\' && i+1 < len(r) {
					i++
				}
				b.WriteRune(r[i])
				i++
			}
			i++ // the closing quote, or past the end
			add(Phrase, b.String())
			i = suffixes(min(i, len(r)))
		default:
			start := i
			for i < len(r) {
				if r[i] == '\\' && i+1 < len(r) {
					i += 2
					continue
				}
				if special(r[i]) && !(r[i] == '-' && i > start) {
					break
				}
				i++
			}
			add(Term, string(r[start:i]))
			i = suffixes(i)
		}
	}
	return toks
}
