// Package server serves the /prodapi/v1 API over HTTP: routing,
// middleware, token checks, parameter validation (server/query), and
// writing the representations a Loader (the cache, in front of the
// Renderer) produces, and every error a handler returns (errors.go, in
// the envelope server/httperr writes). It mounts /changes, whose answers
// are server/changes's, behind the same routes, middleware and token
// checks, and has the feed wait before a list or detail that names
// min_position (feed.go). The probes (/healthz, /readyz) and /metrics are
// not the API's: OpsHandler serves them, for a listener of their own. It
// never imports a backend driver or adapter.
package server

import (
	"context"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/prodapi/prodapi/server/changes"
	"github.com/prodapi/prodapi/server/fairshare"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/server/query"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// Options configure a Server. The zero value of each field works.
type Options struct {
	// Prefix is PRODAPI_URL_PREFIX: the API is served at /<Prefix>/v1.
	Prefix string
	// BaseURL is PRODAPI_URL, the service's public URL, named in the
	// served OpenAPI document; empty means http://localhost:5500.
	BaseURL string
	Auth    AuthOptions
	// Assets serves /assets/<media_id>; nil answers 404.
	Assets sources.AssetStore
	// Checks are probed by /readyz (OpsHandler), which reports each one's
	// state in its body and in prodapi_check_up{check}.
	Checks []Check
	// ReadyRequiresBackends makes readiness depend on the backends
	// (PRODAPI_READY_REQUIRES_BACKENDS): /readyz answers 503 while no
	// critical check passes. By default readiness is the replica's own,
	// 200 until it drains: every replica shares the backends, so in an
	// outage a rule on them would take the whole fleet out at once, and
	// with it the stale entries it would serve.
	ReadyRequiresBackends bool
	// Metrics are exposed at OpsHandler's /metrics; nil exposes a
	// registry of the server's own.
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	// AccessLog, when set, receives the access log: one JSON line per
	// request, in log/slog's JSONHandler format, one Write each. Unset,
	// access lines go through Logger.
	AccessLog io.Writer
	// AccessLogHits is the share of cache hits the access log writes a
	// line for (one in round(1/share)); nil writes every hit, 0 none.
	// Every other request is always logged.
	AccessLogHits *float64
	// TrustedProxyHeader names the header the proxy in front of the
	// service writes the client's address in (X-Forwarded-For,
	// Forwarded, X-Real-IP...). Empty: the client is the TCP peer, and
	// no header is believed.
	TrustedProxyHeader string
	// TrustedProxies are the proxies' address ranges: the header is
	// believed only from a peer in one, and read past every address in
	// one (clientAddrs). Empty: from any peer, its right-most address.
	TrustedProxies []netip.Prefix
	Now            func() time.Time
	// Tracer, when set, gives every request a server span that honours
	// the client's W3C traceparent, and exemplars to the request-duration
	// histogram. Nil: no tracing, at no cost.
	Tracer trace.TracerProvider
	// CursorSecret keys the cursors of list walks (query.Cursors):
	// replicas behind one load balancer need the same. Nil: a random
	// secret of this process's own, so cursors do not survive a restart
	// and fail on other replicas.
	CursorSecret []byte
	// Changes answers /changes (server/changes, in front of the fleet's
	// change log); nil: /changes answers 404, as an unknown URL does.
	Changes *changes.Feed
	// Limits is the fair-share limiter (server/fairshare): the address
	// limit before authentication, the client's after it, and the loads
	// its requests start, through the context the loader gets. Nil: no
	// limits.
	Limits *fairshare.Limiter
}

// A Check is one dependency /readyz probes.
type Check struct {
	Name string
	// Critical checks are the backends that answer requests (MongoDB,
	// Elasticsearch, the sandbox); others only degrade the service
	// (Redis, the change feed). With Options.ReadyRequiresBackends the
	// service is ready while at least one critical check passes (or there
	// are none).
	Critical bool
	Probe    func(ctx context.Context) error
	// Note, when set, says something operators should know about the
	// dependency however it answers (the change feed polls, so deletions
	// are not seen); /readyz shows it under "notes" when not empty.
	Note func() string
}

// A Loader produces the representation of a query: the cache, in front
// of the renderer.
type Loader interface {
	Load(ctx context.Context, q *sources.Query) (*sources.Representation, error)
}

// LoaderFunc adapts a function to a Loader.
type LoaderFunc func(ctx context.Context, q *sources.Query) (*sources.Representation, error)

// Load calls f.
func (f LoaderFunc) Load(ctx context.Context, q *sources.Query) (*sources.Representation, error) {
	return f(ctx, q)
}

// A Server answers the API. Create it with New; serve Handler.
type Server struct {
	load    Loader
	auth    *authenticator
	assets  sources.AssetStore
	metrics *metrics.Metrics
	logger  *slog.Logger
	now     func() time.Time
	clocked bool // Options.Now or AuthOptions.Now was given: read it, not the request's start
	prefix  string
	baseURL string

	home, homeETag []byte
	queries        *queryMemo
	panics         *metrics.Counter
	metricsHandler http.Handler
	tracer         trace.Tracer // nil: no spans

	// The parts with state of their own: the middleware that opens and
	// closes every request, /readyz, /changes.
	requests *requestLog
	ready    *readiness
	feed     *changes.Feed      // nil: no /changes
	limits   *fairshare.Limiter // nil: no limits
}

// New returns a server answering list and detail requests with load.
func New(load Loader, opts Options) *Server {
	s := &Server{
		load:    load,
		auth:    newAuthenticator(opts.Auth),
		assets:  opts.Assets,
		metrics: opts.Metrics,
		logger:  opts.Logger,
		now:     opts.Now,
		prefix:  "/" + strings.Trim(opts.Prefix, "/") + "/v1",
		baseURL: strings.TrimRight(opts.BaseURL, "/"),
	}
	if s.baseURL == "" {
		s.baseURL = "http://localhost:5500"
	}
	if opts.Prefix == "" {
		s.prefix = "/prodapi/v1"
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = opts.Auth.Now // one clock for the requests and their tokens
	}
	s.clocked = s.now != nil
	if s.now == nil {
		s.now = time.Now
	}
	if s.metrics == nil {
		s.metrics = metrics.NewMetrics()
	}
	s.panics = s.metrics.Counter("prodapi_http_panics_total", "Handler panics recovered (each answered 500).")
	s.ready = newReadiness(opts.Checks, opts.ReadyRequiresBackends, s.metrics)
	s.metricsHandler = s.metrics.Handler()
	if opts.Tracer != nil {
		s.tracer = opts.Tracer.Tracer("github.com/prodapi/prodapi/server")
	}
	s.feed = opts.Changes
	s.limits = opts.Limits
	s.requests = newRequestLog(opts, s.logger, s.metrics)
	s.queries = newQueryMemo(newCursors(opts.CursorSecret, s.now))
	s.home = homeBody()
	s.homeETag = []byte(sources.ETag(s.home))
	return s
}

// newCursors returns the cursor codec keyed by secret, or by a random
// secret when there is none.
func newCursors(secret []byte, now func() time.Time) *query.Cursors {
	if len(secret) == 0 {
		secret = make([]byte, 32)
		rand.Read(secret)
	}
	c, err := query.NewCursors(secret, now)
	if err != nil {
		panic("server: " + err.Error()) // the secret is never empty here
	}
	return c
}

// Drain marks the server as draining: /readyz answers 503 from then on,
// so that load balancers stop sending before the listener closes. main
// calls it on SIGTERM, before http.Server.Shutdown.
func (s *Server) Drain() { s.ready.draining.Store(true) }

// EndStreams ends every /changes event stream and long poll at once, and
// refuses new ones (changes.Feed.End). http.Server.Shutdown waits for
// requests to finish, and these would hold it for their whole length:
// register EndStreams with its RegisterOnShutdown. (Drain, before it,
// only turns /readyz away.)
func (s *Server) EndStreams() {
	if s.feed != nil {
		s.feed.End()
	}
}

// EndOldestPoll answers the /changes long poll that has waited the
// longest at once (its empty page, on a connection that then closes),
// and returns its connection as the http.Server accepted it; nil when no
// long poll waits (changes.Feed.EndOldestPoll). The connection cap calls
// it to make room when no connection is idle; the connection is known
// only with ConnContext as the http.Server's.
func (s *Server) EndOldestPoll() net.Conn {
	if s.feed == nil {
		return nil
	}
	return s.feed.EndOldestPoll()
}

// homeBody lists the resources: {"_links": {"child": [{"href", "title"}...]}}.
func homeBody() []byte {
	var child []any
	for _, r := range sources.Resources() {
		child = append(child, sources.D("href", r.Name, "title", r.Title))
	}
	return codec.AppendJSON(nil, sources.D("_links", sources.D("child", child)))
}

// validID reports whether id matches the original's item_url,
// [\w,.:_-]+ with Unicode \w (letters, digits, underscore), capped at 512
// bytes. Anything else is the routing 404. (A loop: the equivalent
// regexp cost more than the rest of a cache hit.)
func validID(id string) bool {
	if id == "" || len(id) > 512 {
		return false
	}
	for _, c := range id {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9',
			c == '_', c == ',', c == '.', c == ':', c == '-':
		case c >= utf8.RuneSelf && c != utf8.RuneError && (unicode.IsLetter(c) || unicode.IsNumber(c)):
		default:
			return false
		}
	}
	return true
}

// requestTime is the time a request is judged at (its token's validity,
// its representation's Age): when it reached the access log, one clock
// reading for all of it, or the clock the options gave.
func (s *Server) requestTime(w http.ResponseWriter) time.Time {
	if !s.clocked {
		if info := infoOf(w); info != nil && !info.start.IsZero() {
			return info.start
		}
	}
	return s.now()
}

// header is h.Get(key) for a key already in canonical form, as net/http
// stores a request's: without canonicalising it again.
func header(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// handlerFunc is a handler that returns its failure; handle writes it.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts h, writing the failure it returns; once h has begun its
// answer (a stream that ended), the failure is for the access log alone.
func (s *Server) handle(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		err := h(w, r)
		if err == nil {
			return
		}
		if info := infoOf(w); info != nil && info.status != 0 {
			info.err = err
			return
		}
		s.writeError(w, r, err)
	}
}
