// Package changes is the HTTP side of the fleet's change feed: /changes,
// served from the change log (a Log; package cache/changelog keeps it)
// as JSON pages, long polls (wait=) and Server-Sent Events, with its
// options, the waiters that End ends at once, and its metrics; and the
// wait of a list or detail request that names a position of the log
// (min_position, Feed.AtLeast). Package server mounts it (Feed.Serve)
// behind its routes, middleware and authentication, and writes the
// errors it returns: the feed writes no error envelope but the one a
// stream's last event carries.
//
// An answer, by what the request asks:
//
//	JSON        the entries after since, at most max_results and 4 MiB,
//	            with the position to resume from (_meta.since,
//	            _links.next)
//	long poll   the same, but with none yet and wait=N, the first that
//	            arrive within N seconds (at most 60, and never past the
//	            token's expiry)
//	stream      Accept: text/event-stream: the entries after since (or
//	            Last-Event-ID), then each as it arrives, a comment after
//	            every Heartbeat of silence, and a last "close" event when
//	            the server ends it (the token expired, 410, 503; 503 with
//	            a retry of 0 after MaxStreamAge)
//
// With include=doc, each insert, update and replace entry carries its
// document as its detail answers the caller now (Caller.Docs), once this
// replica has applied the entries up to it (Log.WaitApplied).
//
// # Positions
//
// Clients never see the log's own tokens: every position the feed
// writes (_meta.since, _links.next, an event's id) is the token sealed
// (position.go: AES-256-GCM under a key derived from Options.Secret with
// a label of its own, a random nonce, a fixed length), and every one it
// reads (since, Last-Event-ID, min_position) is opened before the log
// sees it. So a token's positions, ids and keepalives are the same bytes
// (but for the sealed values, all of one length) whether or not entries
// it may not read were appended: an id is written only with an entry
// the token may read, and a keepalive is a comment alone.
//
// # Waiters and their caps
//
// A stream, a long poll that waits and a min_position wait are waiters
// (waiters.go): End ends them all at once, and each joins under caps. A
// replica holds at most MaxStreams streams and MaxPolls long polls
// (beyond, 503 with Retry-After); a client (Caller.Client) holds at most
// ClientMaxWaits waiters of all three kinds (beyond, 429 with
// Retry-After), counted across the fleet by a Fleet (the Redis tier:
// each waiter a member with a lease its replica renews, so that a dead
// replica's leave the count on their own), or on this replica without
// one or while it fails. EndOldestPoll answers the longest waiting long
// poll at once, for the server's connection cap. Refusals count in
// prodapi_cap_refusals_total{cap}.
//
// A stream caps its socket's send buffer (64 KiB), so that a consumer
// that stops reading blocks its writes within some 100 KB and
// WriteTimeout drops it; and it lives MaxStreamAge at most (or until its
// token expires, when sooner), so that its client reconnects and its
// token, and the scopes it grants, are checked again.
//
// Long polls and streams are timed in prodapi_changes_wait_seconds and
// prodapi_changes_stream_seconds, and leave the server's
// prodapi_http_request_duration_seconds, whose latency they would swamp.
package changes

import (
	"context"
	"errors"
	"fmt"
	"net"
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
// it), served at /changes. Its tokens never leave the feed unsealed.
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
	// Errors: one wrapping sources.ErrExpired when since cannot be
	// continued (older than the oldest entry kept, of another life of
	// the log, ahead of its head, naming an entry the log lost) (410);
	// one wrapping sources.ErrInvalid when since is malformed (400, a
	// safety net behind Valid); anything else is the log being
	// unavailable (503).
	Read(ctx context.Context, since string, resources []string, max int) (entries []sources.LogEntry, next string, err error)
	// Wait returns nil once the log holds an entry after since (of any
	// resource), or ctx's error when ctx ends first; Read's errors when
	// since cannot be continued or the log cannot be read (it does not
	// wait through an outage). Thousands of long polls and streams wait
	// at once: it must cost no backend call per waiter.
	Wait(ctx context.Context, since string) error
	// WaitApplied returns nil once this replica has applied every entry
	// up to token (its cache invalidated what they changed), ctx's error
	// when ctx ends first, and Read's errors (sources.ErrExpired for a
	// token of another life of the log or ahead of it; one wrapping
	// sources.ErrUnavailable when the log cannot be read). It costs no
	// backend call per waiter, as Wait.
	WaitApplied(ctx context.Context, token string) error
	// Valid reports whether token is syntactically a token of this log
	// ("" and "now" are not tokens). The feed takes positions, never
	// tokens: a token sent as one is of a version of prodapi that did
	// not seal them, and answered 410 (resync).
	Valid(token string) bool
}

