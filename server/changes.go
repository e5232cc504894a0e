package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/server/negotiate"
	"github.com/prodapi/prodapi/server/query"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// A ChangeLog is the fleet's log of changes (package cache keeps it),
// served at /changes.
type ChangeLog interface {
	// Read returns at most max entries after since, keeping only those
	// whose Resource is in resources (never nil: the resources the
	// token's scopes allow, narrowed by ?resources=), and the token to
	// resume from: the position of the last entry examined, filtered out
	// or not, so that a client never re-reads what it could not see and
	// filtered entries show in no count. With no entry after since, next
	// is since (or the log's current end for since "" and "now").
	// since "" means from the oldest entry kept; "now" from the current
	// end (no entries; next is the current end).
	//
	// Errors: one wrapping sources.ErrExpired when since is older than
	// the oldest entry kept (410); one wrapping sources.ErrInvalid when
	// since is malformed (400, a safety net behind Valid); anything else
	// is the log being unavailable (503).
	Read(ctx context.Context, since string, resources []string, max int) (entries []sources.LogEntry, next string, err error)
	// Wait returns nil once the log holds an entry after since (of any
	// resource), or ctx's error when ctx ends first. Thousands of long
	// polls and streams wait at once: it must cost no backend call per
	// waiter.
	Wait(ctx context.Context, since string) error
	// Valid reports whether token is syntactically a token of this log
	// ("" and "now" are not tokens), so that a malformed one is a 400
	// without a backend call.
	Valid(token string) bool
}

// StreamOptions bound the /changes requests that wait: event streams
// and long polls. The zero value of each field works.
type StreamOptions struct {
	// Max is the most event streams open at once
	// (PRODAPI_CHANGES_MAX_STREAMS); 0 means 1000. Beyond it a new
	// stream is refused with 503 and Retry-After.
	Max int
	// WriteTimeout bounds each write of a stream or of a long poll's
	// answer (PRODAPI_CHANGES_WRITE_TIMEOUT), in place of the server's
	// write timeout, which would cut them: a consumer that does not take
	// a write in this time is dropped. 0 means 10s.
	WriteTimeout time.Duration
	// Heartbeat is the longest a stream stays silent: after this long
	// without a write, it writes a comment. 0 means 15s.
	Heartbeat time.Duration
}

const (
	defaultMaxStreams         = 1000
	defaultStreamWriteTimeout = 10 * time.Second
	defaultHeartbeat          = 15 * time.Second
	// maxWait is the longest long poll, in seconds.
	maxWait = 60
)

func (o StreamOptions) withDefaults() StreamOptions {
	if o.Max <= 0 {
		o.Max = defaultMaxStreams
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = defaultStreamWriteTimeout
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = defaultHeartbeat
	}
	return o
}

// Messages of /changes.
const (
	msgChangesGone        = "since: the token is older than the changes kept; resync: take since=now, then walk the lists with cursor= and follow /changes from that token"
	msgChangesUnavailable = "The change log is temporarily unavailable. Please try again shortly."
	msgTooManyStreams     = "This server cannot open another change stream now. Please try again shortly, or poll /changes with wait=."
	msgStreamExpired      = "The token has expired: reconnect with a new token, sending Last-Event-ID."
	msgBadToken           = "not a token of this change log: resume from the _meta.since (or the event id) of an answer, or take since=now"
)

// Transports, the label of the delivery metrics.
const (
	transportJSON = "json"
	transportSSE  = "sse"
)

// Reasons a stream is ended by the server, the label of
// prodapi_changes_consumers_dropped_total.
const (
	dropSlow        = "slow"        // a write did not complete in StreamOptions.WriteTimeout
	dropExpired     = "expired"     // the token expired
	dropGone        = "gone"        // the stream's position was trimmed from the log
	dropUnavailable = "unavailable" // the log failed
	dropShutdown    = "shutdown"    // the server drains
)

// changeMetrics are the HTTP side's series of the change feed (the log
// counts what it appends).
type changeMetrics struct {
	streams   metrics.GaugeSeries
	delivered *metrics.Counter
	lag       *metrics.Histogram
	dropped   *metrics.Counter
	gone      metrics.CounterSeries
	refused   metrics.CounterSeries
}

// lagBuckets are the delivery lag's buckets, in seconds: from a stream
// that follows within milliseconds to a client catching up on a day.
var lagBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 86400}

