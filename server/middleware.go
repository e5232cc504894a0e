package server

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/prodapi/prodapi/server/fairshare"
	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/server/query"
)

// outcomeHit is the cache outcome of a fresh hit (cache.OutcomeHit), the
// one PRODAPI_ACCESS_LOG_HITS samples.
const outcomeHit = "hit"

func errAttr(err error) slog.Attr { return slog.String("error", err.Error()) }

// requestInfo is what the access log reports about a request; the
// handlers fill in the cache outcome and the error they answered. It is
// the response writer every handler gets, recording status and size, so
// a request costs one allocation for all of it and no copy of the
// request to carry it in a context.
type requestInfo struct {
	http.ResponseWriter
	id      string
	route   string    // the route pattern that answered; "" for none
	start   time.Time // when the request reached the access log
	status  int
	bytes   int64
	outcome string
	err     error
	// clientID is the client_id of the request's verified token.
	clientID string
	// client names the client of the request's verified token, as its
	// limits and caps count it (Claims.Client); "" without one.
	client string
	// clientAddr is the client's address (Server.clientAddr), set by
	// requestID.
	clientAddr netip.Addr
	// share is the request's client's share of the fair-share limiter,
	// which its loads are charged to; nil: none.
	share *fairshare.Share
	// untimed: a request that waits (a /changes long poll or stream),
	// which the feed times in its own histograms, and the request-duration
	// histogram leaves out.
	untimed bool
}

// infoOf finds the request's requestInfo under w and the writers that
// wrap it; nil outside the middleware.
func infoOf(w http.ResponseWriter) *requestInfo {
	for {
		switch x := w.(type) {
		case *requestInfo:
			return x
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

func (w *requestInfo) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *requestInfo) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *requestInfo) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// requestIDs makes request ids: a random prefix per process and a
// counter, unique without asking the kernel for randomness per request.
// They are made 64 at a time, in one string and one []string, and each
// request takes its own one-element header value from the batch: a
// request id costs no allocation of its own.
type requestIDs struct {
	prefix string
	mu     sync.Mutex
	seq    uint64   // the last id handed out
	batch  []string // ids made and not yet handed out
}

const idBatch = 64

func newRequestIDs() *requestIDs {
	var b [6]byte
	rand.Read(b[:])
	return &requestIDs{prefix: hex.EncodeToString(b[:]) + "-"}
}

// next returns a new id as a header value: one element, len == cap, so
// that nobody's append can reach its neighbours.
func (g *requestIDs) next() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.batch) == 0 {
		buf := make([]byte, 0, idBatch*(len(g.prefix)+16))
		ends := [idBatch]int{}
		for i := range idBatch {
			buf = strconv.AppendUint(append(buf, g.prefix...), g.seq+uint64(i)+1, 16)
			ends[i] = len(buf)
		}
		all := string(buf)
		g.batch = make([]string, idBatch)
		start := 0
		for i, end := range ends {
			g.batch[i] = all[start:end]
			start = end
		}
	}
	g.seq++
	v := g.batch[:1:1]
	g.batch = g.batch[1:]
	return v
}

// requestID takes X-Request-Id from the request when it is sane, or makes
// one, and echoes it on the response; it makes the request's requestInfo
// the response writer. requestInfos are reused: nothing may keep the
// writer after its handler returned. Every answer also carries
// X-Content-Type-Options: nosniff, whoever writes it: no browser is to
// take a JSON answer, or an error's, for anything else.
func (l *requestLog) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var vals []string
		if id := r.Header["X-Request-Id"]; len(id) > 0 && saneID(id[0]) {
			vals = id[:1:1]
		} else {
			vals = l.ids.next()
		}
		h := w.Header()
		h["X-Request-Id"] = vals
		h["X-Content-Type-Options"] = hdrNosniff
		info, _ := l.infos.Get().(*requestInfo)
		if info == nil {
			info = new(requestInfo)
		}
		*info = requestInfo{ResponseWriter: w, id: vals[0], clientAddr: l.clients.addr(r)}
		next.ServeHTTP(info, r)
		*info = requestInfo{}
		l.infos.Put(info)
	})
}

func saneID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// accessLog writes one structured line per request: method, route
// pattern, status, bytes, duration in microseconds, cache outcome,
// request id, the error the request was answered with, and who asked:
// the trace and span (when tracing), the token's client_id, the client's
// address and its User-Agent (truncated). Never a token, another header
// or a query string. 5xx are errors, everything else info.
func (l *requestLog) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.inFlight.Inc()
		defer l.inFlight.Dec() // also when http.ErrAbortHandler passes through
		start := time.Now()
		info := infoOf(w)
		info.start = start
		next.ServeHTTP(w, r)
		d := time.Since(start) // the monotonic clock alone
		route := cmp.Or(info.route, "unmatched")
		status := info.status
		if status == 0 {
			status = http.StatusOK
		}
		l.durations.count(route, status)
		sc := l.sampledSpan(r)
		if !info.untimed {
			obs := l.durations.observer(route, info.outcome, status)
			if sc.IsSampled() {
				metrics.ObserveWithTrace(obs, d.Seconds(), sc.TraceID().String())
			} else {
				obs.Observe(d.Seconds())
			}
		}
		// Recorded above for every request: only the log line is sampled.
		if info.outcome == outcomeHit && !l.lines.hits.pick() {
			return
		}
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		l.lines.log(r.Context(), accessLine{time: start, level: level, method: r.Method, route: route, path: r.URL.Path,
			status: status, bytes: info.bytes, duration: d, id: info.id, outcome: info.outcome, err: info.err,
			traceID: sc.TraceID(), spanID: sc.SpanID(), clientID: info.clientID, clientIP: l.clientAddr(w, r),
			userAgent: header(r.Header, "User-Agent")})
	})
}

// statusLabel is the metric label of a status, without allocating for
// the common ones.
func statusLabel(status int) string {
	switch status {
	case 200:
		return "200"
	case 206:
		return "206"
	case 302:
		return "302"
	case 304:
		return "304"
	case 400:
		return "400"
	case 401:
		return "401"
	case 403:
		return "403"
	case 404:
		return "404"
	}
	return strconv.Itoa(status)
}

// recoverPanic turns a handler panic into a 500 in the envelope; the
// stack goes to the log, never to the client.
func (s *Server) recoverPanic(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.panics.Inc()
				s.writeError(w, r, fmt.Errorf("server: panic: %v\n%s", v, debug.Stack()))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// limitTarget refuses request targets over query.MaxTarget with 414,
// before routing, auth or any backend call.
func (s *Server) limitTarget(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.RequestURI) > query.MaxTarget {
			s.writeError(w, r, &httperr.Error{Status: http.StatusRequestURITooLong, Msg: msgTargetTooLong})
			return
		}
		next.ServeHTTP(w, r)
	})
}
