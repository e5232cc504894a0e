package server

import (
	"net/http"

	"github.com/go-chi/chi/v5"
)

const allowed = "GET, HEAD, OPTIONS"

// Handler returns the HTTP handler of the whole service: the API under
// /<prefix>/v1, and /healthz, /readyz and /metrics beside it (no auth).
func (s *Server) Handler() http.Handler {
	r := chi.NewRouter()
	// Outermost first: every request gets an id, then a span (when
	// tracing), then one access-log line
	// (which must wrap recovery to log the 500 it writes), then panic
	// recovery, then the request-target and header limits, before routing.
	r.Use(s.requestID, s.traceRequest, s.accessLog, s.recoverPanic, s.limitTarget, s.limitHeaders)
	r.NotFound(s.handle(s.notFound))
	r.MethodNotAllowed(s.handle(s.methodNotAllowed))

	r.Get("/healthz", s.handleHealth)
	r.Get("/readyz", s.handleReady)
	r.Get("/metrics", s.handleMetrics)

	// The API's routes sit on the root router under their full paths: a
	// mounted sub-router would route every request twice.
	api := func(pattern string, h handlerFunc) {
		r.Method(http.MethodGet, s.prefix+pattern, s.handle(h))
		r.Method(http.MethodHead, s.prefix+pattern, s.handle(h))
		r.Options(s.prefix+pattern, s.handleOptions)
	}
	api("", s.getHome)
	api("/", s.getHome)
	api("/assets/*", s.getAsset)
	doc := s.openAPI()
	api("/openapi.json", doc)
	api("/openapi.json/", doc)
	for _, res := range resources() {
		list, detail := s.getList(res), s.getDetail(res)
		api("/"+res.Name, list)
		api("/"+res.Name+"/", list)
		api("/"+res.Name+"/{id}", detail)
		api("/"+res.Name+"/{id}/", detail)
	}
	s.durations.addRoutes(r)
	return r
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) error {
	return &httpError{status: http.StatusNotFound, msg: msgNotFound}
}

func (s *Server) methodNotAllowed(w http.ResponseWriter, r *http.Request) error {
	return &httpError{status: http.StatusMethodNotAllowed, msg: msgMethodNotAllowed,
		header: http.Header{"Allow": {allowed}}}
}

// handleOptions answers OPTIONS without authentication: no body, Allow.
func (s *Server) handleOptions(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", allowed)
	w.Header().Set("Content-Length", "0")
	w.WriteHeader(http.StatusOK)
}