func newChangeMetrics(m *metrics.Metrics) *changeMetrics {
	cm := &changeMetrics{
		streams: m.Gauge("prodapi_changes_streams", "Open /changes event streams.").Series(),
		delivered: m.Counter("prodapi_changes_delivered_total",
			"Change-log entries written to clients, by transport: json (/changes answers, long polls included), sse (events of a stream).",
			"transport"),
		lag: m.Histogram("prodapi_changes_delivery_lag_seconds",
			"Time from a change (its entry's time, when its feed reported one) to the write of its entry to a client, by transport.",
			lagBuckets, "transport"),
		dropped: m.Counter("prodapi_changes_consumers_dropped_total",
			"Event streams the server ended, by reason: slow (a write did not complete within PRODAPI_CHANGES_WRITE_TIMEOUT), "+
				"expired (the token expired), gone (the stream's position was trimmed from the log), unavailable (the log failed), "+
				"shutdown (the server drained).",
			"reason"),
		gone: m.Counter("prodapi_changes_gone_total",
			"/changes requests and streams answered 410: a resume token older than the changes kept.").Series(),
		refused: m.Counter("prodapi_changes_streams_refused_total",
			"Event streams refused with 503: PRODAPI_CHANGES_MAX_STREAMS were open, or the server was draining.").Series(),
	}
	// Every series exposed from the start, at 0.
	for _, t := range []string{transportJSON, transportSSE} {
		cm.delivered.Add(0, t)
		cm.lag.Observer(t)
	}
	for _, r := range []string{dropSlow, dropExpired, dropGone, dropUnavailable, dropShutdown} {
		cm.dropped.Add(0, r)
	}
	return cm
}

// deliver counts entries written to a client at now.
func (cm *changeMetrics) deliver(transport string, entries []sources.LogEntry, now time.Time) {
	cm.delivered.Add(uint64(len(entries)), transport)
	lag := cm.lag.Observer(transport)
	for _, e := range entries {
		if !e.At.IsZero() {
			lag.Observe(max(now.Sub(e.At), 0).Seconds())
		}
	}
}

// changeParams are a /changes request's parameters, checked.
type changeParams struct {
	// since is where to read from: "", "now" or a token of the log (for
	// a stream, Last-Event-ID when sent).
	since string
	// asked are the resources of ?resources=, in table order; nil when
	// the parameter is absent or empty.
	asked []*sources.Resource
	// names are the resources to read, asked or else allowed, in table
	// order.
	names  []string
	max    int
	wait   int // seconds
	pretty bool
	stream bool
}

// getChanges answers /changes: authentication and scopes (401, 403),
// then parameters (400), then the resources asked for against the
// scopes (403), then the log. Nothing refused reaches the log.
func (s *Server) getChanges(w http.ResponseWriter, r *http.Request) error {
	c, allowed, err := s.changeScopes(w, r)
	if err != nil {
		return err
	}
	p, err := s.parseChanges(r)
	if err != nil {
		return err
	}
	if err := p.narrow(c, allowed); err != nil {
		return err
	}
	if p.stream {
		return s.streamChanges(w, r, c, p)
	}
	return s.pollChanges(w, r, p)
}

// changeScopes authenticates the request and returns the resources its
// token may read, in table order: every resource with authentication
// off. A token that may read none is a 403.
func (s *Server) changeScopes(w http.ResponseWriter, r *http.Request) (*Claims, []*sources.Resource, error) {
	c, err := s.authenticate(w, r)
	if err != nil {
		return nil, nil, err
	}
	if c == nil {
		return nil, sources.Resources(), nil
	}
	var allowed []*sources.Resource
	for _, res := range sources.Resources() {
		if c.Has(res.Scope) {
			allowed = append(allowed, res)
		}
	}
	if len(allowed) == 0 {
		var scopes []string // any of them would do
		for _, res := range sources.Resources() {
			if !slices.Contains(scopes, res.Scope) {
				scopes = append(scopes, res.Scope)
			}
		}
		return nil, nil, forbidden(c, strings.Join(scopes, " "))
	}
	return c, allowed, nil
}

// parseChanges checks the parameters of a /changes request (400s),
// without calling the log but for Valid.
func (s *Server) parseChanges(r *http.Request) (*changeParams, error) {
	vals, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, &httperr.Error{Status: http.StatusBadRequest, Msg: "query string: malformed (an invalid %-escape, or a \";\")", Err: err}
	}
	events := negotiate.EventStream(r)
	p := &changeParams{
		since:  vals.Get("since"),
		max:    query.MaxResults(vals.Get("max_results")),
		pretty: vals.Has("pretty"),
		// HEAD answers the headers of the first read, and never waits.
		stream: events && r.Method != http.MethodHead,
	}
	if p.since != "" && p.since != "now" && !s.changes.Valid(p.since) {
		return nil, badRequest("since: " + msgBadToken)
	}
	if id := header(r.Header, "Last-Event-Id"); id != "" && events {
		if !s.changes.Valid(id) {
			return nil, badRequest("Last-Event-ID: " + msgBadToken)
		}
		p.since = id // a reconnecting EventSource repeats its URL's since: the event id is newer
	}
	if v := vals.Get("resources"); v != "" {
		asked := map[*sources.Resource]bool{}
		for name := range strings.SplitSeq(v, ",") {
			name = strings.TrimSpace(name)
			if name == "" {
				continue
			}
			res, ok := sources.ResourceByName(name)
			if !ok {
				return nil, badRequest(fmt.Sprintf("resources: unknown resource %q; the resources are %s",
					truncateUTF8(name, 64), strings.Join(resourceNames(sources.Resources()), ", ")))
			}
			asked[res] = true
		}
		for _, res := range sources.Resources() {
			if asked[res] {
				p.asked = append(p.asked, res)
			}
		}
	}
	if v := strings.TrimSpace(vals.Get("wait")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxWait {
			return nil, badRequest(fmt.Sprintf("wait: a whole number of seconds from 0 to %d", maxWait))
		}
		p.wait = n
	}
	return p, nil
}

