// Package admin is prodapi's operator interface: a handler for a separate
// listener (PRODAPI_ADMIN_ADDR), guarded by its own bearer secret, that
// purges the cache. The public API stays read-only (GET, HEAD, OPTIONS);
// nothing here is reachable through it.
//
//	POST /purge?resource=items&id=a&id=b   every entry including items a and b
//	POST /purge?resource=items             every entry of items, details and lists
//	POST /purge?all=true                   every entry
//
// The same fields may come as a JSON body instead ({"resource":"items",
// "ids":["a"]} or {"all":true}) with Content-Type application/json.
// Answers are JSON: {"_status":"OK","purged":...} or the API's error
// envelope, {"_status":"ERR","_error":{"code":N,"message":"..."}}, which
// server/httperr writes, as it does the API's.
//
// Each purge attempted counts in prodapi_admin_purges_total{scope,result}:
// scope docs, resource or all; result ok, partial (applied on this
// replica only: 503) or error (500). Refused requests are not purges:
// they count in prodapi_admin_refused_total{reason}, reason unauthorized
// (401: no secret, or a wrong one), method (405), invalid (400, 413, 415:
// no purge) or not_found (404: another path). Every series exists at 0
// from the start.
//
// Every request is audited: each purge's log line (Info) and each
// refusal's (Warn) names the client's address and the request's id. The
// address is the TCP peer's: the listener is for operators, reached
// without the public proxy, so no proxy header is believed. The id is
// made for the request and echoed in X-Request-Id. Every answer carries
// X-Content-Type-Options: nosniff.
package admin

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"net/http"
	"net/netip"
	"strconv"
	"strings"

	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
)

// A Purger obsoletes cache entries (package cache's Cache is one).
type Purger interface {
	PurgeDocs(ctx context.Context, resource string, ids ...string) error
	PurgeResource(ctx context.Context, resource string) error
	PurgeAll(ctx context.Context) error
}

// Limits of a purge request.
const (
	maxBody = 64 << 10
	maxIDs  = 1000
	maxID   = 256
)

// Options configure the handler.
type Options struct {
	// Partial reports whether an error from the Purger means "applied
	// here, not propagated" (cache.ErrNotPropagated); nil: never.
	Partial func(error) bool
	Logger  *slog.Logger     // nil: discard
	Metrics *metrics.Metrics // the registry the purges count into; nil: none
}

// Label values of prodapi_admin_purges_total and of
// prodapi_admin_refused_total.
var (
	purgeScopes    = [...]string{"docs", "resource", "all"}
	purgeResults   = [...]string{"ok", "partial", "error"}
	refusedReasons = [...]string{reasonUnauthorized, reasonMethod, reasonInvalid, reasonNotFound}
)

const (
	reasonUnauthorized = "unauthorized"
	reasonMethod       = "method"
	reasonInvalid      = "invalid"
	reasonNotFound     = "not_found"
)

// Handler returns the admin handler. secret is the bearer token every
// request must carry; it must not be empty.
func Handler(p Purger, secret string, opts Options) http.Handler {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &handler{p: p, secret: []byte(secret), partial: opts.Partial, log: log}
	if opts.Metrics != nil {
		h.purges = opts.Metrics.Counter("prodapi_admin_purges_total",
			"Purges asked of the admin listener, by scope (docs, resource, all) and result (ok; partial: applied on this replica only; error).",
			"scope", "result")
		for _, scope := range purgeScopes {
			for _, result := range purgeResults {
				h.purges.Declare(scope, result)
			}
		}
		h.refused = opts.Metrics.Counter("prodapi_admin_refused_total",
			"Requests the admin listener refused, by reason (unauthorized: no bearer secret or a wrong one; method; invalid: no purge; not_found: another path).",
			"reason")
		for _, reason := range refusedReasons {
			h.refused.Declare(reason)
		}
	}
	return h
}

type handler struct {
	p       Purger
	secret  []byte
	partial func(error) bool
	log     *slog.Logger
	purges  *metrics.Counter // scope, result; nil counts nothing
	refused *metrics.Counter // reason; nil counts nothing
}

// A call is what the audit says of a request: who sent it, under which
// id.
type call struct {
	id   string
	addr netip.Addr // the TCP peer's; invalid when it has none
}

// ServeHTTP answers POST /purge for a request bearing the secret, and
// refuses anything else.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c := call{id: newID()}
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		c.addr = ap.Addr().Unmap()
	}
	hdr := w.Header()
	hdr.Set("X-Request-Id", c.id)
	hdr.Set("X-Content-Type-Options", "nosniff")
	if !h.authorized(r) {
		h.refuse(w, r, c, reasonUnauthorized, &httperr.Error{Status: http.StatusUnauthorized, Msg: "Please provide the admin bearer secret.",
			Header: http.Header{"Www-Authenticate": {`Bearer realm="prodapi-admin"`}}})
		return
	}
	if r.URL.Path != "/purge" {
		h.refuse(w, r, c, reasonNotFound, &httperr.Error{Status: http.StatusNotFound, Msg: "Not found: the admin listener serves POST /purge."})
		return
	}
	h.purge(w, r, c)
}

// newID is a request id: 16 random hex digits.
func newID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// authorized checks the bearer secret in constant time.
func (h *handler) authorized(r *http.Request) bool {
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	return len(h.secret) > 0 && strings.EqualFold(scheme, "Bearer") &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), h.secret) == 1
}

