package query

import (
	"net/http"
	"slices"
	"strings"

	"github.com/prodapi/prodapi/sources"
)

// linkReserve is room left in a link's target for the path, page and
// max_results.
const linkReserve = 512

// params returns the request's canonical parameters in link order: where,
// sort, then the rest by name. Each was validated and re-encoded when it
// was read; defaults and empty values were not kept.
//
// Long forms are longer than short ones, so a request that fits in
// MaxTarget may not once normalised; its links could not be followed
// (nor its cache key re-derived from them), so it is refused with 414.
func (p *parser) params() ([]sources.Param, error) {
	if p.where == "" && p.sort == "" && len(p.rest) == 0 {
		return nil, nil
	}
	out := make([]sources.Param, 0, 2+len(p.rest))
	if p.where != "" {
		out = append(out, sources.Param{Name: "where", Value: p.where})
	}
	if p.sort != "" {
		out = append(out, sources.Param{Name: "sort", Value: p.sort})
	}
	rest := slices.Clone(p.rest)
	slices.SortStableFunc(rest, func(a, b sources.Param) int { return strings.Compare(a.Name, b.Name) })
	out = append(out, rest...)
	n := linkReserve
	if p.walk {
		n += len("cursor") + 2 + maxCursor // the next link's cursor, in place of this one's
	}
	for _, prm := range out {
		if prm.Name != "cursor" {
			n += len(prm.Name) + 2 + escapedLen(prm.Value)
		}
	}
	if n > MaxTarget {
		return nil, &Error{Status: http.StatusRequestURITooLong, Message: "parameters too long once normalised"}
	}
	return out, nil
}

// escapedLen is the length of s percent-encoded as a query value
// (url.QueryEscape), the longest a link's encoding of it can be.
func escapedLen(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '-', c == '_', c == '.', c == '~', c == ' ':
			n++
		default:
			n += 3
		}
	}
	return n
}
