package server

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
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

// The exact-path index in front of chi answers every request as chi
// alone does: the same status, headers and body, under the same route
// pattern in the access log, for every route, method, id shape, token
// and escaping (404 and 405 before auth, ids checked, scopes checked).
func TestIndexAnswersAsChi(t *testing.T) {
	var loads [2]int
	serve := func(noIndex bool) (http.Handler, *bytes.Buffer) {
		log := new(bytes.Buffer)
		i := 0
		if noIndex {
			i = 1
		}
		load := LoaderFunc(func(context.Context, *sources.Query) (*sources.Representation, error) {
			loads[i]++
			return okRep(`{"_items":[]}`), nil
		})
		s := New(load, Options{
			Auth:      AuthOptions{Enabled: true, Secret: testSecret, Now: func() time.Time { return testNow }},
			Now:       func() time.Time { return testNow },
			AccessLog: log,
		})
		s.noIndex = noIndex
		return s.Handler(), log
	}
	indexed, indexedLog := serve(false)
	plain, plainLog := serve(true)

	all := token(t, sources.AllScopes...)
	desks := token(t, sources.ScopeDesks)
	targets := []string{
		"/prodapi/v1", "/prodapi/v1/", "/prodapi/v1//", "/prodapi/v1/openapi.json", "/prodapi/v1/openapi.json/",
		"/prodapi/v1/openapi.json/x", "/prodapi/v1/assets/1234/a.jpg", "/prodapi/v1/assets/",
		"/healthz", "/readyz", "/", "/elsewhere", "/prodapi", "/prodapi/v2/items",
	}
	for _, res := range resources() {
		base := "/prodapi/v1/" + res.Name
		targets = append(targets,
			base, base+"/", base+"//", base+"?max_results=2", base+"?where=%7B%7D", base+"?bogus=1",
			base+"/5d76113ab3af37dea3a2eb9e", base+"/5d76113ab3af37dea3a2eb9e/", base+"/5d76113ab3af37dea3a2eb9e//",
			base+"/urn:newsml:localhost:5000:2019-08-14T15:02:48.032188:d1be79f4",
			base+"/caf%C3%A9", base+"/caf%c3%a9", base+"/urn%3Anewsml%3Ax", base+"/a%2Fb", base+"/a%2fb", base+"/a%20b",
			base+"/a%2541", base+"/caf%c3%a9%2541", base+"/a@b", base+"/a/b", base+"/a/b/", base+"/"+strings.Repeat("a", 512), base+"/"+strings.Repeat("a", 513),
			base+"/x?projection=%7B%22a%22:1%7D", base+"/x?max_results=2",
			strings.ToUpper(base), base+".json", base+"x/1",
		)
	}
	for _, target := range targets {
		for _, method := range []string{"GET", "HEAD", "OPTIONS", "POST", "DELETE", "TRACE"} {
			for _, auth := range []string{"", all, desks, "Bearer nonsense"} {
				var got [2]*httptest.ResponseRecorder
				for i, h := range []http.Handler{indexed, plain} {
					r := httptest.NewRequest(method, target, nil)
					if auth != "" {
						r.Header.Set("Authorization", auth)
					}
					got[i] = httptest.NewRecorder()
					h.ServeHTTP(got[i], r)
				}
				name := method + " " + target[:min(len(target), 70)] + " auth=" + auth[:min(len(auth), 12)]
				a, b := got[0], got[1]
				if a.Code != b.Code || a.Body.String() != b.Body.String() {
					t.Errorf("%s: index %d %.80s, chi %d %.80s", name, a.Code, a.Body, b.Code, b.Body)
				}
				for _, h := range []http.Header{a.Header(), b.Header()} {
					h.Del("X-Request-Id")
				}
				if ah, bh := a.Header(), b.Header(); len(ah) != len(bh) {
					t.Errorf("%s: index headers %v, chi %v", name, ah, bh)
				} else {
					for k := range ah {
						if ah.Get(k) != bh.Get(k) {
							t.Errorf("%s: %s index %q, chi %q", name, k, ah.Get(k), bh.Get(k))
						}
					}
				}
				if ar, br := lastRoute(t, indexedLog), lastRoute(t, plainLog); ar != br {
					t.Errorf("%s: route index %q, chi %q", name, ar, br)
				}
			}
		}
	}
	if loads[0] != loads[1] || loads[0] == 0 {
		t.Errorf("loads: index %d, chi %d", loads[0], loads[1])
	}
}
