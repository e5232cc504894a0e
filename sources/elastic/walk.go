package elastic

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// DefaultPITKeepAlive is how long a walk's point in time lives between
// two pages unless Options say otherwise: long enough for a cached page
// (ten minutes fresh, fifteen stale at most) to hand out a next link that
// still works, and for a client to pause.
const DefaultPITKeepAlive = time.Hour

// walk answers a page of a cursor walk with search_after: the body's
// sort, then a tiebreaker unique to each document, and the sort values of
// the last hit served. The tiebreaker is the resource's (guid) where it
// has one; otherwise the document id on Elasticsearch 7, which sorts on
// _id, and on 8, which does not, the shard order of a point in time the
// walk opens on its first page and carries in its cursor.
//
// Only the first page counts its hits (up to the body's
// track_total_hits); the position carries that total, and the pages
// after it say the same without counting. Past the first page, a range
// on the primary sort key from the position bounds the search to the
// documents that follow it, where the key allows one (walkRange).
func (s *Store) walk(ctx context.Context, q *sources.Query) (*sources.Result, error) {
	res := q.Resource
	var after []any
	var pit string
	total := 0
	if a := q.Cursor.After; a != nil {
		after, pit, total = a.Values, a.PIT, a.Total
	}
	tiebreaker, byPIT := res.Tiebreaker, false
	if tiebreaker == "" {
		major, err := s.serverMajor(ctx)
		if err != nil {
			return nil, err
		}
		tiebreaker, byPIT = "_id", major >= 8
		if byPIT {
			tiebreaker = "_shard_doc"
		}
	}
	if after != nil && (pit != "") != byPIT {
		return nil, &Error{Op: "search", Index: s.index(res.Collection),
			Reason: "the walk began on another version of Elasticsearch", Kind: sources.ErrCursor}
	}
	body := sources.WalkBody(q.Search, tiebreaker, after)
	if after != nil && total > 0 {
		// The first page counted; a position made before positions
		// carried totals (0) counts again.
		body.Set("track_total_hits", false)
	}
	bound := s.walkRange(res.Collection, body, after)
	if byPIT && pit == "" {
		var err error
		if pit, err = s.openPIT(ctx, res.Collection); err != nil || pit == "" {
			return &sources.Result{Docs: []*sources.Doc{}}, err // no index: an empty list
		}
	}
	size := sources.WalkSize(q.Search)
	var seen func([]byte)
	if early := q.Cursor.Early; early != nil && after != nil && total > 0 && !byPIT {
		// A page past the first carries its total: the next position is
		// the sort values of the page's last hit, found in the answer's
		// bytes before they are decoded.
		seen = func(data []byte) {
			if values, ok := lastSort(data, size); ok {
				early(sources.Position{Values: values, Total: total})
			}
		}
	}
	r, err := s.walkSearch(ctx, res.Collection, bound.bounded(body), pit, seen)
	if err != nil {
		return nil, err
	}
	if bound != nil && bound.missingLast && len(r.docs) <= size {
		// The range has run out, and the documents without the key, which
		// it leaves out, sort after all the others: they end the walk.
		rest, err := s.walkSearch(ctx, res.Collection, bound.lacking(body, size+1-len(r.docs)), cmp.Or(r.pitID, pit), nil)
		if err != nil {
			return nil, err
		}
		r.docs, r.sorts = append(r.docs, rest.docs...), append(r.sorts, rest.sorts...)
		r.pitID = cmp.Or(rest.pitID, r.pitID)
	}
	out := r.result(q.Search)
	if after != nil && total > 0 {
		out.Total = total
	}
	if len(out.Docs) <= size {
		return out, nil
	}
	out.Docs = out.Docs[:size]
	if size == 0 {
		return out, nil
	}
	next := &sources.Position{Values: r.sorts[size-1], Total: out.Total}
	if len(next.Values) == 0 {
		return nil, &Error{Op: "search", Index: s.index(res.Collection), Reason: "a hit of a sorted search has no sort values",
			Kind: sources.ErrUnavailable}
	}
	if byPIT {
		// The id may change from one search to the next: the newest is
		// the one to search.
		next.PIT = cmp.Or(r.pitID, pit)
		next.Expires = s.now().Add(s.keepAlive)
	}
	out.Next = next
	return out, nil
}

