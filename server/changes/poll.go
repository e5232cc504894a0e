package changes

import (
	"context"
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
// and wait=, the first that arrive within wait seconds. A GET with wait=
// is a long poll, timed from start, when the feed began to answer it, in
// prodapi_changes_wait_seconds rather than the server's request
// histogram.
func (f *Feed) poll(w http.ResponseWriter, r *http.Request, c Caller, p *changeParams, start time.Time) error {
	if p.wait > 0 && r.Method != http.MethodHead {
		c.Waits()
		defer func() { f.metrics.pollTime.Observe(time.Since(start).Seconds()) }()
	}
	entries, next, err := f.read(r.Context(), p.since, p)
	if err != nil {
		return f.logError(err)
	}
	if len(entries) == 0 && p.wait > 0 && r.Method != http.MethodHead {
		entries, next, err = f.longPoll(r, p, next)
		// The server's write timeout has run since the request came: the
		// answer gets its own.
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(f.opts.WriteTimeout))
		if err != nil {
			return f.logError(err)
		}
	}
	body := changesBody(p, entries, next)
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	if _, err := w.Write(body); err == nil {
		f.metrics.deliver(transportJSON, entries, f.opts.Now())
	}
	return nil
}

// errWaitOver ends a long poll that saw nothing in its time.
var errWaitOver = errors.New("changes: the long poll's time is over")

// longPoll waits up to p.wait seconds for entries after since that the
// request may see, and returns them, or none and the position to resume
// from when the time is over or the server drains.
func (f *Feed) longPoll(r *http.Request, p *changeParams, since string) ([]sources.LogEntry, string, error) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	leave, err := f.waiters.join(cancel, false)
	if err != nil {
		return nil, since, nil // draining: answer at once
	}
	defer leave()
	stop := f.opts.AfterFunc(time.Duration(p.wait)*time.Second, func() { cancel(errWaitOver) })
	defer stop()
	for {
		if err := f.log.Wait(ctx, since); err != nil {
			if ctx.Err() == nil {
				return nil, since, err // the log's own answer: expired (410) or unavailable (503)
			}
			return nil, since, r.Context().Err() // nil when the time is over or the server drains
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

// changesBody is a /changes answer: {"_items", "_links", "_meta"}.
func changesBody(p *changeParams, entries []sources.LogEntry, next string) []byte {
	items := make([]any, 0, len(entries))
	for _, e := range entries {
		items = append(items, entryDoc(e))
	}
	links := sources.D(
		"parent", sources.Link("home", "/"),
		"self", sources.Link("changes", p.href(p.since)),
		"next", sources.Link("next page", p.href(next)),
	)
	doc := sources.D("_items", items, "_links", links, "_meta", sources.D("since", next, "max_results", p.max))
	if p.pretty {
		return codec.AppendJSONIndent(nil, doc, "    ")
	}
	return codec.AppendJSON(nil, doc)
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

// href is the link to these parameters resumed from since, in the
// query-string order of list links: max_results (when not 25), then the
// others by name.
func (p *changeParams) href(since string) string {
	var q []string
	if p.max != 25 {
		q = append(q, "max_results="+strconv.Itoa(p.max))
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
