package admin

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/prodapi/prodapi/server/metrics"
)

// purges records what the handler asked for.
type purges struct {
	calls []string
	err   error
}

func (p *purges) PurgeDocs(_ context.Context, res string, ids ...string) error {
	p.calls = append(p.calls, "docs "+res+" "+strings.Join(ids, ","))
	return p.err
}

func (p *purges) PurgeResource(_ context.Context, res string) error {
	p.calls = append(p.calls, "resource "+res)
	return p.err
}

func (p *purges) PurgeAll(context.Context) error {
	p.calls = append(p.calls, "all")
	return p.err
}

const secret = "an-admin-secret-of-at-least-32-bytes"

var errNotPropagated = errors.New("not propagated")

func do(t *testing.T, p *purges, method, target, auth, ctype, body string) (*httptest.ResponseRecorder, map[string]any) {
	t.Helper()
	h := Handler(p, secret, Options{Partial: func(err error) bool { return errors.Is(err, errNotPropagated) }})
	var r *http.Request
	if body != "" {
		r = httptest.NewRequest(method, target, strings.NewReader(body))
		r.Header.Set("Content-Type", ctype)
	} else {
		r = httptest.NewRequest(method, target, nil)
	}
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	var out map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s %s: body is not JSON: %q", method, target, w.Body.String())
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, target, ct)
	}
	return w, out
}

func TestPurge(t *testing.T) {
	bearer := "Bearer " + secret
	for _, tc := range []struct {
		name, target, ctype, body string
		want                      string
	}{
		{"doc by query", "/purge?resource=items&id=a&id=b", "", "", "docs items a,b"},
		{"resource by query", "/purge?resource=events", "", "", "resource events"},
		{"all by query", "/purge?all=true", "", "", "all"},
		{"doc by JSON", "/purge", "application/json", `{"resource":"planning","ids":["p1"]}`, "docs planning p1"},
		{"all by JSON", "/purge", "application/json; charset=utf-8", `{"all":true}`, "all"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &purges{}
			w, out := do(t, p, "POST", tc.target, bearer, tc.ctype, tc.body)
			if w.Code != 200 || out["_status"] != "OK" {
				t.Fatalf("status %d, body %s", w.Code, w.Body)
			}
			if !slices.Equal(p.calls, []string{tc.want}) {
				t.Errorf("calls %q, want %q", p.calls, tc.want)
			}
		})
	}
}

func TestPurgeRefused(t *testing.T) {
	bearer := "Bearer " + secret
	for _, tc := range []struct {
		name, method, target, auth, ctype, body string
		status                                  int
	}{
		{"no secret", "POST", "/purge?all=true", "", "", "", 401},
		{"wrong secret", "POST", "/purge?all=true", "Bearer nope", "", "", 401},
		{"not bearer", "POST", "/purge?all=true", "Basic " + secret, "", "", 401},
		{"unknown path without secret", "GET", "/metrics", "", "", "", 401},
		{"unknown path", "GET", "/metrics", bearer, "", "", 404},
		{"GET", "GET", "/purge?all=true", bearer, "", "", 405},
		{"nothing", "POST", "/purge", bearer, "", "", 400},
		{"unknown resource", "POST", "/purge?resource=nope", bearer, "", "", 400},
		{"ids without resource", "POST", "/purge?id=a", bearer, "", "", 400},
		{"all and resource", "POST", "/purge?all=true&resource=items", bearer, "", "", 400},
		{"all not boolean", "POST", "/purge?all=yes%20please", bearer, "", "", 400},
		{"unknown parameter", "POST", "/purge?resource=items&ids=a", bearer, "", "", 400},
		{"empty id", "POST", "/purge?resource=items&id=", bearer, "", "", 400},
		{"id with a slash", "POST", "/purge?resource=items&id=a/b", bearer, "", "", 400},
		{"not JSON", "POST", "/purge", bearer, "text/plain", "resource=items", 415},
		{"bad JSON", "POST", "/purge", bearer, "application/json", `{"resource":`, 400},
		{"unknown JSON field", "POST", "/purge", bearer, "application/json", `{"resource":"items","id":"a"}`, 400},
		{"two JSON values", "POST", "/purge", bearer, "application/json", `{"all":true}{"all":true}`, 400},
		{"query and body", "POST", "/purge?all=true", bearer, "application/json", `{"all":true}`, 400},
		{"body too large", "POST", "/purge", bearer, "application/json", `{"resource":"items","ids":["` + strings.Repeat("a", 70<<10) + `"]}`, 413},
		{"too many ids", "POST", "/purge?resource=items" + strings.Repeat("&id=x", maxIDs+1), bearer, "", "", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &purges{}
			w, out := do(t, p, tc.method, tc.target, tc.auth, tc.ctype, tc.body)
			if w.Code != tc.status {
				t.Errorf("status %d, want %d (%s)", w.Code, tc.status, w.Body)
			}
			e, _ := out["_error"].(map[string]any)
			if out["_status"] != "ERR" || e == nil || e["code"] != float64(tc.status) || e["message"] == "" {
				t.Errorf("not the error envelope: %s", w.Body)
			}
			if len(p.calls) != 0 {
				t.Errorf("a refused request purged: %q", p.calls)
			}
		})
	}
}