// walkSearch runs one search of a walk: of the collection's index, or of
// the point in time pit when there is one (renewing it).
func (s *Store) walkSearch(ctx context.Context, collection string, body *sources.Doc, pit string, seen func([]byte)) (*searchResponse, error) {
	if pit != "" {
		body.Set("pit", sources.D("id", pit, "keep_alive", keepAlive(s.keepAlive)))
	}
	return s.searchSeen(ctx, "search", collection, codec.AppendJSON(nil, body), pit != "", seen)
}

// sortMarker is how a hit's sort values begin in an answer.
const sortMarker = `"sort":[`

// lastSort finds in a search answer's bytes the sort values of hit
// size-1, the last of a page whose search asked for size+1 (WalkSize):
// when the answer holds exactly size+1 sort arrays (Elasticsearch writes
// a hit's after its _source), the one before the last. ok is false when
// it cannot tell (fewer hits: the walk's end; a source with the marker
// in it). A guess: the decoded answer is the truth.
func lastSort(data []byte, size int) (values []any, ok bool) {
	marker := []byte(sortMarker)
	if size <= 0 || bytes.Count(data, marker) != size+1 {
		return nil, false
	}
	last := bytes.LastIndex(data, marker)
	at := bytes.LastIndex(data[:last], marker)
	if at < 0 {
		return nil, false
	}
	start := at + len(sortMarker) - 1
	end := arrayEnd(data, start)
	if end < 0 {
		return nil, false
	}
	v, err := codec.DecodeJSON(data[start:end], codec.DecodeOptions{})
	values, ok = v.([]any)
	return values, err == nil && ok && len(values) > 0
}

// arrayEnd is the offset just past the array of scalars that opens at
// data[start], -1 when it does not close: brackets inside strings do not
// count.
func arrayEnd(data []byte, start int) int {
	inString := false
	for i := start + 1; i < len(data); i++ {
		switch c := data[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == '[' || c == '{'):
			return -1 // not scalars: leave it to the decoder
		case !inString && c == ']':
			return i + 1
		}
	}
	return -1
}

// A keyRange bounds a walk's page to the documents that follow its
// position on the primary sort key: a range from the position's value,
// inclusive (ties go on by the keys after it).
type keyRange struct {
	field string
	op    string // gte ascending, lte descending
	value any
	date  bool // a date field: the value is epoch milliseconds
	// missingLast: documents without the key sort after every other
	// (Elasticsearch's default), so the range, which leaves them out,
	// is not the whole rest of the walk.
	missingLast bool
}

// walkRange returns the range that bounds a page after the position
// after, nil where none may. A range leaves out the documents that lack
// the field, and matches a document with several values when one of them
// is in it (a superset of those that sort after the position with the
// minimum ascending or the maximum descending, which are a sort's
// defaults and its two other modes that allow one). So it is used only:
//
//   - past the first page, on a body without aggregations (which count
//     every match);
//   - on a field the index maps (IndexMappings) as a date or a keyword,
//     whose sort value is then epoch milliseconds or a string; not on a
//     nested sort, a mode of avg, sum or median, or a missing value
//     other than _first or _last;
//   - when the position holds a value: not null, nor the extreme numbers
//     Elasticsearch sorts missing dates as (the walk is among the
//     documents without one).
//
// Documents without the key sort last unless the sort says missing:
// _first; then walk adds them once the range runs out (lacking).
func (s *Store) walkRange(collection string, body *sources.Doc, after []any) *keyRange {
	if len(after) == 0 || body.Has("aggs") || body.Has("aggregations") {
		return nil
	}
	sort, _ := body.Get("sort")
	keys, _ := sort.([]any)
	if len(keys) == 0 {
		return nil
	}
	field, order, opts := sortKey(keys[0])
	typ := s.mapped[collection][field]
	r := &keyRange{field: field, op: "gte", value: after[0], date: typ == "date", missingLast: true}
	if order == "desc" {
		r.op = "lte"
	}
	for _, f := range opts.Fields() {
		switch f.Key {
		case "order", "unmapped_type":
		case "mode":
			if f.Value != "min" && f.Value != "max" {
				return nil
			}
		case "missing":
			switch f.Value {
			case "_last":
			case "_first":
				r.missingLast = false
			default:
				return nil
			}
		default: // nested, or what the validator may one day let through
			return nil
		}
	}
	switch v := r.value.(type) {
	case int64:
		if typ != "date" || v == math.MinInt64 || v == math.MaxInt64 {
			return nil
		}
	case string:
		if typ != "keyword" {
			return nil
		}
	default:
		return nil
	}
	return r
}

