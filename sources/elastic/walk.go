package elastic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
func (s *Store) walk(ctx context.Context, q *sources.Query) (*sources.Result, error) {
	res := q.Resource
	var after []any
	var pit string
	if a := q.Cursor.After; a != nil {
		after, pit = a.Values, a.PIT
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
	if byPIT && pit == "" {
		var err error
		if pit, err = s.openPIT(ctx, res.Collection); err != nil || pit == "" {
			return &sources.Result{Docs: []*sources.Doc{}}, err // no index: an empty list
		}
	}
	if byPIT {
		body.Set("pit", sources.D("id", pit, "keep_alive", keepAlive(s.keepAlive)))
	}
	r, err := s.search(ctx, "search", res.Collection, codec.AppendJSON(nil, body), byPIT)
	if err != nil {
		return nil, err
	}
	out := r.result(q.Search)
	size := sources.WalkSize(q.Search)
	if len(out.Docs) <= size {
		return out, nil
	}
	out.Docs = out.Docs[:size]
	if size == 0 {
		return out, nil
	}
	next := &sources.Position{Values: r.sorts[size-1]}
	if len(next.Values) == 0 {
		return nil, &Error{Op: "search", Index: s.index(res.Collection), Reason: "a hit of a sorted search has no sort values",
			Kind: sources.ErrUnavailable}
	}
	if byPIT {
		// The id may change from one search to the next: the newest is
		// the one to search.
		next.PIT = pit
		if r.pitID != "" {
			next.PIT = r.pitID
		}
		next.Expires = s.now().Add(s.keepAlive)
	}
	out.Next = next
	return out, nil
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
