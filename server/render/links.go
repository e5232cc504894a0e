package render

import (
	"strconv"
	"strings"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// defaultMaxResults is Eve's PAGINATION_DEFAULT: links omit it.
const defaultMaxResults = 25

// querydef builds the query string of a link to page of q, in the order
// of Eve's querydef: max_results when not the default, where, sort,
// page when past the first, then the other parameters. Unlike the
// original, values are the canonical ones (so equivalent requests get the
// same links and share cache entries) and are percent-encoded (so the
// links are URLs a client can follow); unknown parameters are dropped.
// projection is echoed too (Eve dropped it, so following "next" lost the
// fields a client had asked for).
func querydef(q *sources.Query, page int) string {
	return querystring(q.MaxResults, q.Params, page)
}

// querystring is querydef's query string for given parameters.
func querystring(maxResults int, params []sources.Param, page int) string {
	var b strings.Builder
	add := func(name, value string) {
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(name)
		b.WriteByte('=')
		b.WriteString(escapeQuery(value))
	}
	if maxResults != defaultMaxResults {
		add("max_results", strconv.Itoa(maxResults))
	}
	rest := params
	for len(rest) > 0 && (rest[0].Name == "where" || rest[0].Name == "sort") {
		add(rest[0].Name, rest[0].Value)
		rest = rest[1:]
	}
	if page > 1 {
		add("page", strconv.Itoa(page))
	}
	for _, p := range rest {
		add(p.Name, p.Value)
	}
	return b.String()
}

// href joins a path and a query string.
func href(path, qs string) string {
	if qs == "" {
		return path
	}
	return path + "?" + qs
}

// escapeQuery percent-encodes a query value, leaving readable the
// characters a query component may carry literally.
func escapeQuery(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~:/@!$'()*,", c) >= 0 {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

var homeLink = sources.Link("home", "/")

// listLinks builds a list envelope's _links: parent, self, next, last and
// prev, with Eve's rules (self carries the query only when there are
// results; next and last while pages remain; prev past the first page).
func listLinks(q *sources.Query, total int) *sources.Doc {
	res := q.Resource
	self := res.Name
	if total > 0 {
		self = href(res.Name, querydef(q, q.Page))
	}
	l := sources.NewDoc(
		sources.Field{Key: "parent", Value: homeLink},
		sources.Field{Key: "self", Value: sources.Link(res.Title, self)},
	)
	if q.Page*q.MaxResults < total {
		last := (total + q.MaxResults - 1) / q.MaxResults
		l.Set("next", sources.Link("next page", href(res.Name, querydef(q, q.Page+1))))
		l.Set("last", sources.Link("last page", href(res.Name, querydef(q, last))))
	}
	if q.Page > 1 {
		l.Set("prev", sources.Link("previous page", href(res.Name, querydef(q, q.Page-1))))
	}
	return l
}

// pageLinks builds a list envelope's _links and _meta: Eve's paging
// (listLinks), or a cursor walk's: self and, until the walk's last page,
// next, whose href carries the cursor that continues the walk; no prev
// or last, and no page in _meta. next is the query of that next page, as
// the request for its link will parse; nil without one. It is early when
// early (nextQuery of a guess at the position) guessed right: a cursor
// is sealed once, and the page read ahead under early's key is the one
// the link asks for.
func pageLinks(q *sources.Query, r *sources.Result, early *sources.Query) (links, meta *sources.Doc, next *sources.Query, err error) {
	if q.Cursor == nil {
		return listLinks(q, r.Total), sources.D("page", q.Page, "max_results", q.MaxResults, "total", r.Total), nil, nil
	}
	res := q.Resource
	links = sources.NewDoc(
		sources.Field{Key: "parent", Value: homeLink},
		sources.Field{Key: "self", Value: sources.Link(res.Title, href(res.Name, querydef(q, 1)))},
	)
	if r.Next != nil {
		next = early
		if next == nil || !samePosition(*next.Cursor.After, *r.Next) {
			if next, err = nextQuery(q, *r.Next); err != nil {
				return nil, nil, nil, err
			}
		}
		links.Set("next", sources.Link("next page", href(res.Name, querystring(q.MaxResults, next.Params, 1))))
	}
	return links, sources.D("max_results", q.MaxResults, "total", r.Total), next, nil
}

// nextQuery is the query of the page after q's, which ends at pos: q's
// with the cursor parameter pos sealed, as the request for the page's
// next link will parse.
func nextQuery(q *sources.Query, pos sources.Position) (*sources.Query, error) {
	cursor, err := q.Cursor.Seal(pos)
	if err != nil {
		return nil, err
	}
	params := make([]sources.Param, len(q.Params))
	for i, p := range q.Params {
		if p.Name == "cursor" {
			p.Value = cursor
		}
		params[i] = p
	}
	n := *q
	n.Params, n.Fresh = params, nil
	n.Cursor = &sources.Cursor{After: &pos, Seal: q.Cursor.Seal}
	return &n, nil
}

// samePosition reports whether a and b are the same position of a walk.
func samePosition(a, b sources.Position) bool {
	return a.PIT == b.PIT && a.Total == b.Total && a.Expires.Equal(b.Expires) &&
		string(codec.AppendJSON(nil, a.Values)) == string(codec.AppendJSON(nil, b.Values))
}

// itemLinks builds a detail's _links: self, parent, collection (carrying
// the request's list parameters, as Eve did) and prev when the request
// named a page past the first.
func itemLinks(q *sources.Query, id string) *sources.Doc {
	res := q.Resource
	self := res.Name + "/" + id
	l := sources.NewDoc(
		sources.Field{Key: "self", Value: sources.Link(res.ItemTitle, self)},
		sources.Field{Key: "parent", Value: homeLink},
		sources.Field{Key: "collection", Value: sources.Link(res.Title, href(res.Name, querydef(q, q.Page)))},
	)
	if q.Page > 1 {
		l.Set("prev", sources.Link("previous page", href(self, querydef(q, q.Page-1))))
	}
	return l
}
