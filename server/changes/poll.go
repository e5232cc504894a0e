package changes

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// poll answers /changes in JSON: the entries after since, or, with none
// and wait=, the first that arrive within wait seconds (never past the
// token's expiry). A GET with wait= is a long poll, timed from start,
// when the feed began to answer it, in prodapi_changes_wait_seconds
// rather than the server's request histogram.
func (f *Feed) poll(w http.ResponseWriter, r *http.Request, c Caller, p *changeParams, start time.Time) error {
	waits := p.wait > 0 && r.Method != http.MethodHead
	if waits {
		c.Waits()
		defer func() { f.metrics.pollTime.Observe(time.Since(start).Seconds()) }()
	}
	entries, next, err := f.read(r.Context(), p.from, p)
	if err != nil {
		return f.logError(err)
	}
	if len(entries) == 0 && waits {
		entries, next, err = f.longPoll(w, r, c, p, next)
		// The server's write timeout has run since the request came: the
		// answer gets its own.
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(f.opts.WriteTimeout))
		if err != nil {
			return f.logError(err)
		}
	}
	pg, err := f.newPage(r.Context(), c, p, entries, next)
	if err != nil {
		return f.logError(err)
	}
	body, err := f.changesBody(p, pg)
	if err != nil {
		return err
	}
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	if _, err := w.Write(body); err == nil {
		f.metrics.deliver(transportJSON, pg.entries, f.opts.Now())
	}
	return nil
}

// errWaitOver ends a long poll that saw nothing in its time (or whose
// token expired).
var errWaitOver = errors.New("changes: the long poll's time is over")

// longPoll waits up to p.wait seconds, and no longer than the caller's
// token lives, for entries after since that the request may see, and
// returns them, or none and the position to resume from when the time is
// over, the server drains, or the connection cap answers it early
// (EndOldestPoll: its connection then closes). A log that cannot be read
// ends it at once with the log's error: an outage is never answered as a
// quiet newsroom. A long poll over a cap (the client's, 429; the
// replica's, 503) is refused.
func (f *Feed) longPoll(w http.ResponseWriter, r *http.Request, c Caller, p *changeParams, since string) ([]sources.LogEntry, string, error) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	wt := &waiter{kind: waitPoll, client: c.Client(), conn: c.Conn(), cancel: cancel}
	switch err := f.waiters.join(ctx, wt); {
	case errors.Is(err, errDraining):
		return nil, since, nil // answer at once
	case err != nil:
		return nil, since, f.refusal(err)
	}
	defer f.waiters.leave(wt)
	f.metrics.polls.Inc()
	defer f.metrics.polls.Dec()
	defer func() {
		if errors.Is(context.Cause(ctx), errEvicted) {
			w.Header().Set("Connection", "close") // the room it was answered early for
		}
	}()
	limit := time.Duration(p.wait) * time.Second
	if left, ok := c.Expires(); ok && left < limit {
		limit = max(left, 0) // the empty page, at the token's expiry
	}
	stop := f.opts.AfterFunc(limit, func() { cancel(errWaitOver) })
	defer stop()
	for {
		if err := f.log.Wait(ctx, since); err != nil {
			if ctx.Err() != nil {
				return nil, since, r.Context().Err() // nil when the time is over or the server drains
			}
			return nil, since, err
		}
		entries, next, err := f.read(ctx, since, p)
		if err != nil {
			if ctx.Err() != nil {
				return nil, since, r.Context().Err()
			}
			return nil, since, err
		}
		if len(entries) > 0 {
			return entries, next, nil
		}
		since = next // only entries the request may not see: wait on past them
	}
}

// changesBody is a /changes answer: {"_items", "_links", "_meta"}, each
// item an entry with its document when include=doc asked for them. Its
// positions are sealed. pretty indents it.
func (f *Feed) changesBody(p *changeParams, pg *page) ([]byte, error) {
	next, err := f.sealed(pg.next)
	if err != nil {
		return nil, err
	}
	links := sources.D(
		"parent", sources.Link("home", "/"),
		"self", sources.Link("changes", p.href(p.since)),
		"next", sources.Link("next page", p.href(next)),
	)
	b := make([]byte, 0, pg.size+1024)
	b = append(b, `{"_items":[`...)
	for i, item := range pg.items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, item...)
	}
	b = append(b, `],"_links":`...)
	b = codec.AppendJSON(b, links)
	b = append(b, `,"_meta":`...)
	b = codec.AppendJSON(b, sources.D("since", next, "max_results", p.max))
	b = append(b, '}')
	if !p.pretty {
		return b, nil
	}
	var out bytes.Buffer
	out.Grow(2 * len(b))
	if err := json.Indent(&out, b, "", "    "); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// entryDoc is one entry as /changes serves it: resource, _id, op,
// changed (null when unknown) and _links.self to the document; a flush
// has neither _id nor _links.
func entryDoc(e sources.LogEntry) *sources.Doc {
	d := sources.D("resource", e.Resource)
	if e.Op != sources.OpFlush {
		d.Set("_id", e.ID)
	}
	d.Set("op", e.Op)
	if e.At.IsZero() {
		d.Set("changed", nil)
	} else {
		d.Set("changed", e.At)
	}
	if res, ok := sources.ResourceByName(e.Resource); ok && e.Op != sources.OpFlush {
		d.Set("_links", sources.D("self", sources.Link(res.ItemTitle, res.Name+"/"+e.ID)))
	}
	return d
}

// href is the link to these parameters resumed from since (a position),
// in the query-string order of list links: max_results (when not 25),
// then the others by name.
func (p *changeParams) href(since string) string {
	var q []string
	if p.max != 25 {
		q = append(q, "max_results="+strconv.Itoa(p.max))
	}
	if p.docs {
		q = append(q, "include=doc")
	}
	if p.pretty {
		q = append(q, "pretty")
	}
	if p.asked != nil {
		q = append(q, "resources="+strings.Join(resourceNames(p.asked), ","))
	}
	if since != "" {
		q = append(q, "since="+url.QueryEscape(since))
	}
	if p.wait > 0 {
		q = append(q, "wait="+strconv.Itoa(p.wait))
	}
	if len(q) == 0 {
		return "changes"
	}
	return "changes?" + strings.Join(q, "&")
}
