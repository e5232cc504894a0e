package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/prodapi/prodapi/server/query"
)

const slogLevelWarn = slog.LevelWarn

func errAttr(err error) slog.Attr { return slog.String("error", err.Error()) }

// requestInfo collects what the access log reports about a request; the
// handlers fill in the cache outcome and the error they answered.
type requestInfo struct {
	id      string
	status  int
	bytes   int64
	outcome string
	err     error
}

type infoKey struct{}

func infoFrom(ctx context.Context) *requestInfo {
	i, _ := ctx.Value(infoKey{}).(*requestInfo)
	return i
}

// requestID takes X-Request-Id from the request when it is sane, or makes
// one, and echoes it on the response.
func (s *Server) requestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !saneID(id) {
			var b [12]byte
			rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		ctx := context.WithValue(r.Context(), infoKey{}, &requestInfo{id: id})
		next.ServeHTTP(w, r.WithContext(ctx))
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

// recorder captures the status and size of a response.
type recorder struct {
	http.ResponseWriter
	info *requestInfo
}

func (w *recorder) WriteHeader(status int) {
	if w.info.status == 0 {
		w.info.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.info.status == 0 {
		w.info.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.info.bytes += int64(n)
	return n, err
}

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// accessLog writes one structured line per request: method, route
// pattern, status, bytes, duration, cache outcome, request id, and the
// error the request was answered with. Never headers (tokens) or query
// strings. 5xx are errors, everything else info.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := infoFrom(r.Context())
		next.ServeHTTP(&recorder{ResponseWriter: w, info: info}, r)
		route := "unmatched"
		if rc := chi.RouteContext(r.Context()); rc != nil && rc.RoutePattern() != "" {
			route = rc.RoutePattern()
		}
		status := info.status
		if status == 0 {
			status = http.StatusOK
		}
		s.requests.Inc(route, strconv.Itoa(status))
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		attrs := []slog.Attr{
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.String("path", r.URL.Path),
			slog.Int("status", status),
			slog.Int64("bytes", info.bytes),
			slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
			slog.String("request_id", info.id),
		}
		if info.outcome != "" {
			attrs = append(attrs, slog.String("cache", info.outcome))
		}
		if info.err != nil {
			attrs = append(attrs, errAttr(info.err))
		}
		s.logger.LogAttrs(r.Context(), level, "request", attrs...)
	})
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
			s.writeError(w, r, &httpError{status: http.StatusRequestURITooLong, msg: msgTargetTooLong})
			return
		}
		next.ServeHTTP(w, r)
	})
}