// Options configure a Feed. The zero value of each field works.
type Options struct {
	// MaxStreams is the most event streams open at once
	// (PRODAPI_CHANGES_MAX_STREAMS); 0 means 1000. Beyond it a new
	// stream is refused with 503 and Retry-After.
	MaxStreams int
	// MaxPolls is the most long polls waiting at once
	// (PRODAPI_CHANGES_MAX_POLLS); 0 means 1000. Beyond it a long poll
	// that would wait is refused with 503 and Retry-After.
	MaxPolls int
	// ClientMaxWaits is the most event streams, long polls and
	// min_position waits one client (Caller.Client) may hold at once
	// (PRODAPI_CLIENT_MAX_WAITS), counted across the fleet by Fleet;
	// 0: no cap. Beyond it a new one is refused with 429 and
	// Retry-After.
	ClientMaxWaits int
	// Fleet counts each client's waiters across the replicas; nil: each
	// replica counts its own, and a client may hold ClientMaxWaits on
	// each.
	Fleet Fleet
	// MaxStreamAge is the longest an event stream lives
	// (PRODAPI_CHANGES_MAX_STREAM_AGE): then it ends with a close event
	// (503) and a retry of 0, and the client reconnects at once, its
	// token checked anew. 0 means 1h.
	MaxStreamAge time.Duration
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
	// Secret keys the positions the feed hands out (the cursor secret,
	// under a label of their own): replicas behind one load balancer
	// need the same. Nil: a random one of this process's own, so that a
	// position fails (410) after a restart and on another replica.
	Secret []byte
	// MinPositionWait is the longest a list or detail request with
	// min_position waits for this replica to apply the position
	// (PRODAPI_MIN_POSITION_WAIT), and include=doc for the entries of a
	// page; then 503 with Retry-After. 0 means 2s.
	MinPositionWait time.Duration
	// SearchLag is how long after a change the search index is assumed
	// to show it (the cache's Options.SearchLag): a search list with
	// min_position is answered from no list loaded sooner than this
	// after the position was handed out. 0 means 2s.
	SearchLag time.Duration
}

const (
	defaultMaxStreams         = 1000
	defaultMaxPolls           = 1000
	defaultMaxStreamAge       = time.Hour
	defaultStreamWriteTimeout = 10 * time.Second
	defaultHeartbeat          = 15 * time.Second
	defaultMinPositionWait    = 2 * time.Second
	defaultSearchLag          = 2 * time.Second
	// maxWait is the longest long poll, in seconds.
	maxWait = 60
)

// Messages of /changes.
const (
	msgChangesGone        = "since: this position can no longer be followed (older than the changes kept, or the log lost entries after it, or sealed under another secret); resync: take since=now, then walk the lists with cursor= and follow /changes from that position"
	msgChangesUnavailable = "The change log is temporarily unavailable. Please try again shortly."
	msgTooManyStreams     = "This server cannot open another change stream now. Please try again shortly, or poll /changes with wait=."
	msgStreamExpired      = "The token has expired: reconnect with a new token, sending Last-Event-ID."
	msgStreamAge          = "This stream has been open for as long as a stream may be: reconnect now, sending Last-Event-ID (the token is checked again)."
	msgBadToken           = "not a position of this change log: resume from the _meta.since (or the event id) of an answer, or take since=now"
	msgBadInclude         = "include: doc is the only value (each entry then carries its document)"
)

// A Feed answers /changes from a Log. Create it with New; the server
// mounts it.
type Feed struct {
	log       Log
	opts      Options // with the defaults applied
	positions *positions
	waiters   *waiters
	metrics   *changeMetrics
}

