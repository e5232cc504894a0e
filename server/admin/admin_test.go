package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
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
			if w.Header().Get("X-Content-Type-Options") != "nosniff" || w.Header().Get("X-Request-Id") == "" {
				t.Errorf("headers %v, want nosniff and a request id", w.Header())
			}
		})
	}
}

// audited is a handler whose log and counters the test reads.
func audited(t *testing.T, p *purges) (http.Handler, *metrics.Metrics, *bytes.Buffer) {
	t.Helper()
	m, log := metrics.NewMetrics(), &bytes.Buffer{}
	h := Handler(p, secret, Options{Metrics: m, Logger: slog.New(slog.NewJSONHandler(log, nil)),
		Partial: func(err error) bool { return errors.Is(err, errNotPropagated) }})
	return h, m, log
}

// auditLine is one line of the admin's log.
type auditLine struct {
	Level, Msg, Reason, Method, Path string
	Status                           int
	ClientAddr                       string `json:"client_addr"`
	RequestID                        string `json:"request_id"`
}

func lastAuditLine(t *testing.T, log *bytes.Buffer) auditLine {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	var l auditLine
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &l); err != nil {
		t.Fatalf("log line %q: %v", lines[len(lines)-1], err)
	}
	return l
}

// Every refusal is counted by reason and logged with who asked (the TCP
// peer, whatever a proxy header says) and the request id it was answered
// with; every series exists at 0 from the start.
func TestRefusalsAudited(t *testing.T) {
	h, m, log := audited(t, &purges{})
	refused := m.Counter("prodapi_admin_refused_total", "", "reason")
	for _, reason := range refusedReasons {
		if got := refused.Value(reason); got != 0 {
			t.Errorf("refused{reason=%s} = %d at the start", reason, got)
		}
	}
	var text strings.Builder
	m.WriteText(&text)
	if got := strings.Count(text.String(), "prodapi_admin_refused_total{"); got != len(refusedReasons) {
		t.Errorf("%d refused series at the start, want %d", got, len(refusedReasons))
	}
	bearer := "Bearer " + secret
	for _, tc := range []struct {
		method, target, auth, reason string
		status                       int
	}{
		{"POST", "/purge?all=true", "", reasonUnauthorized, 401},
		{"POST", "/purge?all=true", "Bearer a-guess", reasonUnauthorized, 401},
		{"GET", "/metrics", "", reasonUnauthorized, 401},
		{"GET", "/metrics", bearer, reasonNotFound, 404},
		{"GET", "/purge?all=true", bearer, reasonMethod, 405},
		{"POST", "/purge?resource=nope", bearer, reasonInvalid, 400},
		{"POST", "/" + strings.Repeat("x", 1000), "", reasonUnauthorized, 401},
	} {
		r := httptest.NewRequest(tc.method, tc.target, nil)
		r.RemoteAddr = "[::ffff:198.51.100.7]:40000"
		r.Header.Set("X-Forwarded-For", "203.0.113.9")
		if tc.auth != "" {
			r.Header.Set("Authorization", tc.auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		l := lastAuditLine(t, log)
		want := auditLine{Level: "WARN", Msg: "admin: refused", Reason: tc.reason, Method: tc.method, Path: truncate(r.URL.Path, maxLoggedPath),
			Status: tc.status, ClientAddr: "198.51.100.7", RequestID: w.Header().Get("X-Request-Id")}
		if w.Code != tc.status || l != want || l.RequestID == "" {
			t.Errorf("%s %.40s: %d, logged %+v; want %d, %+v", tc.method, tc.target, w.Code, l, tc.status, want)
		}
	}
	for reason, want := range map[string]uint64{reasonUnauthorized: 4, reasonNotFound: 1, reasonMethod: 1, reasonInvalid: 1} {
		if got := refused.Value(reason); got != want {
			t.Errorf("refused{reason=%s} = %d, want %d", reason, got, want)
		}
	}
	if got := m.Counter("prodapi_admin_purges_total", "", "scope", "result").Sum(); got != 0 {
		t.Errorf("%d refusals counted as purges", got)
	}
}

func truncate(s string, n int) string { return s[:min(len(s), n)] }

// Each purge's log line names its client's address and its request id,
// the one its answer carries; each request gets an id of its own.
func TestPurgeAudited(t *testing.T) {
	h, _, log := audited(t, &purges{})
	seen := map[string]bool{}
	for range 3 {
		r := httptest.NewRequest("POST", "/purge?resource=items&id=a", nil)
		r.RemoteAddr = "192.0.2.9:5555"
		r.Header.Set("Authorization", "Bearer "+secret)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		l := lastAuditLine(t, log)
		id := w.Header().Get("X-Request-Id")
		if w.Code != 200 || l.Msg != "admin: purge" || l.Level != "INFO" || l.ClientAddr != "192.0.2.9" || l.RequestID != id || id == "" || seen[id] {
			t.Errorf("%d, X-Request-Id %q, logged %+v", w.Code, id, l)
		}
		seen[id] = true
		if w.Header().Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("X-Content-Type-Options %q", w.Header().Get("X-Content-Type-Options"))
		}
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