// maxLoggedPath bounds the path a refusal's log line carries.
const maxLoggedPath = 256

// refuse answers e, and counts and logs the refusal with who asked.
func (h *handler) refuse(w http.ResponseWriter, r *http.Request, c call, reason string, e *httperr.Error) {
	h.refused.Inc(reason)
	path := r.URL.Path
	if len(path) > maxLoggedPath {
		path = path[:maxLoggedPath]
	}
	h.log.Warn("admin: refused", "reason", reason, "status", e.Status, "method", r.Method, "path", path,
		"client_addr", addrString(c.addr), "request_id", c.id)
	httperr.Write(w, r, e)
}

// addrString is a as a log shows it: "" when there is none.
func addrString(a netip.Addr) string {
	if !a.IsValid() {
		return ""
	}
	return a.String()
}

// A request is one purge: by resource and ids, by resource, or all.
type request struct {
	Resource string   `json:"resource,omitempty"`
	IDs      []string `json:"ids,omitempty"`
	All      bool     `json:"all,omitempty"`
}

func (h *handler) purge(w http.ResponseWriter, r *http.Request, c call) {
	if r.Method != http.MethodPost {
		h.refuse(w, r, c, reasonMethod, &httperr.Error{Status: http.StatusMethodNotAllowed, Msg: "The method is not allowed for the requested URL.",
			Header: http.Header{"Allow": {"POST"}}})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	req, status, msg := parse(r)
	if status != 0 {
		h.refuse(w, r, c, reasonInvalid, &httperr.Error{Status: status, Msg: msg})
		return
	}
	var err error
	scope := purgeScopes[2]
	switch {
	case req.All:
		err = h.p.PurgeAll(r.Context())
	case len(req.IDs) > 0:
		scope = purgeScopes[0]
		err = h.p.PurgeDocs(r.Context(), req.Resource, req.IDs...)
	default:
		scope = purgeScopes[1]
		err = h.p.PurgeResource(r.Context(), req.Resource)
	}
	h.log.Info("admin: purge", "resource", req.Resource, "ids", len(req.IDs), "all", req.All, "error", err,
		"client_addr", addrString(c.addr), "request_id", c.id)
	partial := err != nil && h.partial != nil && h.partial(err)
	switch {
	case err == nil:
		h.purges.Inc(scope, purgeResults[0])
	case partial:
		h.purges.Inc(scope, purgeResults[1])
	default:
		h.purges.Inc(scope, purgeResults[2])
	}
	if err != nil {
		if partial {
			httperr.Write(w, r, &httperr.Error{Status: http.StatusServiceUnavailable, Err: err, Header: http.Header{"Retry-After": {"5"}},
				Msg: "Purged on this replica only: Redis could not be reached, so the other replicas and Redis keep their entries until their TTLs end. Retry."})
			return
		}
		httperr.Write(w, r, &httperr.Error{Status: http.StatusInternalServerError, Msg: "The purge failed.", Err: err})
		return
	}
	body, _ := json.Marshal(struct {
		Status string  `json:"_status"`
		Purged request `json:"purged"`
	}{"OK", req})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// parse reads the purge from the query string or a JSON body, and
// validates it: a known resource, ids only with one, all only alone.
func parse(r *http.Request) (req request, status int, msg string) {
	q := r.URL.Query()
	for k := range q {
		if k != "resource" && k != "id" && k != "all" {
			return req, http.StatusBadRequest, "Unknown parameter " + strconv.Quote(k) + ": use resource, id and all."
		}
	}
	req.Resource, req.IDs = q.Get("resource"), q["id"]
	if v := q.Get("all"); v != "" {
		all, err := strconv.ParseBool(v)
		if err != nil {
			return req, http.StatusBadRequest, "all must be true or false."
		}
		req.All = all
	}
	if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
		if len(q) > 0 {
			return req, http.StatusBadRequest, "Give the purge in the query string or in a JSON body, not both."
		}
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			return req, http.StatusUnsupportedMediaType, "The body must be application/json."
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				return req, http.StatusRequestEntityTooLarge, "The body is too large."
			}
			return req, http.StatusBadRequest, "The body is not a purge: {\"resource\":\"items\",\"ids\":[\"...\"]} or {\"all\":true}."
		}
		if dec.More() {
			return req, http.StatusBadRequest, "The body holds more than one JSON value."
		}
	}
	switch {
	case req.All && (req.Resource != "" || len(req.IDs) > 0):
		return req, http.StatusBadRequest, "all purges everything: give it alone."
	case req.All:
		return req, 0, ""
	case req.Resource == "":
		return req, http.StatusBadRequest, "Say what to purge: resource (and id), or all=true."
	case len(req.IDs) > maxIDs:
		return req, http.StatusBadRequest, "At most " + strconv.Itoa(maxIDs) + " ids per purge."
	}
	if _, ok := sources.ResourceByName(req.Resource); !ok {
		return req, http.StatusBadRequest, "Unknown resource " + strconv.Quote(req.Resource) + "."
	}
	for _, id := range req.IDs {
		if id == "" || len(id) > maxID || strings.ContainsAny(id, "\n/") {
			return req, http.StatusBadRequest, "An id must be 1 to 256 bytes, without slashes or newlines."
		}
	}
	return req, 0, ""
}
