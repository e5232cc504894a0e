package sandbox

import (
	"html"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"
)

// tokenize applies the sandbox's one analyser (see the package comment):
// lower-case, split on anything that is not a letter or a digit. With
// stripHTML, tags are removed and entities decoded first, as for body_html.
func tokenize(s string, stripHTML bool) []string {
	if stripHTML {
		s = stripTags(s)
	}
	var toks []string
	start := -1
	for i, r := range s {
		if unicode.IsLetter(r) || unicode.IsDigit(r) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 {
			toks = append(toks, strings.ToLower(s[start:i]))
			start = -1
		}
	}
	if start >= 0 {
		toks = append(toks, strings.ToLower(s[start:]))
	}
	return toks
}

// stripTags removes HTML tags and comments and decodes entities, keeping
// a space where a tag was so that words on either side stay apart.
func stripTags(s string) string {
	if !strings.ContainsAny(s, "<&") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for len(s) > 0 {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			b.WriteString(s)
			break
		}
		b.WriteString(s[:i])
		s = s[i:]
		end := ">"
		if strings.HasPrefix(s, "<!--") {
			end = "-->"
		}
		j := strings.Index(s, end)
		if j < 0 {
			break // an unterminated tag runs to the end
		}
		s = s[j+len(end):]
		b.WriteByte(' ')
	}
	return html.UnescapeString(b.String())
}

// isHTMLField reports whether values of the field at path are HTML that the
// analyser strips (the last segment is body_html).
func isHTMLField(path string) bool {
	return path == "body_html" || strings.HasSuffix(path, ".body_html")
}

// analyzed is what the analyser made of one stored string.
type analyzed struct {
	tokens []string
	set    map[string]struct{} // built for long token lists
	date   time.Time
	isDate bool
}

func (a *analyzed) has(tok string) bool {
	if a.set != nil {
		_, ok := a.set[tok]
		return ok
	}
	for _, t := range a.tokens {
		if t == tok {
			return true
		}
	}
	return false
}

// An analyzer caches the analysis of stored strings. The Store keeps one
// for its lifetime (its documents never change); Search makes one per call.
type analyzer struct {
	mu    sync.Mutex
	plain map[string]*analyzed
	html  map[string]*analyzed
	bytes int // what the cached analyses hold, roughly
}

func newAnalyzer() *analyzer {
	return &analyzer{plain: map[string]*analyzed{}, html: map[string]*analyzed{}}
}

// maxCached bounds the cache of a long-lived analyzer, in bytes of the
// strings and tokens it holds: a search of a large newsroom's text reads
// every document's, which it would otherwise keep. Beyond it strings are
// analysed on every use.
const maxCached = 64 << 20

func (z *analyzer) analyze(s string, stripHTML bool) *analyzed {
	m := z.plain
	if stripHTML {
		m = z.html
	}
	z.mu.Lock()
	a, ok := m[s]
	z.mu.Unlock()
	if ok {
		return a
	}
	a = &analyzed{tokens: tokenize(s, stripHTML)}
	if len(a.tokens) > 16 {
		a.set = make(map[string]struct{}, len(a.tokens))
		for _, t := range a.tokens {
			a.set[t] = struct{}{}
		}
	}
	if !stripHTML {
		a.date, a.isDate = parseStoredDate(s)
	}
	size := len(s) + 64*len(a.tokens) + 128 // the string, the tokens and their set, the entry
	z.mu.Lock()
	if z.bytes+size <= maxCached {
		m[s] = a
		z.bytes += size
	}
	z.mu.Unlock()
	return a
}

// globMatch matches s against a Lucene wildcard pattern: * any run of
// characters, ? one character, \ escapes the next character. It runs in
// O(len(s)*len(pattern)) at worst, never exponentially.
func globMatch(pattern, s string) bool {
	p := []rune(pattern)
	var pi, si int
	starP, starS := -1, 0
	for si < len(s) {
		r, size := utf8.DecodeRuneInString(s[si:])
		if pi < len(p) {
			switch c := p[pi]; {
			case c == '*':
				starP, starS = pi, si
				pi++
				continue
			case c == '?':
				pi++
				si += size
				continue
			case c == '\\' && pi+1 < len(p):
				if p[pi+1] == r {
					pi += 2
					si += size
					continue
				}
			case c == r:
				pi++
				si += size
				continue
			}
		}
		if starP < 0 {
			return false
		}
		// Let the last star absorb one more character.
		_, size0 := utf8.DecodeRuneInString(s[starS:])
		starS += size0
		si = starS
		pi = starP + 1
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// hasWildcard reports whether a pattern has an unescaped * or ?.
func hasWildcard(s string) bool {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '*', '?':
			return true
		}
	}
	return false
}

// simpleMatch is Elasticsearch's Regex.simpleMatch: * matches any run of
// characters, nothing else is special. It is used for field names.
func simpleMatch(pattern, s string) bool {
	if !strings.Contains(pattern, "*") {
		return pattern == s
	}
	return globMatch(strings.NewReplacer(`\`, `\\`, `?`, `\?`).Replace(pattern), s)
}