// New returns the feed of log.
func New(log Log, opts Options) *Feed {
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = defaultMaxStreams
	}
	if opts.MaxPolls <= 0 {
		opts.MaxPolls = defaultMaxPolls
	}
	if opts.MaxStreamAge <= 0 {
		opts.MaxStreamAge = defaultMaxStreamAge
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
	if opts.MinPositionWait <= 0 {
		opts.MinPositionWait = defaultMinPositionWait
	}
	if opts.SearchLag <= 0 {
		opts.SearchLag = defaultSearchLag
	}
	return &Feed{log: log, opts: opts, positions: newPositions(opts.Secret, opts.Now),
		waiters: newWaiters(opts), metrics: newChangeMetrics(opts.Metrics)}
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
	// Docs returns the body of each document's detail as it would
	// answer the caller now (the href of an entry's _links.self, without
	// parameters), or nil where it would answer 404: include=doc. An
	// entry the caller may read is of a resource it may read. The error
	// is the answer to give (the detail's own failure: 503, 504...).
	Docs(ctx context.Context, refs []DocRef) ([][]byte, error)
	// Client names the client whose cap (Options.ClientMaxWaits) the
	// request's waits count against; "": none.
	Client() string
	// Conn is the connection the request came on, as the server
	// accepted it; nil when unknown. A stream caps its send buffer
	// (SetWriteBuffer, through the wrappers' NetConn), and EndOldestPoll
	// returns a long poll's.
	Conn() net.Conn
}

// A DocRef names the document of an entry.
type DocRef struct {
	Resource *sources.Resource
	ID       string
}

// Serve answers a /changes request of c: scopes (403), then parameters
// (400), then the resources asked for against the scopes (403), then the
// position (410), then the log (410, 503) and, with include=doc, the
// documents (503, 504). Nothing refused reaches the log. The error it returns is the
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
	if p.gone != nil {
		f.metrics.gone.Inc()
		return p.gone
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

// EndOldestPoll answers the long poll that has waited the longest at
// once, with what it has (nothing: the empty page and its _meta.since),
// on a connection that then closes, and returns that connection (nil
// when no long poll waits): the server's connection cap
// (PRODAPI_MAX_CONNS) makes room with it for a new connection when none
// is idle.
func (f *Feed) EndOldestPoll() net.Conn { return f.waiters.endOldestPoll() }

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
	// since is the since parameter as the client sent it, for the self
	// link.
	since string
	// from is where to read from: "", "now" or a token of the log, the
	// position since (for a stream, Last-Event-ID when sent) seals.
	from string
	// gone is the 410 of a position that does not open, answered once
	// the resources are checked against the scopes.
	gone error
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
	docs   bool // include=doc
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
	if err := f.positionOf(p, r, events); err != nil {
		return nil, err
	}
	switch v := vals.Get("include"); v {
	case "":
	case "doc":
		p.docs = true
	default:
		return nil, badRequest(msgBadInclude)
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

// positionOf sets where p reads from: the position since names (or,
// on a stream, Last-Event-ID: a reconnecting EventSource repeats its
// URL's since, and the event id is newer). A position not of the shape
// is a 400 now; one that does not open, a 410 once the resources are
// checked (p.gone).
func (f *Feed) positionOf(p *changeParams, r *http.Request, events bool) error {
	pos, param := p.since, "since"
	if id := r.Header.Get("Last-Event-Id"); id != "" && events {
		pos, param = id, "Last-Event-ID"
	}
	if param == "since" && (pos == "" || pos == "now") {
		p.from = pos
		return nil
	}
	from, err := f.open(pos, param)
	switch {
	case isGone(err):
		p.gone = err
	case err != nil:
		return err
	}
	p.from = from
	return nil
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

// read reads the log after since (a token, "" or "now"), for the
// resources p reads and those alone.
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
// kind, sources.Classify): 410 for a token the log cannot continue, 400
// for one it does not take, the client's own cancellation as it is
// (the server answers it 499), 503 for anything else. An answer already
// chosen (an *httperr.Error: a document's failure, include=doc) stays as
// it is.
func (f *Feed) logError(err error) error {
	if _, ok := errors.AsType[*httperr.Error](err); ok {
		return err
	}
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
