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
// replica only: 503) or error (500). Every series exists at 0 from the
// start. Refused requests (401, 4xx) are not purges and are not counted.
package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"mime"
	"net/http"
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

// Label values of prodapi_admin_purges_total.
var (
	purgeScopes  = [...]string{"docs", "resource", "all"}
	purgeResults = [...]string{"ok", "partial", "error"}
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
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/purge", h.purge)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if !h.authorized(w, r) {
			return
		}
		httperr.Write(w, r, &httperr.Error{Status: http.StatusNotFound, Msg: "Not found: the admin listener serves POST /purge."})
	})
	return mux
}

type handler struct {
	p       Purger
	secret  []byte
	partial func(error) bool
	log     *slog.Logger
	purges  *metrics.Counter // scope, result; nil counts nothing
}

// authorized checks the bearer secret in constant time, answering 401 when
// it is missing or wrong.
func (h *handler) authorized(w http.ResponseWriter, r *http.Request) bool {
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if len(h.secret) > 0 && strings.EqualFold(scheme, "Bearer") &&
		subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), h.secret) == 1 {
		return true
	}
	httperr.Write(w, r, &httperr.Error{Status: http.StatusUnauthorized, Msg: "Please provide the admin bearer secret.",
		Header: http.Header{"Www-Authenticate": {`Bearer realm="prodapi-admin"`}}})
	return false
}

// A request is one purge: by resource and ids, by resource, or all.
type request struct {
	Resource string   `json:"resource,omitempty"`
	IDs      []string `json:"ids,omitempty"`
	All      bool     `json:"all,omitempty"`
}

func (h *handler) purge(w http.ResponseWriter, r *http.Request) {
	if !h.authorized(w, r) {
		return
	}
	if r.Method != http.MethodPost {
		httperr.Write(w, r, &httperr.Error{Status: http.StatusMethodNotAllowed, Msg: "The method is not allowed for the requested URL.",
			Header: http.Header{"Allow": {"POST"}}})
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	req, status, msg := parse(r)
	if status != 0 {
		httperr.Write(w, r, &httperr.Error{Status: status, Msg: msg})
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
	h.log.Info("admin: purge", "resource", req.Resource, "ids", len(req.IDs), "all", req.All, "error", err)
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
