// Package changes is the HTTP side of the fleet's change feed: /changes,
// served from the change log (a Log; package cache/changelog keeps it)
// as JSON pages, long polls (wait=) and Server-Sent Events, with its
// options, the waiters that End ends at once, and its metrics.
// Package server mounts it (Feed.Serve) behind its routes, middleware
// and authentication, and writes the errors it returns: the feed writes
// no error envelope but the one a stream's last event carries.
//
// An answer, by what the request asks:
//
//	JSON        the entries after since, at most max_results, with the
//	            position to resume from (_meta.since, _links.next)
//	long poll   the same, but with none yet and wait=N, the first that
//	            arrive within N seconds (at most 60)
//	stream      Accept: text/event-stream: the entries after since (or
//	            Last-Event-ID), then each as it arrives, a comment after
//	            every Heartbeat of silence, and a last "close" event when
//	            the server ends it (the token expired, 410, 503)
//
// Long polls and streams are timed in prodapi_changes_wait_seconds and
// prodapi_changes_stream_seconds, and leave the server's
// prodapi_http_request_duration_seconds, whose latency they would swamp.
package changes

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/server/negotiate"
	"github.com/prodapi/prodapi/server/query"
	"github.com/prodapi/prodapi/sources"
)

// A Log is the fleet's log of changes (package cache/changelog keeps
// it), served at /changes.
type Log interface {
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

// Options configure a Feed. The zero value of each field works.
type Options struct {
	// MaxStreams is the most event streams open at once
	// (PRODAPI_CHANGES_MAX_STREAMS); 0 means 1000. Beyond it a new
	// stream is refused with 503 and Retry-After.
	MaxStreams int
	// WriteTimeout bounds each write of a stream or of a long poll's
	// answer (PRODAPI_CHANGES_WRITE_TIMEOUT), in place of the server's
	// write timeout, which would cut them: a consumer that does not take
	// a write in this time is dropped. 0 means 10s.
	WriteTimeout time.Duration
	// Heartbeat is the longest a stream stays silent: after this long
	// without a write, it writes a comment. 0 means 15s.
	Heartbeat time.Duration
	// Metrics is the registry the feed's series are declared in; nil: one
	// of its own, exposed nowhere.
	Metrics *metrics.Metrics
	// Now is the clock a delivery's lag is measured on; nil means
	// time.Now.
	Now func() time.Time
	// AfterFunc runs f after d unless stop is called first; nil means
	// time.AfterFunc. Tests pass a clock they move.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)
}

const (
	defaultMaxStreams         = 1000
	defaultStreamWriteTimeout = 10 * time.Second
	defaultHeartbeat          = 15 * time.Second
	// maxWait is the longest long poll, in seconds.
	maxWait = 60
)

// Messages of /changes.
const (
	msgChangesGone        = "since: the token is older than the changes kept; resync: take since=now, then walk the lists with cursor= and follow /changes from that token"
	msgChangesUnavailable = "The change log is temporarily unavailable. Please try again shortly."
	msgTooManyStreams     = "This server cannot open another change stream now. Please try again shortly, or poll /changes with wait=."
	msgStreamExpired      = "The token has expired: reconnect with a new token, sending Last-Event-ID."
	msgBadToken           = "not a token of this change log: resume from the _meta.since (or the event id) of an answer, or take since=now"
)

// A Feed answers /changes from a Log. Create it with New; the server
// mounts it.
type Feed struct {
	log     Log
	opts    Options // with the defaults applied
	waiters *waiters
	metrics *changeMetrics
}

// New returns the feed of log.
func New(log Log, opts Options) *Feed {
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = defaultMaxStreams
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = defaultStreamWriteTimeout
	}
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = defaultHeartbeat
	}
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewMetrics()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.AfterFunc == nil {
		opts.AfterFunc = func(d time.Duration, f func()) func() bool { return time.AfterFunc(d, f).Stop }
	}
	return &Feed{log: log, opts: opts, waiters: newWaiters(opts.MaxStreams), metrics: newChangeMetrics(opts.Metrics)}
}

