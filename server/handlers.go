package server

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

func resources() []*sources.Resource { return sources.Resources() }

// getHome lists the resources. Any valid token may read it (the original
// answered 500 to every valid token).
func (s *Server) getHome(w http.ResponseWriter, r *http.Request) error {
	if err := s.authorize(w, r, ""); err != nil {
		return err
	}
	s.writeStatic(w, r, s.home, string(s.homeETag))
	return nil
}

// getList answers /<resource>: auth, then parameters, then the loader.
func (s *Server) getList(res *sources.Resource) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.authorize(w, r, res.Scope); err != nil {
			return err
		}
		q, err := s.queries.parse(res, "", r.URL.RawQuery)
		if err != nil {
			return err
		}
		return s.serve(w, r, q)
	}
}

// getDetail answers /<resource>/<id>, given the id's path segment as
// chi routed it (escaped when the path was). An id outside the
// original's id pattern is the routing 404, decided before auth.
func (s *Server) getDetail(res *sources.Resource) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		rawID := chi.URLParam(r, "id")
		id, err := rawID, error(nil)
		if strings.IndexByte(rawID, '%') >= 0 {
			id, err = url.PathUnescape(rawID)
		}
		if err != nil || !validID(id) {
			return &httperr.Error{Status: http.StatusNotFound, Msg: msgNotFound}
		}
		if err := s.authorize(w, r, res.Scope); err != nil {
			return err
		}
		q, err := s.queries.parse(res, id, r.URL.RawQuery)
		if err != nil {
			return err
		}
		return s.serve(w, r, q)
	}
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, q *sources.Query) error {
	rep, err := s.load.Load(r.Context(), q)
	if err != nil {
		return err
	}
	s.writeRepresentation(w, r, rep)
	return nil
}

// assetID reports whether a media id has one of the shapes Superdesk
// produces: a GridFS ObjectId with an optional extension, or an object
// key "<digits>/<file name>": printable ASCII, at most 255 bytes, at most
// one slash, no leading slash, no dot-dot segment, no backslash.
func assetID(id string) bool {
	if id == "" || len(id) > 255 || id[0] == '/' || strings.Count(id, "/") > 1 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return false
		}
	}
	for seg := range strings.SplitSeq(id, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// getAsset serves a media file: a redirect to object storage, or the
// bytes from GridFS or the sandbox, with ranges and validators. Assets
// need ARCHIVE_READ (the original crashed here instead).
func (s *Server) getAsset(w http.ResponseWriter, r *http.Request) error {
	id, err := url.PathUnescape(chi.URLParam(r, "*"))
	if err != nil || !assetID(id) {
		return &httperr.Error{Status: http.StatusNotFound, Msg: msgNotFound}
	}
	if err := s.authorize(w, r, sources.ScopeArchive); err != nil {
		return err
	}
	if s.assets == nil {
		return &httperr.Error{Status: http.StatusNotFound, Msg: msgAssetNotFound}
	}
	a, err := s.assets.Asset(r.Context(), id)
	if errors.Is(err, sources.ErrNotFound) {
		return &httperr.Error{Status: http.StatusNotFound, Msg: msgAssetNotFound, Err: err}
	}
	if err != nil {
		return err
	}
	h := w.Header()
	if a.Redirect != "" {
		// The URL is presigned: let clients reuse it only while it works.
		ttl := max(a.Expires.Sub(s.now())-time.Minute, 0)
		h.Set("Location", a.Redirect)
		h.Set("Cache-Control", "private, max-age="+strconv.Itoa(int(ttl.Seconds())))
		h.Set("Content-Length", "0")
		w.WriteHeader(http.StatusFound)
		return nil
	}
	defer a.Content.Close()
	ctype := a.ContentType
	if ctype == "" {
		ctype = "application/octet-stream"
	}
	disposition := "Inline"
	if download, _ := strconv.ParseBool(strings.ToLower(r.URL.Query().Get("download"))); download || isYes(r.URL.Query().Get("download")) {
		disposition = "Attachment"
	}
	if a.Filename != "" {
		disposition += "; filename=" + strings.NewReplacer(`"`, "", ";", "", "\r", "", "\n", "").Replace(a.Filename)
	}
	h.Set("Content-Type", ctype)
	// Media need a token: a shared cache must never hand them to anyone
	// else, so private (the original said public). Thirty days, as before:
	// a media id names immutable content.
	h.Set("Cache-Control", "private, max-age=2592000")
	h.Set("Content-Disposition", disposition)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox")
	if a.MD5 != "" {
		h.Set("ETag", `"`+a.MD5+`"`)
	}
	// ServeContent answers Range (206, 416), If-None-Match, If-Range and
	// If-Modified-Since; its plain-text errors become our envelope. Ranges
	// are merged and capped first (sanitizeRange).
	if header(r.Header, "Range") != "" {
		r = sanitizeRange(r, a.Size)
	}
	http.ServeContent(&envelopeErrors{ResponseWriter: w, s: s, r: r}, r, "", a.Modified, a.Content)
	return nil
}

// isYes accepts strtobool's other true spellings (y, yes, on).
func isYes(v string) bool {
	switch strings.ToLower(v) {
	case "y", "yes", "on":
		return true
	}
	return false
}

// envelopeErrors rewrites the plain-text error responses of
// http.ServeContent (416, 500) into the API's error envelope.
type envelopeErrors struct {
	http.ResponseWriter
	s       *Server
	r       *http.Request
	swallow bool
}

func (e *envelopeErrors) WriteHeader(status int) {
	if status < 400 {
		e.ResponseWriter.WriteHeader(status)
		return
	}
	e.swallow = true
	msg := http.StatusText(status)
	if status == http.StatusRequestedRangeNotSatisfiable {
		msg = "The requested range cannot be satisfied."
	}
	e.s.writeError(e.ResponseWriter, e.r, &httperr.Error{Status: status, Msg: msg})
}

func (e *envelopeErrors) Write(b []byte) (int, error) {
	if e.swallow {
		return len(b), nil
	}
	return e.ResponseWriter.Write(b)
}

func (e *envelopeErrors) Unwrap() http.ResponseWriter { return e.ResponseWriter }

// handleHealth answers while the process runs.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte(`{"status":"ok"}`))
}

