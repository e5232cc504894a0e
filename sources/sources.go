package sources

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors a backend returns, wrapped with %w; callers test them with
// errors.Is. Driver errors never cross an adapter's boundary.
var (
	// ErrNotFound: no document has that id.
	ErrNotFound = errors.New("sources: not found")
	// ErrInvalid: the backend refused a query that passed validation
	// (a sort on an unmapped text field, say). The client's fault: 400.
	ErrInvalid = errors.New("sources: query refused by the backend")
	// ErrUnavailable: the backend cannot answer now (down, refusing
	// connections, out of capacity). 503 unless something is cached.
	ErrUnavailable = errors.New("sources: backend unavailable")
	// ErrTimeout: the backend did not answer within its deadline. 504
	// unless something is cached.
	ErrTimeout = errors.New("sources: backend timed out")
	// ErrPartial: the search backend answered with partial results
	// (timed_out, failed shards). Never served or cached as complete.
	ErrPartial = errors.New("sources: partial results")
	// ErrCursor: the backend cannot continue a cursor walk from where
	// its cursor stands (the point in time the walk reads has expired,
	// or the backend changed under it). The client starts the walk
	// again: 400. It is an ErrInvalid, so errors.Is sees both.
	ErrCursor = fmt.Errorf("sources: the cursor walk cannot continue: %w", ErrInvalid)
)

// A SortKey orders a list by one field.
type SortKey struct {
	Field string
	Desc  bool
}

// A Projection selects the fields of the documents served. The zero value
// selects every field.
type Projection struct {
	Fields  []string // top-level or dotted names
	Exclude bool     // true: every field but Fields; false: only Fields (and _id)
}

// IsZero reports whether the projection selects every field.
func (p Projection) IsZero() bool { return len(p.Fields) == 0 }

// A Param is one request parameter in canonical form: JSON values
// re-encoded with sorted keys, defaults elided.
type Param struct {
	Name, Value string
}

// CompareParams orders parameters by name, then value: the order in which
// a request's canonical parameters identify it (cache keys, a walk's
// pages read ahead), whatever order they came in.
func CompareParams(x, y Param) int {
	return cmp.Or(cmp.Compare(x.Name, y.Name), cmp.Compare(x.Value, y.Value))
}

// MaxTotal is where search totals saturate, as the original's
// track_total_hits=10000 made them.
const MaxTotal = 10000

// A Query is a validated request: a detail (ID set) or a list page. The
// server builds it from the URL; nothing in it comes from a client
// unchecked.
type Query struct {
	Resource *Resource
	// ID is the detail id, as it appeared in the path; empty for a list.
	ID string
	// Page (from 1) and MaxResults (1 to 500) as the response reports
	// them. A search body may set its own size and from.
	Page, MaxResults int
	// Where is the validated Mongo filter of a document-database list,
	// nil for none. A 24-hex string in it matches an ObjectID or the
	// string; a date string (DateLayout or RFC 3339, ParseWhereDate)
	// matches a date or the string.
	Where *Doc
	// Sort of a document-database list; the parser fills in the
	// resource's default.
	Sort []SortKey
	// Search is the complete, validated Elasticsearch body of a search
	// list: query, sort, size, from and, when asked, aggs, post_filter,
	// _source and track_total_hits. Legacy syntax is already rewritten.
	Search *Doc
	// Fields is the client's projection, applied to the documents served
	// inside the resource's own (Project).
	Fields Projection
	// Params are the request's parameters in canonical form, except page
	// and max_results, in link order: where, sort, then the rest by name.
	// Cache keys and _links hrefs are built from them, so equivalent
	// requests share both.
	Params []Param
	// Pretty asks for indented JSON.
	Pretty bool
	// Cursor, when set, makes a list a cursor walk: keyset paging by the
	// list's sort and a tiebreaker unique to each document, instead of
	// Page. Skip is then 0 and Page 1.
	Cursor *Cursor
	// Fresh, when set, asks for an answer at least as new as a position
	// of the change log that this replica has applied (the request's
	// min_position). Never part of a cache key.
	Fresh *Freshness
}