// A Caller is the client of one /changes request, as the server that
// routes it to the feed knows it: authenticated already (the server
// answers 401 before the feed is asked).
type Caller interface {
	// Has reports whether the caller's token grants scope: always, with
	// authentication off.
	Has(scope string) bool
	// Forbidden is the answer (403) to a caller who asked for what scope
	// guards without it; scope may name several, space-separated, any
	// of which would do.
	Forbidden(scope string) error
	// Expires reports how long the caller's token stays valid from the
	// request's time, leeway included; ok is false when it never expires
	// (authentication off).
	Expires() (left time.Duration, ok bool)
	// Waits takes the request out of the server's request-duration
	// histogram: it is a long poll or a stream, which the feed times in
	// its own.
	Waits()
}

// Serve answers a /changes request of c: scopes (403), then parameters
// (400), then the resources asked for against the scopes (403), then the
// log. Nothing refused reaches the log. The error it returns is the
// answer for the server to write; once a stream's answer has begun, it
// is only why the server ended it, for the access log.
func (f *Feed) Serve(w http.ResponseWriter, r *http.Request, c Caller) error {
	start := time.Now()
	allowed, err := readable(c)
	if err != nil {
		return err
	}
	p, err := f.parse(r)
	if err != nil {
		return err
	}
	if err := p.narrow(c, allowed); err != nil {
		return err
	}
	if p.stream {
		return f.stream(w, r, c, p)
	}
	return f.poll(w, r, c, p, start)
}

// End ends every /changes event stream and long poll at once, and
// refuses new ones: a long poll answers with what it has (nothing), a
// stream ends without another word. http.Server.Shutdown waits for
// requests to finish, and these would hold it for their whole length:
// the server's EndStreams, which calls it, is registered with its
// RegisterOnShutdown.
func (f *Feed) End() { f.waiters.drain() }

// readable returns the resources c may read, in table order. A caller
// that may read none is a 403.
func readable(c Caller) ([]*sources.Resource, error) {
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
		return nil, c.Forbidden(strings.Join(scopes, " "))
	}
	return allowed, nil
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

// parse checks the parameters of a /changes request (400s), without
// calling the log but for Valid.
func (f *Feed) parse(r *http.Request) (*changeParams, error) {
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
	if p.since != "" && p.since != "now" && !f.log.Valid(p.since) {
		return nil, badRequest("since: " + msgBadToken)
	}
	if id := r.Header.Get("Last-Event-Id"); id != "" && events {
		if !f.log.Valid(id) {
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
				n := min(len(name), 64) // quoted at most 64 bytes of it, cut at a rune's start
				for n > 0 && n < len(name) && !utf8.RuneStart(name[n]) {
					n--
				}
				return nil, badRequest(fmt.Sprintf("resources: unknown resource %q; the resources are %s",
					name[:n], strings.Join(resourceNames(sources.Resources()), ", ")))
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
func (p *changeParams) narrow(c Caller, allowed []*sources.Resource) error {
	if p.asked == nil {
		p.names = resourceNames(allowed)
		return nil
	}
	for _, res := range p.asked {
		if !slices.Contains(allowed, res) {
			return c.Forbidden(res.Scope)
		}
	}
	p.names = resourceNames(p.asked)
	return nil
}

// read reads the log after since, for the resources p reads and those
// alone.
func (f *Feed) read(ctx context.Context, since string, p *changeParams) ([]sources.LogEntry, string, error) {
	entries, next, err := f.log.Read(ctx, since, p.names, p.max)
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

// logError is what the client sees of a failed read of the log (its
// kind, sources.Classify): 410 for a token older than the log keeps, 400
// for one it does not take, the client's own cancellation as it is
// (the server answers it 499), 503 for anything else.
func (f *Feed) logError(err error) error {
	switch kind, _ := sources.Classify(err); kind {
	case sources.KindExpired:
		f.metrics.gone.Inc()
		return &httperr.Error{Status: http.StatusGone, Msg: msgChangesGone, Err: err}
	case sources.KindInvalid, sources.KindCursor:
		return &httperr.Error{Status: http.StatusBadRequest, Msg: "since: " + msgBadToken, Err: err}
	case sources.KindCanceled:
		return err // the client went away
	}
	return unavailable(err)
}

// unavailable is the 503 of a log that cannot be read.
func unavailable(err error) *httperr.Error {
	return &httperr.Error{Status: http.StatusServiceUnavailable, Msg: msgChangesUnavailable, Err: err,
		Header: http.Header{"Retry-After": {"5"}}}
}