func badRequest(msg string) *httperr.Error {
	return &httperr.Error{Status: http.StatusBadRequest, Msg: msg}
}

func resourceNames(rs []*sources.Resource) []string {
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Name
	}
	return names
}

// narrow sets the resources to read: those asked for, each of which the
// token must be allowed (403 otherwise: an explicit ask is never
// silently cut), or else all it is allowed.
func (p *changeParams) narrow(c *Claims, allowed []*sources.Resource) error {
	if p.asked == nil {
		p.names = resourceNames(allowed)
		return nil
	}
	for _, res := range p.asked {
		if !slices.Contains(allowed, res) {
			return forbidden(c, res.Scope)
		}
	}
	p.names = resourceNames(p.asked)
	return nil
}

// readChanges reads the log after since, for the resources p reads and
// those alone.
func (s *Server) readChanges(ctx context.Context, since string, p *changeParams) ([]sources.LogEntry, string, error) {
	entries, next, err := s.changes.Read(ctx, since, p.names, p.max)
	return p.visible(entries), next, err
}

// visible keeps the entries of the resources read. The log filters
// already; this makes sure that no other resource ever leaves. The
// log's slice is never written to: it may be the log's own memory.
func (p *changeParams) visible(entries []sources.LogEntry) []sources.LogEntry {
	for i, e := range entries {
		if !slices.Contains(p.names, e.Resource) {
			kept := slices.Clone(entries[:i])
			for _, e := range entries[i+1:] {
				if slices.Contains(p.names, e.Resource) {
					kept = append(kept, e)
				}
			}
			return kept
		}
	}
	return entries
}

// changeLogError is what the client sees of a failed read of the log.
func (s *Server) changeLogError(err error) error {
	switch {
	case errors.Is(err, sources.ErrExpired):
		s.changeMetrics.gone.Inc()
		return &httperr.Error{Status: http.StatusGone, Msg: msgChangesGone, Err: err}
	case errors.Is(err, sources.ErrInvalid):
		return &httperr.Error{Status: http.StatusBadRequest, Msg: "since: " + msgBadToken, Err: err}
	case errors.Is(err, context.Canceled):
		return err // the client went away
	}
	return &httperr.Error{Status: http.StatusServiceUnavailable, Msg: msgChangesUnavailable, Err: err,
		Header: http.Header{"Retry-After": {"5"}}}
}

// pollChanges answers /changes in JSON: the entries after since, or,
// with none and wait=, the first that arrive within wait seconds.
func (s *Server) pollChanges(w http.ResponseWriter, r *http.Request, p *changeParams) error {
	entries, next, err := s.readChanges(r.Context(), p.since, p)
	if err != nil {
		return s.changeLogError(err)
	}
	if len(entries) == 0 && p.wait > 0 && r.Method != http.MethodHead {
		entries, next, err = s.longPoll(r, p, next)
		// The server's write timeout has run since the request came: the
		// answer gets its own.
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.streamOpts.WriteTimeout))
		if err != nil {
			return s.changeLogError(err)
		}
	}
	body := changesBody(p, entries, next)
	h := w.Header()
	h["Content-Type"] = hdrJSON
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodHead {
		return nil
	}
	if _, err := w.Write(body); err == nil {
		s.changeMetrics.deliver(transportJSON, entries, s.now())
	}
	return nil
}

// errWaitOver ends a long poll that saw nothing in its time.
var errWaitOver = errors.New("server: the long poll's time is over")

// longPoll waits up to p.wait seconds for entries after since that the
// request may see, and returns them, or none and the position to resume
// from when the time is over or the server drains.
func (s *Server) longPoll(r *http.Request, p *changeParams, since string) ([]sources.LogEntry, string, error) {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	leave, err := s.waiters.join(cancel, false)
	if err != nil {
		return nil, since, nil // draining: answer at once
	}
	defer leave()
	stop := s.afterFunc(time.Duration(p.wait)*time.Second, func() { cancel(errWaitOver) })
	defer stop()
	for {
		if err := s.changes.Wait(ctx, since); err != nil {
			return nil, since, r.Context().Err() // nil when the time is over or the server drains
		}
		entries, next, err := s.readChanges(ctx, since, p)
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
