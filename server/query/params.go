package query

import (
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// known are the parameters Parse reads; everything else is ignored: not
// validated, not keyed, not echoed.
var known = map[string]bool{
	"where": true, "sort": true, "page": true, "max_results": true, "projection": true,
	"projections": true, "embedded": true, "pretty": true, "source": true, "filter": true,
	"q": true, "df": true, "default_operator": true, "cursor": true,
}

// args are the request's parameters, parsed once.
type args url.Values

// parseArgs parses a raw query string as url.ParseQuery does, but strictly:
// a malformed query string is refused, not half-read.
func parseArgs(raw string) (args, error) {
	if raw == "" {
		return nil, nil // most details and many lists: nothing to parse
	}
	if len(raw) > MaxTarget {
		return nil, &Error{Status: http.StatusRequestURITooLong, Message: "request target too long"}
	}
	if strings.IndexByte(raw, ';') >= 0 {
		return nil, badf(`query string: ";" is not a parameter separator; use "&" (or %%3B for a literal ";")`)
	}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return nil, badf("query string: malformed (invalid %%-escape)")
	}
	for name, vs := range vals {
		for _, v := range vs {
			if len(v) > MaxTarget {
				return nil, &Error{Status: http.StatusRequestURITooLong, Message: name + ": value too long"}
			}
		}
		if known[name] && !utf8.ValidString(vs[0]) {
			return nil, badf("%s: not valid UTF-8", name)
		}
	}
	return args(vals), nil
}

// lookup returns the first value of name (Eve's request.args.get) and
// whether the parameter is present at all.
func (a args) lookup(name string) (string, bool) {
	vs := a[name]
	if len(vs) == 0 {
		return "", false
	}
	return vs[0], true
}

// first returns the first value of name, "" when absent.
func (a args) first(name string) string {
	v, _ := a.lookup(name)
	return v
}

// parsePage is Eve's abs(int(page)) or 1: garbage and 0 are 1, -2 is 2.
func parsePage(s string) int {
	n, ok := pyInt(s)
	if !ok || n == 0 {
		return 1
	}
	if n < 0 {
		n = -n
	}
	return n
}

// MaxResults is Eve's int(float(max_results)), with everything that is
// not a positive number (garbage, 0, negatives, nan, ±inf) giving the
// default 25 and values above 500 clamped to 500: for lists (Parse) and
// the endpoints outside Parse that page too (/changes).
func MaxResults(s string) int {
	f, ok := pyFloat(s)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		return defaultResults
	}
	f = math.Trunc(f)
	switch {
	case f <= 0:
		return defaultResults
	case f > maxPageSize:
		return maxPageSize
	}
	return int(f)
}

// pyInt parses a decimal integer as Python's int() does: surrounding
// whitespace, a sign, digits with single underscores between them. Values
// beyond the int range saturate (they are far past any window anyway).
func pyInt(s string) (int, bool) {
	s = strings.TrimSpace(s)
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	if !pyDigits(s) {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '_' {
			continue
		}
		if n > (math.MaxInt32-9)/10 {
			n = math.MaxInt32 // saturate: Page stays a safe int
			break
		}
		n = n*10 + int(s[i]-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// pyDigits reports whether s is one or more ASCII digits with single
// underscores between them.
func pyDigits(s string) bool {
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
		case c == '_' && s[i-1] != '_':
		default:
			return false
		}
	}
	return true
}

// pyFloat parses a number as Python's float() does: decimal with optional
// fraction and exponent, underscores between digits, inf/infinity/nan in
// any case, surrounding whitespace. Go's ParseFloat alone would also take
// hex floats and "0x" forms, which Python refuses.
func pyFloat(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	body := s
	if body != "" && (body[0] == '+' || body[0] == '-') {
		body = body[1:]
	}
	switch strings.ToLower(body) {
	case "inf", "infinity", "nan":
		f, err := strconv.ParseFloat(s, 64)
		return f, err == nil
	}
	mant, exp, hasExp := strings.Cut(body, "e")
	if !hasExp {
		mant, exp, hasExp = strings.Cut(body, "E")
	}
	intPart, frac, hasDot := strings.Cut(mant, ".")
	switch {
	case intPart == "" && frac == "":
		return 0, false
	case intPart != "" && !pyDigits(intPart), frac != "" && !pyDigits(frac):
		return 0, false
	case !hasDot && frac != "":
		return 0, false
	}
	if hasExp {
		e := exp
		if e != "" && (e[0] == '+' || e[0] == '-') {
			e = e[1:]
		}
		if !pyDigits(e) {
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	if err != nil {
		// Out of range parses as ±Inf with ErrRange: Python gives inf too.
		if errors.Is(err, strconv.ErrRange) {
			return f, true
		}
		return 0, false
	}
	return f, true
}
