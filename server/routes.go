package server

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/prodapi/prodapi/server/httperr"
)

const allowed = "GET, HEAD, OPTIONS"

// Handler returns the HTTP handler of the API, under /<prefix>/v1,
// routed by chi. Nothing else is served on its port: the probes and the
// metrics are OpsHandler's, on a listener of their own.
func (s *Server) Handler() http.Handler {
	mux := chi.NewRouter()
	// Outermost first: every request gets an id, then a span (when
	// tracing), then one access-log line (which must wrap recovery to log
	// the 500 it writes), then panic recovery, then the request-target and
	// header limits, before routing.
	mux.Use(s.requests.requestID, s.traceRequest, s.requests.accessLog, s.recoverPanic, s.limitTarget, s.limitHeaders)
	mux.NotFound(unrouted(s.handle(s.notFound)))
	mux.MethodNotAllowed(unrouted(s.handle(s.methodNotAllowed)))

	// The API's routes sit on the root router under their full paths: a
	// mounted sub-router would route every request twice.
	api := func(pattern string, h handlerFunc) {
		pattern = s.prefix + pattern
		mux.Method(http.MethodGet, pattern, named(pattern, s.handle(h)))
		mux.Method(http.MethodHead, pattern, named(pattern, s.handle(h)))
		mux.Options(pattern, named(pattern, s.handleOptions))
	}
	api("", s.getHome)
	api("/", s.getHome)
	api("/assets/*", s.getAsset)
	doc := s.openAPI()
	api("/openapi.json", doc)
	api("/openapi.json/", doc)
	docs := s.newDocsUI()
	api("/docs", s.docsPage(docs))
	api("/docs/", s.docsPage(docs))
	api("/docs/{file}", s.docsFiles(docs))
	if s.feed != nil {
		api("/changes", s.getChanges)
		api("/changes/", s.getChanges)
	}
	for _, res := range resources() {
		list := s.getList(res)
		api("/"+res.Name, list)
		api("/"+res.Name+"/", list)
		detail := s.getDetail(res)
		api("/"+res.Name+"/{id}", detail)
		api("/"+res.Name+"/{id}/", detail)
	}
	s.requests.durations.addRoutes(mux)
	return mux
}

// OpsHandler returns the handler of the operator listener
// (PRODAPI_OPS_ADDR): /healthz, /readyz and /metrics, without
// authentication, each request with its id, its access-log line and its
// series as on the API's port; anything else is the API's 404. It is
// served apart from the API, with a connection allowance of its own, so
// that a client holding every connection of the API's port cannot starve
// the probes, and the public never reaches the metrics.
//
// Build it, like Handler, before either serves: both name their routes
// in the request series.
func (s *Server) OpsHandler() http.Handler {
	mux := chi.NewRouter()
	mux.Use(s.requests.requestID, s.requests.accessLog, s.recoverPanic)
	mux.NotFound(unrouted(s.handle(s.notFound)))
	mux.MethodNotAllowed(unrouted(s.handle(s.methodNotAllowed)))
	mux.Get("/healthz", named("/healthz", s.handleHealth))
	mux.Get("/readyz", named("/readyz", s.ready.ServeHTTP))
	mux.Get("/metrics", named("/metrics", s.handleMetrics))
	s.requests.durations.addRoutes(mux)
	return mux
}

// named makes h, a handler chi routes to, name its pattern for the access
// log, the metrics and the span.
func named(pattern string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if info := infoOf(w); info != nil {
			info.route = pattern
		}
		h(w, r)
	}
}

// unrouted makes h, the answer to a request no route takes (404, 405),
// name the pattern chi matched, if any.
func unrouted(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if info := infoOf(w); info != nil {
			if rc := chi.RouteContext(r.Context()); rc != nil {
				info.route = rc.RoutePattern()
			}
		}
		h(w, r)
	}
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) error {
	return &httperr.Error{Status: http.StatusNotFound, Msg: msgNotFound}
}

func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) error {
	return &httperr.Error{Status: http.StatusMethodNotAllowed, Msg: msgMethodNotAllowed,
		Header: http.Header{"Allow": {allowed}}}
}

// handleOptions answers OPTIONS without authentication: no body, Allow.
func (s *Server) handleOptions(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", allowed)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}
