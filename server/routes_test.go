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
		{"GET", "/healthz", 200, "/healthz"},
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
