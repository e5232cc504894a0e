package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// lastRoute returns the route of the last line in an access log, and
// empties it. (The handler writes its line before ServeHTTP returns.)
func lastRoute(t *testing.T, log *bytes.Buffer) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	log.Reset()
	var line struct {
		Route string `json:"route"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &line); err != nil {
		t.Fatalf("access line %q: %v", lines[len(lines)-1], err)
	}
	return line.Route
}

// Every request's access line names the route pattern chi matched: a
// detail's id and a trailing slash keep their own patterns, escaped ids
// route as plain ones, and what no route matches (a 404 or 405, before
// auth) is "unmatched".
func TestRoutePatterns(t *testing.T) {
	log := new(bytes.Buffer)
	load := LoaderFunc(func(context.Context, *sources.Query) (*sources.Representation, error) {
		return okRep(`{"_items":[]}`), nil
	})
	h := New(load, Options{
		Auth:      AuthOptions{Enabled: true, Secret: testSecret, Now: func() time.Time { return testNow }},
		Now:       func() time.Time { return testNow },
		AccessLog: log,
	}).Handler()
	all := token(t, sources.AllScopes...)
	for _, tc := range []struct {
		method, target string
		status         int
		route          string
	}{
		{"GET", "/prodapi/v1", 200, "/prodapi/v1"},
		{"GET", "/prodapi/v1/", 200, "/prodapi/v1/"},
		{"GET", "/prodapi/v1/openapi.json", 200, "/prodapi/v1/openapi.json"},
		{"GET", "/prodapi/v1/items", 200, "/prodapi/v1/items"},
		{"HEAD", "/prodapi/v1/items/", 200, "/prodapi/v1/items/"},
		{"GET", "/prodapi/v1/items?max_results=2", 200, "/prodapi/v1/items"},
		{"GET", "/prodapi/v1/items/5d76113ab3af37dea3a2eb9e", 200, "/prodapi/v1/items/{id}"},
		{"GET", "/prodapi/v1/items/5d76113ab3af37dea3a2eb9e/", 200, "/prodapi/v1/items/{id}/"},
		{"GET", "/prodapi/v1/items/urn%3Anewsml%3Ax", 200, "/prodapi/v1/items/{id}"},
		{"GET", "/prodapi/v1/items/a%2Fb", 404, "/prodapi/v1/items/{id}"},
		{"GET", "/prodapi/v1/items/a@b", 404, "/prodapi/v1/items/{id}"},
		{"OPTIONS", "/prodapi/v1/desks/x", 200, "/prodapi/v1/desks/{id}"},
		{"GET", "/prodapi/v1/assets/1234/a.jpg", 404, "/prodapi/v1/assets/*"},
		{"GET", "/healthz", 404, "unmatched"}, // the operator listener's
		{"GET", "/prodapi/v1/items//", 404, "/prodapi/v1/items/{id}/"},
		{"GET", "/prodapi/v1/items/a/b", 404, "unmatched"},
		{"POST", "/prodapi/v1/items", 405, "unmatched"},
		{"GET", "/elsewhere", 404, "unmatched"},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		r.Header.Set("Authorization", all)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != tc.status {
			t.Errorf("%s %s: status %d, want %d", tc.method, tc.target, w.Code, tc.status)
		}
		if got := lastRoute(t, log); got != tc.route {
			t.Errorf("%s %s: route %q, want %q", tc.method, tc.target, got, tc.route)
		}
	}
}

// Without a change log there is no /changes: the routing 404, OPTIONS
// included.
func TestChangesOff(t *testing.T) {
	ts := newTestServer(t, staticLoader(okRep(`{}`), nil))
	for _, m := range []string{"GET", "OPTIONS"} {
		if res := do(t, ts, m, "/prodapi/v1/changes", "Authorization", token(t, sources.AllScopes...)); res.status != 404 || res.body != body404 {
			t.Errorf("%s without a log: %d %s", m, res.status, res.body)
		}
	}
}

// The operator listener answers the probes and the metrics without a
// token, names their routes in its access lines and series, and answers
// anything else as the API's port answers an unknown URL.
func TestOpsRouting(t *testing.T) {
	ts := newTestServer(t, staticLoader(okRep(`{"_items":[]}`), nil), func(o *Options) {
		o.Checks = []Check{{Name: "sandbox", Critical: true, Probe: func(context.Context) error { return nil }}}
	})
	for _, tc := range []struct {
		method, target string
		status         int
		body           string // a prefix of it
		ctype          string
	}{
		{"GET", "/healthz", 200, `{"status":"ok"}`, "application/json"},
		{"GET", "/readyz", 200, `{"status":"ready","checks":{"sandbox":"ok"}}`, "application/json"},
		{"GET", "/metrics", 200, "# HELP ", "text/plain"},
		{"GET", "/prodapi/v1/items", 404, body404, "application/json"},
		{"GET", "/", 404, body404, "application/json"},
		{"POST", "/healthz", 405, body405, "application/json"},
	} {
		res := doOps(t, ts, tc.method, tc.target)
		if res.status != tc.status || !strings.HasPrefix(res.body, tc.body) || !strings.HasPrefix(res.header.Get("Content-Type"), tc.ctype) {
			t.Errorf("%s %s: %d %s %.80s, want %d %s %s", tc.method, tc.target, res.status, res.header.Get("Content-Type"), res.body, tc.status, tc.ctype, tc.body)
		}
		if res.header.Get("X-Request-Id") == "" || res.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s %s: X-Request-Id %q, X-Content-Type-Options %q", tc.method, tc.target, res.header.Get("X-Request-Id"), res.header.Get("X-Content-Type-Options"))
		}
	}
	m := doOps(t, ts, "GET", "/metrics")
	for _, want := range []string{`prodapi_http_requests_total{code="200",route="/healthz"} 1`, `prodapi_http_requests_total{code="200",route="/readyz"} 1`,
		`prodapi_http_requests_total{code="404",route="unmatched"} 2`} {
		if !strings.Contains(m.body, want) {
			t.Errorf("the metrics lack %s", want)
		}
	}
}
