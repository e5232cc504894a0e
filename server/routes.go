package server

import (
	"net/http"
	"strings"

	"github.com/go-chi/chi/v5"
)

const allowed = "GET, HEAD, OPTIONS"

// A router is the service's handler: the middleware chain, then an
// exact-path index of the API's GET and HEAD routes, then chi for
// everything the index does not hold (OPTIONS and other methods, assets,
// escaped paths, the operations endpoints, 404 and 405).
//
// The index answers what chi would: the same handler under the same
// route pattern, given the same id, for the same request
// (TestIndexAnswersAsChi). It exists because a cache hit is cheap enough
// for chi's per-request work to show: its route context is put in a copy
// of the request, and a parameter costs two allocations more.
//
// It embeds the chi router so that chi.Walk and the route tests see
// every route.
type router struct {
	*chi.Mux
	s     *Server
	chain http.Handler

	// exact maps a path to its route; prefixes maps "<api>/<resource>/"
	// to the detail routes under it.
	exact    map[string]*route
	prefixes map[string]*detailRoutes
}

// A route is one GET and HEAD route: its chi pattern (the access log's
// and the metrics' route label) and handler.
type route struct {
	pattern string
	h       http.HandlerFunc
}

// detailRoutes are the two patterns of a detail, without and with a
// trailing slash; the handler takes the raw id segment.
type detailRoutes struct {
	plain, slash string
	h            func(w http.ResponseWriter, r *http.Request, rawID string) error
}

// Handler returns the HTTP handler of the whole service: the API under
// /<prefix>/v1, and /healthz, /readyz and /metrics beside it (no auth).
func (s *Server) Handler() http.Handler {
	mux := chi.NewRouter()
	rt := &router{Mux: mux, s: s, exact: map[string]*route{}, prefixes: map[string]*detailRoutes{}}
	// Every handler chi routes to names its pattern for the access log,
	// the metrics and the span, as the index does for its own.
	named := func(pattern string, h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if info := infoOf(w); info != nil {
				info.route = pattern
			}
			h(w, r)
		}
	}
	unrouted := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if info := infoOf(w); info != nil {
				if rc := chi.RouteContext(r.Context()); rc != nil {
					info.route = rc.RoutePattern()
				}
			}
			h(w, r)
		}
	}
	mux.NotFound(unrouted(s.handle(s.notFound)))
	mux.MethodNotAllowed(unrouted(s.handle(s.methodNotAllowed)))

	mux.Get("/healthz", named("/healthz", s.handleHealth))
	mux.Get("/readyz", named("/readyz", s.handleReady))
	mux.Get("/metrics", named("/metrics", s.handleMetrics))

	// The API's routes sit on the root router under their full paths: a
	// mounted sub-router would route every request twice.
	api := func(pattern string, h http.HandlerFunc) {
		pattern = s.prefix + pattern
		mux.Method(http.MethodGet, pattern, named(pattern, h))
		mux.Method(http.MethodHead, pattern, named(pattern, h))
		mux.Options(pattern, named(pattern, s.handleOptions))
	}
	exact := func(pattern string, h handlerFunc) {
		api(pattern, s.handle(h))
		rt.exact[s.prefix+pattern] = &route{pattern: s.prefix + pattern, h: s.handle(h)}
	}
	exact("", s.getHome)
	exact("/", s.getHome)
	api("/assets/*", s.handle(s.getAsset))
	doc := s.openAPI()
	exact("/openapi.json", doc)
	exact("/openapi.json/", doc)
	for _, res := range resources() {
		list := s.getList(res)
		exact("/"+res.Name, list)
		exact("/"+res.Name+"/", list)
		d := &detailRoutes{plain: s.prefix + "/" + res.Name + "/{id}", slash: s.prefix + "/" + res.Name + "/{id}/", h: s.getDetail(res)}
		fromChi := func(w http.ResponseWriter, r *http.Request) error { return d.h(w, r, chi.URLParam(r, "id")) }
		api("/"+res.Name+"/{id}", s.handle(fromChi))
		api("/"+res.Name+"/{id}/", s.handle(fromChi))
		rt.prefixes[s.prefix+"/"+res.Name+"/"] = d
	}
	s.durations.addRoutes(mux)

	// Outermost first: every request gets an id, then a span (when
	// tracing), then one access-log line (which must wrap recovery to log
	// the 500 it writes), then panic recovery, then the request-target and
	// header limits, before routing.
	var h http.Handler = http.HandlerFunc(rt.route)
	if s.noIndex {
		h = mux
	}
	h = s.limitHeaders(h)
	h = s.limitTarget(h)
	h = s.recoverPanic(h)
	h = s.accessLog(h)
	h = s.traceRequest(h)
	rt.chain = s.requestID(h)
	return rt
}

func (rt *router) ServeHTTP(w http.ResponseWriter, r *http.Request) { rt.chain.ServeHTTP(w, r) }

// route answers a GET or HEAD of a path the index holds, and hands every
// other request to chi. chi routes on the escaped path when the request's
// differs from Go's own escaping (RawPath): those go to chi as well.
func (rt *router) route(w http.ResponseWriter, r *http.Request) {
	if (r.Method != http.MethodGet && r.Method != http.MethodHead) || r.URL.RawPath != "" {
		rt.Mux.ServeHTTP(w, r)
		return
	}
	p := r.URL.Path
	if e := rt.exact[p]; e != nil {
		if info := infoOf(w); info != nil {
			info.route = e.pattern
		}
		e.h(w, r)
		return
	}
	trimmed, slash := strings.CutSuffix(p, "/")
	i := strings.LastIndexByte(trimmed, '/')
	var d *detailRoutes
	if i >= 0 && i < len(trimmed)-1 {
		d = rt.prefixes[trimmed[:i+1]]
	}
	if d == nil {
		rt.Mux.ServeHTTP(w, r)
		return
	}
	if info := infoOf(w); info != nil {
		info.route = d.plain
		if slash {
			info.route = d.slash
		}
	}
	if err := d.h(w, r, trimmed[i+1:]); err != nil {
		rt.s.writeError(w, r, err)
	}
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
