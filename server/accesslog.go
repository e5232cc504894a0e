package server

import (
	"context"
	"encoding/hex"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/trace"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources/codec"
)

// requestLog opens and closes every request: it gives the request its id
// and its requestInfo (requestID, outermost), and on the way out counts
// and times it and writes its line to the access log (accessLog).
type requestLog struct {
	ids       *requestIDs
	infos     sync.Pool // *requestInfo
	lines     *accessLogger
	inFlight  metrics.GaugeSeries
	durations *durationTable
	traced    bool // requests have spans (Options.Tracer): lines and exemplars name them
	// clients tells each request's client address, which requestID
	// records.
	clients *clientAddrs
}

func newRequestLog(opts Options, logger *slog.Logger, m *metrics.Metrics) *requestLog {
	l := &requestLog{
		ids:      newRequestIDs(),
		lines:    &accessLogger{w: opts.AccessLog, logger: logger, hits: newSampler(opts.AccessLogHits)},
		inFlight: m.Gauge("prodapi_http_requests_in_flight", "HTTP requests being answered.").Series(),
		durations: newDurationTable(m.Histogram("prodapi_http_request_duration_seconds",
			"Time from a request's arrival at the handler to its last byte written, by route and cache outcome "+
				"(hit, stale, miss, collapsed, bypass, error, none); /changes long polls and streams are timed apart.",
			nil, "route", "outcome"),
			m.Counter("prodapi_http_requests_total", "HTTP requests answered, by route and status code.", "route", "code")),
		traced:  opts.Tracer != nil,
		clients: newClientAddrs(opts.TrustedProxyHeader, opts.TrustedProxies),
	}
	return l
}

// sampledSpan is the request's span context; without a tracer, none
// (and no walk up the request's context for it).
func (l *requestLog) sampledSpan(r *http.Request) trace.SpanContext {
	if !l.traced {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(r.Context())
}

// An accessLine is what the access log says about one request.
type accessLine struct {
	time     time.Time
	level    slog.Level
	method   string
	route    string
	path     string
	status   int
	bytes    int64
	duration time.Duration
	id       string
	outcome  string
	err      error

	// Who asked, and in which trace: each is left out of the line when
	// zero (no tracing, no verified token, no address, no User-Agent).
	traceID   trace.TraceID
	spanID    trace.SpanID
	clientID  string     // the verified token's client_id
	clientIP  netip.Addr // the client's address (clientAddrs)
	userAgent string     // as sent; log cuts it to maxUserAgent
}

// maxUserAgent bounds the User-Agent an access line carries, in bytes
// before JSON escaping: enough for any real client's, and a client
// cannot make lines of its choosing size.
const maxUserAgent = 256

// truncateUTF8 cuts s to at most n bytes, at the start of a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// accessLogger writes access lines. With a writer, it encodes each line
// itself, in the format of log/slog's JSONHandler (same keys, same time
// format), one Write per line: the generic slog path cost more than the
// rest of a cache hit. Without one, lines go through the slog logger.
type accessLogger struct {
	w      io.Writer // nil: use logger
	logger *slog.Logger
	pool   sync.Pool // *[]byte
	hits   *sampler  // which cache hits get a line
}

// A sampler picks one in every n events, by count: no randomness, no
// allocation. n 1 picks all, 0 none.
type sampler struct {
	every uint64
	seen  atomic.Uint64
}

// newSampler picks a share of events; nil picks all.
func newSampler(share *float64) *sampler {
	switch {
	case share == nil || *share >= 1:
		return &sampler{every: 1}
	case *share <= 0 || math.IsNaN(*share):
		return &sampler{}
	}
	return &sampler{every: uint64(math.Round(1 / *share))}
}

func (s *sampler) pick() bool {
	switch s.every {
	case 0:
		return false
	case 1:
		return true
	}
	return s.seen.Add(1)%s.every == 0
}

func (a *accessLogger) log(ctx context.Context, r accessLine) {
	r.userAgent = truncateUTF8(r.userAgent, maxUserAgent)
	if a.w == nil {
		attrs := [...]slog.Attr{
			slog.String("method", r.method),
			slog.String("route", r.route),
			slog.String("path", r.path),
			slog.Int("status", r.status),
			slog.Int64("bytes", r.bytes),
			slog.Int64("duration_us", r.duration.Microseconds()),
			slog.String("request_id", r.id),
			{}, {}, {}, {}, {}, {}, {},
		}
		n := 7
		add := func(attr slog.Attr) {
			attrs[n] = attr
			n++
		}
		if r.traceID.IsValid() {
			add(slog.String("trace_id", r.traceID.String()))
			add(slog.String("span_id", r.spanID.String()))
		}
		if r.clientID != "" {
			add(slog.String("client_id", r.clientID))
		}
		if r.clientIP.IsValid() {
			add(slog.String("client_ip", r.clientIP.String()))
		}
		if r.userAgent != "" {
			add(slog.String("user_agent", r.userAgent))
		}
		if r.outcome != "" {
			add(slog.String("cache", r.outcome))
		}
		if r.err != nil {
			add(errAttr(r.err))
		}
		a.logger.LogAttrs(ctx, r.level, "request", attrs[:n]...)
		return
	}
	bp, _ := a.pool.Get().(*[]byte)
	if bp == nil {
		b := make([]byte, 0, 512)
		bp = &b
	}
	b := append((*bp)[:0], `{"time":"`...)
	b = r.time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","level":"`...)
	b = append(b, r.level.String()...)
	b = append(b, `","msg":"request","method":`...)
	b = codec.AppendJSONString(b, r.method)
	b = append(b, `,"route":`...)
	b = codec.AppendJSONString(b, r.route)
	b = append(b, `,"path":`...)
	b = codec.AppendJSONString(b, r.path)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.status), 10)
	b = append(b, `,"bytes":`...)
	b = strconv.AppendInt(b, r.bytes, 10)
	b = append(b, `,"duration_us":`...)
	b = strconv.AppendInt(b, r.duration.Microseconds(), 10)
	b = append(b, `,"request_id":`...)
	b = codec.AppendJSONString(b, r.id)
	if r.traceID.IsValid() {
		b = append(b, `,"trace_id":"`...)
		b = hex.AppendEncode(b, r.traceID[:])
		b = append(b, `","span_id":"`...)
		b = hex.AppendEncode(b, r.spanID[:])
		b = append(b, '"')
	}
	if r.clientID != "" {
		b = append(b, `,"client_id":`...)
		b = codec.AppendJSONString(b, r.clientID)
	}
	if r.clientIP.IsValid() {
		b = append(b, `,"client_ip":`...)
		if r.clientIP.Zone() == "" { // hex digits, dots and colons: nothing to escape
			b = append(b, '"')
			b = append(r.clientIP.AppendTo(b), '"')
		} else {
			b = codec.AppendJSONString(b, r.clientIP.String())
		}
	}
	if r.userAgent != "" {
		b = append(b, `,"user_agent":`...)
		b = codec.AppendJSONString(b, r.userAgent)
	}
	if r.outcome != "" {
		b = append(b, `,"cache":`...)
		b = codec.AppendJSONString(b, r.outcome)
	}
	if r.err != nil {
		b = append(b, `,"error":`...)
		b = codec.AppendJSONString(b, r.err.Error())
	}
	b = append(b, "}\n"...)
	a.w.Write(b)
	*bp = b
	a.pool.Put(bp)
}
