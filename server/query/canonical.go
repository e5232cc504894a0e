package query

import (
	"slices"
	"strings"

	"github.com/prodapi/prodapi/sources"
)

// params returns the request's canonical parameters in link order: where,
// sort, then the rest by name. Each was validated and re-encoded when it
// was read; defaults and empty values were not kept.
func (p *parser) params() []sources.Param {
	if p.where == "" && p.sort == "" && len(p.rest) == 0 {
		return nil
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
	return append(out, rest...)
}