// A Freshness is what a request naming a position of the change log
// (min_position) may be answered from, once this replica has applied
// every entry up to it, and so every invalidation they carry: a cache
// answers it from no entry invalidated since it was stored (not even as
// the fallback of a failed load), joins no load begun before the
// request, and takes no entry stored before StoredAfter.
type Freshness struct {
	// StoredAfter, when set (a search list), is the earliest time an
	// entry that answers may have been stored: the search index shows a
	// write a moment after the database does.
	StoredAfter time.Time
}

// A Cursor is the cursor part of a list request. A walk never skips or
// repeats a document that did not change during it, however many writes
// land between its pages, and has no 10000-result wall.
type Cursor struct {
	// After is where the previous page ended: the page holds the
	// documents that sort after it. Nil on a walk's first page.
	After *Position
	// Seal turns the position after a page into the value of the cursor
	// parameter of the page's next link. The request parser sets it: it
	// alone holds the key that makes cursors opaque and unforgeable.
	Seal func(Position) (string, error)
	// Early, when set, may be told the position after the page as soon
	// as the backend's answer shows it, before the answer is decoded: a
	// walk read ahead begins its next page then. It is a guess; the
	// Result's Next is the position. A backend need not call it, and
	// calls it, if at all, before Find returns.
	Early func(Position)
}

// A Position is where a cursor walk stands: just after the document
// whose sort values it holds. Only the backend that made it reads it.
type Position struct {
	// Values are the sort values of the last document served, ending
	// with its tiebreaker, in the backend's own terms: MongoDB sort keys
	// (the smallest or largest element of an array, nil for missing or
	// null, an empty []any for an empty array) on document lists; the
	// hit's sort values as Elasticsearch returned them on search lists.
	Values []any
	// PIT is the Elasticsearch point in time the walk reads, when it
	// needs one; "" otherwise.
	PIT string
	// Expires is when the backend forgets the walk's state (the point
	// in time's keep-alive); zero when it keeps none.
	Expires time.Time
	// Total is the list's total as the walk's first page counted it, for
	// a backend that counts only there and gives it again on every page
	// after; 0 when the backend does not carry it.
	Total int
}

// IsDetail reports whether q reads one document.
func (q *Query) IsDetail() bool { return q.ID != "" }

// Skip is how many documents precede the page: none on a cursor walk,
// which pages by position.
func (q *Query) Skip() int {
	if q.Cursor != nil {
		return 0
	}
	return (q.Page - 1) * q.MaxResults
}

// A Result is one page of a list.
type Result struct {
	Docs []*Doc
	// Total counts every match; search totals saturate at MaxTotal.
	Total int
	// Aggregations are the search backend's aggregation results, as it
	// returned them; nil when none were asked for.
	Aggregations *Doc
	// Next is where a cursor walk continues after this page; nil on its
	// last page and on every page of a list that is not a walk.
	Next *Position
}

// A Lookup is one batched query that enrichment makes for a whole page:
// the documents of Collection whose Field equals one of Values.
type Lookup struct {
	Collection string // "assignments", "planning", "archive", "content_types"
	Field      string // "_id", "coverage_item", "assignment_id", "event_item", ...
	// Values to match. A 24-hex string matches an ObjectID or the
	// string, as in a Where.
	Values []any
	Sort   []SortKey
	// Limit bounds the documents returned; 0 means no bound.
	Limit int
	// Search runs the lookup on the search index, as the original did for
	// some of its link queries; otherwise on the document database.
	Search bool
}

// A Getter reads one document of a resource by id from the document
// database. A 24-hex id matches an ObjectID _id and, failing that, a
// string _id. It returns an error wrapping ErrNotFound if there is none.
type Getter interface {
	Get(ctx context.Context, res *Resource, id string) (*Doc, error)
}

// A Finder answers a list query: from the search index for search
// resources (q.Search), from the document database otherwise (q.Where,
// q.Sort, q.Skip, q.MaxResults).
type Finder interface {
	Find(ctx context.Context, q *Query) (*Result, error)
}

// A Looker runs enrichment lookups. Results are in l.Sort order (backend
// order when empty) and hold at most l.Limit documents when it is set.
type Looker interface {
	Lookup(ctx context.Context, l Lookup) ([]*Doc, error)
}

// A Store is a complete backend: the sandbox, or the platform's Mongo and
// Elastic together. Documents returned are the caller's to modify.
// Errors wrap ErrNotFound, ErrInvalid, ErrUnavailable, ErrTimeout or
// ErrPartial, or are the context's error.
type Store interface {
	Getter
	Finder
	Looker
}