// sortKey reads one key of a sort: {F: {"order": ..., options}},
// {F: "desc"} or "F".
func sortKey(key any) (field, order string, opts *sources.Doc) {
	order = "asc"
	switch k := key.(type) {
	case string:
		return k, order, nil
	case *sources.Doc:
		if k.Len() != 1 {
			return "", "", nil
		}
		f := k.Fields()[0]
		switch spec := f.Value.(type) {
		case string:
			order = spec
		case *sources.Doc:
			if o, ok := spec.String("order"); ok {
				order = o
			}
			opts = spec
		}
		return f.Key, order, opts
	}
	return "", "", nil
}

// bounded returns body with the range among its query's filters; body
// itself, when r is nil.
func (r *keyRange) bounded(body *sources.Doc) *sources.Doc {
	if r == nil {
		return body
	}
	bound := sources.D(r.op, r.value)
	if r.date {
		bound.Set("format", "epoch_millis")
	}
	return withFilter(body, sources.D("range", sources.D(r.field, bound)))
}

// lacking returns body asking for the n first documents without the key
// after the position: those the range leaves out.
func (r *keyRange) lacking(body *sources.Doc, n int) *sources.Doc {
	out := withFilter(body, sources.D("bool", sources.D("must_not", []any{sources.D("exists", sources.D("field", r.field))})))
	out.Set("size", int64(n))
	return out
}

// withFilter returns a copy of body whose query must match filter too:
// {"bool": {"must": [query], "filter": [filter]}}. Never added to the
// query's own bool, where a filter would make its should clauses
// optional.
func withFilter(body *sources.Doc, filter *sources.Doc) *sources.Doc {
	out := body.Clone()
	b := sources.NewDoc()
	if q, ok := out.Get("query"); ok {
		b.Set("must", []any{q})
	}
	b.Set("filter", []any{filter})
	out.Set("query", sources.D("bool", b))
	return out
}

// keepAlive writes d in Elasticsearch's time units.
func keepAlive(d time.Duration) string {
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"
}

// openPIT opens a point in time on a collection's index, "" when the
// index does not exist. Counted as op "pit".
func (s *Store) openPIT(ctx context.Context, collection string) (_ string, err error) {
	index := s.index(collection)
	if !validIndex(index) {
		return "", fmt.Errorf("elastic: pit: invalid index name %q", index)
	}
	done := s.queries.Start(backend, sources.MetricName(collection), "pit")
	defer func() { done(sources.FailureKind(err)) }()
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req := esapi.OpenPointInTimeRequest{Index: []string{index}, KeepAlive: keepAlive(s.keepAlive),
		Instrument: s.client.InstrumentationEnabled()}
	res, err := req.Do(tctx, s.client)
	if err != nil {
		return "", transportError(ctx, tctx, "pit", index, err)
	}
	defer res.Body.Close()
	data, err := readBounded(res.Body, maxErrorResponse)
	if err != nil && !errors.Is(err, errTooLarge) {
		return "", transportError(ctx, tctx, "pit", index, err)
	}
	if res.StatusCode != http.StatusOK {
		if _, err := s.statusError(ctx, "pit", index, res.StatusCode, data); err != nil {
			return "", err
		}
		return "", nil // a missing index
	}
	v, err := codec.DecodeJSON(bytes.TrimSpace(data), codec.DecodeOptions{})
	root, _ := v.(*sources.Doc)
	id, _ := root.String("id")
	if err != nil || id == "" {
		return "", &Error{Op: "pit", Index: index, Status: res.StatusCode, Reason: "no point in time id in the answer",
			Kind: sources.ErrUnavailable}
	}
	return id, nil
}

// serverMajor is the server's major version: learnt from GET / once
// (Ping learns it too), asked again after a failure.
func (s *Store) serverMajor(ctx context.Context) (int, error) {
	if m := s.major.Load(); m > 0 {
		return int(m), nil
	}
	if _, err := s.info(ctx, "version"); err != nil {
		return 0, err
	}
	if m := s.major.Load(); m > 0 {
		return int(m), nil
	}
	return 0, &Error{Op: "version", Reason: "GET / names no version", Kind: sources.ErrUnavailable}
}