// handleReady answers whether this replica takes traffic, and how its
// dependencies are. Readiness is the replica's own: 200 while it serves,
// 503 once it drains (Drain, on SIGTERM) so that load balancers stop
// sending before the listener closes. A backend outage does not make it
// unready: every replica shares the backends, and a fleet that turned
// unready together would have no endpoint left to serve its stale
// entries from. With Options.ReadyRequiresBackends it also answers 503
// while no critical check passes, as readiness did before.
//
// Every check is probed at once, each under a second; the body names
// each one's state, never an error's text: {"status": "ready" (all
// pass), "degraded" (some fail), "unavailable" (no backend, when that
// decides) or "draining", "checks": {...}}, and "notes": {...} when a
// check has something to say (Check.Note). Each probe also sets
// prodapi_check_up{check}.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	states := s.probe(ctx)
	checks, notes := sources.NewDoc(), sources.NewDoc()
	critical, up, allUp := 0, 0, true
	for i, c := range s.checks {
		checks.Set(c.Name, states[i])
		if c.Note != nil {
			if n := c.Note(); n != "" {
				notes.Set(c.Name, n)
			}
		}
		if states[i] != "ok" {
			allUp = false
		}
		if c.Critical {
			critical++
			if states[i] == "ok" {
				up++
			}
		}
	}
	status, code := "ready", http.StatusOK
	switch {
	case s.draining.Load():
		status, code = "draining", http.StatusServiceUnavailable
	case s.requireBackends && critical > 0 && up == 0:
		status, code = "unavailable", http.StatusServiceUnavailable
	case !allUp:
		status = "degraded"
	}
	doc := sources.D("status", status, "checks", checks)
	if notes.Len() > 0 {
		doc.Set("notes", notes)
	}
	body := codec.AppendJSON(nil, doc)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(body)
}

// probe runs every check at once and returns their states in order: ok,
// timeout or unavailable. It records each in prodapi_check_up.
func (s *Server) probe(ctx context.Context) []string {
	states := make([]string, len(s.checks))
	var wg sync.WaitGroup
	for i, c := range s.checks {
		wg.Go(func() {
			switch kind, _ := sources.Classify(c.Probe(ctx)); kind {
			case sources.KindNone:
				states[i] = "ok"
			case sources.KindTimeout:
				states[i] = "timeout"
			default:
				states[i] = "unavailable"
			}
		})
	}
	wg.Wait()
	for i, c := range s.checks {
		v := 0.0
		if states[i] == "ok" {
			v = 1
		}
		s.checkUp.Set(v, c.Name)
	}
	return states
}

// handleMetrics exposes the registry: OpenMetrics when the scraper asks
// for it, the Prometheus text format otherwise.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	s.metricsHandler.ServeHTTP(w, r)
}
