package server

import (
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/sources"
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

// getList answers /<resource>: auth, then parameters, then min_position,
// then the loader.
func (s *Server) getList(res *sources.Resource) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if err := s.authorize(w, r, res.Scope); err != nil {
			return err
		}
		return s.query(w, r, res, "")
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
		return s.query(w, r, res, id)
	}
}

// query answers a list (id "") or a detail of res whose token was
// checked: its parameters (400), then, when min_position names a
// position of the change log, the wait for this replica to apply it
// (400, 410, 503), then the loader.
func (s *Server) query(w http.ResponseWriter, r *http.Request, res *sources.Resource, id string) error {
	raw, pos, fresh, err := cutMinPosition(r.URL.RawQuery)
	if err != nil {
		return err
	}
	q, err := s.queries.parse(res, id, raw)
	if err != nil {
		return err
	}
	if fresh {
		if q, err = s.atLeast(r.Context(), s.clientOf(w, r), q, pos); err != nil {
			return err
		}
	}
	return s.serve(w, r, q)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request, q *sources.Query) error {
	rep, err := s.loadAs(w, r, q)
	if err != nil {
		return s.hold(w, r, err) // a load refused at its client's limit
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

// handleMetrics exposes the registry: OpenMetrics when the scraper asks
// for it, the Prometheus text format otherwise.
func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	s.metricsHandler.ServeHTTP(w, r)
}
