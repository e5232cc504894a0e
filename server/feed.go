package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/prodapi/prodapi/server/changes"
	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/sources"
)

// getChanges authenticates a /changes request (401), admits it at its
// client's limit (429; a page costs 1) and hands it to the feed, which
// answers it or returns the failure for handle to write. The documents
// a page includes load through the cache, with the client in the
// request's context.
func (s *Server) getChanges(w http.ResponseWriter, r *http.Request) error {
	c, err := s.authenticate(w, r)
	if err != nil {
		return err
	}
	if err := s.admit(w, r, c); err != nil {
		return err
	}
	if ctx := s.loadContext(w, r); ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	return s.feed.Serve(w, r, caller{s: s, w: w, claims: c, client: s.clientOf(w, r), conn: connOf(r)})
}

// A caller is a /changes request's client as the feed sees it: its
// verified token, nil with authentication off; the name its caps count
// it by (clientOf), and its connection (connOf).
type caller struct {
	s      *Server
	w      http.ResponseWriter
	claims *Claims
	client string
	conn   net.Conn
}

var _ changes.Caller = caller{}

func (c caller) Has(scope string) bool { return c.claims == nil || c.claims.Has(scope) }

func (c caller) Forbidden(scope string) error { return forbidden(c.claims, scope) }

func (c caller) Expires() (time.Duration, bool) {
	if c.claims == nil {
		return 0, false
	}
	return c.claims.Expires.Add(c.s.auth.opts.Leeway).Sub(c.s.requestTime(c.w)), true
}

func (c caller) Client() string { return c.client }

func (c caller) Conn() net.Conn { return c.conn }

func (c caller) Waits() {
	if info := infoOf(c.w); info != nil {
		info.untimed = true
	}
}

// Docs are the details of refs as GET <resource>/<id> answers them now:
// the queries a detail without parameters makes, loaded together
// (loadMany). A document the detail answers 404 is nil; the answer of
// one that fails, or comes back incomplete, is the whole call's.
func (c caller) Docs(ctx context.Context, refs []changes.DocRef) ([][]byte, error) {
	s := c.s
	bodies := make([][]byte, len(refs))
	var qs []*sources.Query
	var at []int
	for i, ref := range refs {
		if !validID(ref.ID) {
			continue // the routing 404
		}
		q, err := s.queries.parse(ref.Resource, ref.ID, "")
		if err != nil {
			return nil, errorOf(err)
		}
		qs, at = append(qs, q), append(at, i)
	}
	reps, err := s.loadMany(ctx, qs)
	if err != nil {
		return nil, errorOf(err)
	}
	for k, rep := range reps {
		ref := refs[at[k]]
		switch {
		case rep.Status == http.StatusNotFound:
			continue
		case rep.Missing != nil:
			// Served alone, it would be marked incomplete and never kept:
			// a copy would keep it.
			return nil, errorOf(fmt.Errorf("server: %s/%s is incomplete (%s): %w",
				ref.Resource.Name, ref.ID, strings.Join(rep.Missing, ", "), sources.ErrUnavailable))
		}
		body := rep.Body
		if body == nil && rep.Gzip != nil {
			if body, err = gunzip(rep.Gzip); err != nil {
				return nil, errorOf(fmt.Errorf("server: decompressing a cached body: %w", err))
			}
		}
		bodies[at[k]] = body
	}
	return bodies, nil
}

// A batchLoader loads several details at once (the cache, the
// renderer): reps[i] answers qs[i].
type batchLoader interface {
	LoadMany(ctx context.Context, qs []*sources.Query) ([]*sources.Representation, error)
}

// loadMany loads the details qs: at once when the loader batches, one
// Load each otherwise.
func (s *Server) loadMany(ctx context.Context, qs []*sources.Query) ([]*sources.Representation, error) {
	if len(qs) == 0 {
		return nil, nil
	}
	if bl, ok := s.load.(batchLoader); ok {
		return bl.LoadMany(ctx, qs)
	}
	reps := make([]*sources.Representation, len(qs))
	for i, q := range qs {
		rep, err := s.load.Load(ctx, q)
		if err != nil {
			return nil, err
		}
		reps[i] = rep
	}
	return reps, nil
}

// atLeast makes q a query that reflects every change up to the position
// pos, a request's min_position: it waits for this replica to apply it
// (changes.Feed.AtLeast; the wait counts against client's cap) and
// returns a copy of q with its Freshness, which the cache answers from
// nothing older.
func (s *Server) atLeast(ctx context.Context, client string, q *sources.Query, pos string) (*sources.Query, error) {
	if s.feed == nil {
		return nil, &httperr.Error{Status: http.StatusBadRequest, Msg: msgNoChangeLog}
	}
	after, err := s.feed.AtLeast(ctx, client, pos, q.Resource.Search && !q.IsDetail())
	if err != nil {
		return nil, err
	}
	fq := *q // q may be shared (the query memo): never modified
	fq.Fresh = &sources.Freshness{StoredAfter: after}
	return &fq, nil
}

// msgNoChangeLog answers min_position on a server without a change log.
const msgNoChangeLog = "min_position: this server keeps no change log"

// cutMinPosition takes min_position out of a raw query string: the
// rest, which the query parser (and its memo) reads as if it had never
// been there, so that it is never part of a cache key; its first value;
// and whether it was there. A value that does not unescape is a 400.
func cutMinPosition(raw string) (rest, pos string, ok bool, err error) {
	if !strings.Contains(raw, "min") && !strings.Contains(raw, "%") {
		return raw, "", false, nil // most requests: nothing to cut
	}
	var kept []string
	for seg := range strings.SplitSeq(raw, "&") {
		name, value, _ := strings.Cut(seg, "=")
		if n, uerr := url.QueryUnescape(name); uerr != nil || n != "min_position" {
			kept = append(kept, seg)
			continue
		}
		if !ok {
			if pos, err = url.QueryUnescape(value); err != nil {
				return "", "", false, &httperr.Error{Status: http.StatusBadRequest,
					Msg: "query string: malformed (invalid %-escape)", Err: err}
			}
			ok = true
		}
	}
	if !ok {
		return raw, "", false, nil
	}
	return strings.Join(kept, "&"), pos, true, nil
}
