package query

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// An Error is a problem with a request's parameters. Status is 400 (or
// 414); Message says what was wrong in terms the API client understands
// (never internals), e.g. `where: unknown operator "$foo"`,
// `sort: field "password" cannot be used`, `source: "script" is not allowed`.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Message }

// HTTPStatus is the status the refusal is answered with, for
// sources.Classify.
func (e *Error) HTTPStatus() int { return e.Status }

// MaxTarget is the longest request target (path and query) accepted:
// 16 KiB. Longer is 414.
const MaxTarget = 16 << 10

// Limits.
const (
	maxDepth       = 32    // JSON nesting of where, source, filter, projection, embedded
	maxSortKeys    = 32    // as MongoDB allows
	maxPathLen     = 256   // bytes in a field path
	maxQueryDepth  = 24    // queries nested in queries, after the legacy rewrites
	maxBuckets     = 10000 // terms buckets an aggregation tree may ask for
	maxAggSize     = 500   // buckets of one terms aggregation
	maxPageSize    = 500   // PAGINATION_LIMIT
	defaultResults = 25    // PAGINATION_DEFAULT
	window         = sources.MaxTotal
)

func badf(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, args...)}
}

// Parse validates rawQuery (r.URL.RawQuery) for resource res: a list when
// id == "", a detail of id otherwise (the router has already checked the
// id's syntax). Errors are *Error. It pages by cursor nowhere: a list
// with a cursor parameter is a 400 (Cursors.Parse pages by cursor).
func Parse(res *sources.Resource, id, rawQuery string) (*sources.Query, error) {
	return (*Cursors)(nil).Parse(res, id, rawQuery)
}

// Parse is the package's Parse for a server that pages by cursor: c
// opens the cursor parameter of a list and seals the next one.
func (c *Cursors) Parse(res *sources.Resource, id, rawQuery string) (*sources.Query, error) {
	if res == nil {
		return nil, errors.New("query: nil resource")
	}
	a, err := parseArgs(rawQuery)
	if err != nil {
		return nil, err
	}
	p := parser{res: res, args: a, list: id == "", cursors: c}
	p.q = &sources.Query{
		Resource:   res,
		ID:         id,
		Page:       parsePage(a.first("page")),
		MaxResults: MaxResults(a.first("max_results")),
	}
	if err := p.parse(); err != nil {
		return nil, err
	}
	return p.q, nil
}

// parser carries one request through validation.
type parser struct {
	res     *sources.Resource
	args    args
	list    bool
	cursors *Cursors
	q       *sources.Query

	// walk: the list pages by cursor (the cursor parameter is present,
	// empty on the first page).
	walk bool

	// Canonical parameters by name (where and sort first, then the rest
	// sorted), collected as each is validated.
	where, sort string
	rest        []sources.Param

	// Parsed pieces of a search list.
	whereTerms []any
	urlSort    []sources.SortKey
}

func (p *parser) search() bool { return p.res.Search && p.list }

func (p *parser) keep(name, value string) {
	p.rest = append(p.rest, sources.Param{Name: name, Value: value})
}

func (p *parser) parse() error {
	if err := p.checkCursor(); err != nil {
		return err
	}
	if err := p.parseWhere(); err != nil {
		return err
	}
	if err := p.parseSort(); err != nil {
		return err
	}
	if err := p.parseProjection(); err != nil {
		return err
	}
	if err := p.parseEmbedded(); err != nil {
		return err
	}
	if _, ok := p.args.lookup("pretty"); ok {
		p.q.Pretty = true
		p.keep("pretty", "")
	}
	if p.list {
		// (page-1)*max_results + max_results: the last result the page shows.
		if p.q.Page > window/p.q.MaxResults {
			return badf("page: page %d of %d results is beyond the %d results that can be paged",
				p.q.Page, p.q.MaxResults, window)
		}
	}
	if p.search() {
		if err := p.parseSearch(); err != nil {
			return err
		}
	}
	var err error
	if p.q.Params, err = p.params(); err != nil {
		return err
	}
	return p.parseCursor()
}

// parseEmbedded checks Eve's embedded parameter: a JSON object, otherwise
// ignored (no resource has embeddable fields).
func (p *parser) parseEmbedded() error {
	raw := p.args.first("embedded")
	if raw == "" {
		return nil
	}
	v, err := codec.DecodeJSON([]byte(raw), codec.DecodeOptions{Strict: true, MaxDepth: maxDepth})
	if _, ok := v.(*sources.Doc); err != nil || !ok {
		return badf("Unable to parse `embedded` clause")
	}
	return nil
}
