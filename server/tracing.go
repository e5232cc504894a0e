package server

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// traceContext reads a client's W3C traceparent (and tracestate).
var traceContext = propagation.TraceContext{}

// traceRequest gives each request a server span, continuing the trace of
// the client's traceparent. Without a tracer it is not in the chain at
// all: tracing off costs nothing.
func (s *Server) traceRequest(next http.Handler) http.Handler {
	if s.tracer == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := traceContext.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := s.tracer.Start(ctx, r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
		defer span.End()
		next.ServeHTTP(w, r.WithContext(ctx))

		info := infoOf(w)
		route := "unmatched"
		if info != nil && info.route != "" {
			route = info.route
		}
		span.SetName(r.Method + " " + route)
		span.SetAttributes(attribute.String("http.route", route))
		if info != nil {
			status := info.status
			if status == 0 {
				status = http.StatusOK
			}
			span.SetAttributes(attribute.Int("http.response.status_code", status))
			if info.outcome != "" {
				span.SetAttributes(attribute.String("prodapi.cache.outcome", info.outcome))
			}
			if status >= 500 {
				span.SetStatus(codes.Error, http.StatusText(status))
			}
			if info.err != nil && status >= 500 {
				span.RecordError(info.err)
			}
		}
	})
}