func TestPurgeNotPropagated(t *testing.T) {
	p := &purges{err: errNotPropagated}
	w, _ := do(t, p, "POST", "/purge?resource=items", "Bearer "+secret, "", "")
	if w.Code != 503 || w.Header().Get("Retry-After") == "" {
		t.Errorf("status %d, Retry-After %q; want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	p = &purges{err: errors.New("boom")}
	if w, _ := do(t, p, "POST", "/purge?all=1", "Bearer "+secret, "", ""); w.Code != 500 {
		t.Errorf("status %d, want 500", w.Code)
	}
}

func TestEmptySecretRefusesEverything(t *testing.T) {
	h := Handler(&purges{}, "", Options{})
	r := httptest.NewRequest("POST", "/purge?all=true", nil)
	r.Header.Set("Authorization", "Bearer ")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != 401 {
		t.Errorf("empty secret: status %d, want 401", w.Code)
	}
}

// Every purge attempted counts by scope and result, refused requests do
// not, and every series exists at 0 from the start.
func TestPurgesCounted(t *testing.T) {
	m := metrics.NewMetrics()
	p := &purges{}
	h := Handler(p, secret, Options{Metrics: m, Partial: func(err error) bool { return errors.Is(err, errNotPropagated) }})
	var text strings.Builder
	if err := m.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(text.String(), "prodapi_admin_purges_total{"); got != len(purgeScopes)*len(purgeResults) {
		t.Errorf("%d series at the start, want %d:\n%s", got, len(purgeScopes)*len(purgeResults), text.String())
	}
	post := func(target, auth string, err error) {
		p.err = err
		r := httptest.NewRequest("POST", target, nil)
		r.Header.Set("Authorization", auth)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	bearer := "Bearer " + secret
	post("/purge?resource=items&id=a", bearer, nil)
	post("/purge?resource=items&id=b", bearer, nil)
	post("/purge?resource=items", bearer, errNotPropagated)
	post("/purge?all=true", bearer, errors.New("boom"))
	post("/purge?all=true", "Bearer nope", nil)
	post("/purge?resource=nope", bearer, nil)
	c := m.Counter("prodapi_admin_purges_total", "", "scope", "result")
	for _, tc := range []struct {
		scope, result string
		want          uint64
	}{
		{"docs", "ok", 2},
		{"resource", "partial", 1},
		{"all", "error", 1},
		{"all", "ok", 0},
		{"resource", "ok", 0},
	} {
		if got := c.Value(tc.scope, tc.result); got != tc.want {
			t.Errorf("purges{scope=%s,result=%s} = %d, want %d", tc.scope, tc.result, got, tc.want)
		}
	}
	if got := c.Sum(); got != 4 {
		t.Errorf("%d purges counted, want 4 (refused requests are not purges)", got)
	}
}

// The admin listener answers in the API's envelope, written by the API's
// writer: the same bytes and headers as a refusal of the API.
func TestRefusalsInTheAPIEnvelope(t *testing.T) {
	w, _ := do(t, &purges{}, "POST", "/purge?x<y=1", "Bearer "+secret, "", "")
	want := `{"_status":"ERR","_error":{"code":400,"message":"Unknown parameter \"x<y\": use resource, id and all."}}`
	if w.Code != 400 || w.Body.String() != want {
		t.Errorf("%d %s, want 400 %s", w.Code, w.Body, want)
	}
	if got := w.Header().Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q", got)
	}
	w, _ = do(t, &purges{}, "POST", "/purge", "Bearer not-the-secret", "", "")
	if w.Code != 401 || w.Header().Get("WWW-Authenticate") != `Bearer realm="prodapi-admin"` {
		t.Errorf("%d %v", w.Code, w.Header())
	}
}
