package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	"github.com/prodapi/prodapi/test/testkit"
)

const devSecret = "an-end-to-end-test-secret-of-32-bytes-or-more"

// syncBuffer is an io.Writer tests can read while run writes to it.
type syncBuffer = testkit.Buffer

type instance struct {
	base           string // http://127.0.0.1:port
	ops            string // the operator listener's http://127.0.0.1:port: probes and /metrics
	admin          string // the admin listener's http://127.0.0.1:port, when there is one
	stdout, stderr *syncBuffer
	stop           func() error // cancels run and returns its error
	// onDrain, when set before stop, runs once the server drains and
	// before its listener closes.
	onDrain func()
}

// testOpsAddr is the operator listener's address in tests: a port of the
// system's choosing, never the default :5502, which another test (or
// another checkout's) may hold.
const testOpsAddr = "127.0.0.1:0"

// withTestOps returns vars with the operator listener on testOpsAddr
// unless they place it.
func withTestOps(vars map[string]string) map[string]string {
	all := map[string]string{"PRODAPI_OPS_ADDR": testOpsAddr}
	maps.Copy(all, vars)
	return all
}

// start runs the whole program in-process on 127.0.0.1:0 (its operator
// listener too) with the given environment (on top of a sandbox and a
// secret) and stops it at cleanup. The fair share is off unless the
// environment given turns it on: the tests of everything else make
// requests from one client as fast as the machine lets them (a walk in
// small pages, a shutdown under 40 loads), which its defaults would
// limit on a fast day and not on a slow one.
func start(t testing.TB, kv ...string) *instance {
	t.Helper()
	vars := map[string]string{"PRODAPI_SANDBOX": "sample", "AUTH_SERVER_SHARED_SECRET": devSecret, "PRODAPI_OPS_ADDR": testOpsAddr,
		"PRODAPI_RATE_LIMIT": "off", "PRODAPI_RATE_LIMIT_ADDR": "off", "PRODAPI_CLIENT_MAX_LOADS": "0"}
	for i := 0; i+1 < len(kv); i += 2 {
		vars[kv[i]] = kv[i+1]
	}
	in := &instance{stdout: &syncBuffer{}, stderr: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() { // ends when ctx is cancelled (or run fails)
		done <- run(ctx, env{args: []string{"-addr", "127.0.0.1:0"}, getenv: func(k string) string { return vars[k] },
			stdout: in.stdout, stderr: in.stderr, ready: func(a string) { ready <- a },
			adminReady: func(a string) { in.admin = "http://" + a },
			opsReady:   func(a string) { in.ops = "http://" + a },
			// Read after stop's cancel, which the test calls after setting it.
			draining: func() {
				if in.onDrain != nil {
					in.onDrain()
				}
			}})
	}()
	select {
	case addr := <-ready:
		in.base = "http://" + addr
	case err := <-done:
		cancel()
		t.Fatalf("run: %v\n%s", err, in.stderr)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("run did not start listening")
	}
	var once sync.Once
	var stopErr error
	in.stop = func() error {
		once.Do(func() { cancel(); stopErr = <-done })
		return stopErr
	}
	t.Cleanup(func() {
		if err := in.stop(); err != nil {
			t.Errorf("run returned %v", err)
		}
	})
	return in
}

func (in *instance) get(t *testing.T, target, authorization string) (int, http.Header, []byte) {
	t.Helper()
	return request(t, http.MethodGet, in.base+target, "Authorization", authorization)
}

// getOps is get on the operator listener: /healthz, /readyz, /metrics.
func (in *instance) getOps(t *testing.T, target string) (int, http.Header, []byte) {
	t.Helper()
	return request(t, http.MethodGet, in.ops+target)
}

// request sends method to url with the headers given in pairs (an empty
// value is left out) and returns the status, headers and body.
func request(t *testing.T, method, url string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	status, h, b, err := tryRequest(method, url, header...)
	if err != nil {
		t.Fatal(err)
	}
	return status, h, b
}

// tryRequest is request for goroutines other than the test's: it returns
// its failure.
func tryRequest(method, url string, header ...string) (int, http.Header, []byte, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] != "" {
			req.Header.Set(header[i], header[i+1])
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body) // a body cut short is what some tests look at
	return res.StatusCode, res.Header, b, nil
}

// metric reads one series of /metrics (0 when absent).
func (in *instance) metric(t *testing.T, series string) float64 {
	t.Helper()
	_, _, body := in.getOps(t, "/metrics")
	for line := range strings.SplitSeq(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, _ := strconv.ParseFloat(v, 64)
			return f
		}
	}
	return 0
}

// sourceQueries sums prodapi_source_queries_total over every series.
func (in *instance) sourceQueries(t *testing.T) float64 {
	t.Helper()
	_, _, body := in.getOps(t, "/metrics")
	total := 0.0
	for line := range strings.SplitSeq(string(body), "\n") {
		if strings.HasPrefix(line, "prodapi_source_queries_total{") {
			f, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			total += f
		}
	}
	return total
}

func bearer(t testing.TB, secret string, scopes ...string) string {
	t.Helper()
	tok, err := server.MintToken([]byte(secret), "e2e", scopes, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + tok
}

// The quick start: what `make run` prints is a token and a curl line that
// returns items.
// Without PRODAPI_URL, the banner, the media hrefs and the OpenAPI
// document name the port listened on (-addr 127.0.0.1:0), not PORT's.
func TestQuickStart(t *testing.T) {
	in := start(t)
	out := in.stdout.String()
	base := "http://localhost:" + in.base[strings.LastIndexByte(in.base, ':')+1:]
	m := regexp.MustCompile(`export TOKEN=(\S+)`).FindStringSubmatch(out)
	if m == nil || !strings.Contains(out, `curl -H "Authorization: Bearer $TOKEN" `+base+"/prodapi/v1/items\n") ||
		!strings.Contains(out, "at "+base+"/prodapi/v1 (listening on 127.0.0.1:") {
		t.Fatalf("run printed no token and curl line naming %s:\n%s", base, out)
	}
	var doc struct{ Servers []struct{ URL string } }
	if _, _, b := in.get(t, "/prodapi/v1/openapi.json", ""); json.Unmarshal(b, &doc) != nil || len(doc.Servers) == 0 || doc.Servers[0].URL != base+"/prodapi/v1" {
		t.Errorf("the OpenAPI document's servers are %v, want %s/prodapi/v1", doc.Servers, base)
	}
	status, h, body := in.get(t, "/prodapi/v1/items", "Bearer "+m[1])
	var list struct {
		Items []map[string]any    `json:"_items"`
		Meta  struct{ Total int } `json:"_meta"`
	}
	if err := json.Unmarshal(body, &list); status != 200 || err != nil {
		t.Fatalf("items: %d %v", status, err)
	}
	if len(list.Items) != 25 || list.Meta.Total < 40 || h.Get("X-Total-Count") != strconv.Itoa(list.Meta.Total) {
		t.Errorf("items: %d items, total %d, X-Total-Count %s", len(list.Items), list.Meta.Total, h.Get("X-Total-Count"))
	}
	// Renditions point at assets the sandbox serves.
	_, _, detail := in.get(t, "/prodapi/v1/items?source="+`{"query":{"term":{"type":"picture"}},"size":1}`, "Bearer "+m[1])
	href := regexp.MustCompile(`"href":"` + regexp.QuoteMeta(base) + `(/prodapi/v1/assets/[^"]+)"`).FindSubmatch(detail)
	if href == nil {
		t.Fatalf("no rendition href in %s", detail)
	}
	if status, h, img := in.get(t, string(href[1]), "Bearer "+m[1]); status != 200 || !strings.HasPrefix(h.Get("Content-Type"), "image/") || len(img) == 0 {
		t.Errorf("asset %s: %d %s %d bytes", href[1], status, h.Get("Content-Type"), len(img))
	}
}

func TestTokenCommand(t *testing.T) {
	var out bytes.Buffer
	getenv := func(k string) string { return map[string]string{"AUTH_SERVER_SHARED_SECRET": devSecret}[k] }
	if err := run(context.Background(), env{args: []string{"token", "-scope", "ARCHIVE_READ, desks_read", "-ttl", "2h"},
		getenv: getenv, stdout: &out, stderr: io.Discard}); err != nil {
		t.Fatal(err)
	}
	tok := "Bearer " + strings.TrimSpace(out.String())
	in := start(t)
	for target, want := range map[string]int{"/prodapi/v1/items": 200, "/prodapi/v1/desks": 200, "/prodapi/v1/users": 403} {
		if status, _, _ := in.get(t, target, tok); status != want {
			t.Errorf("%s with the minted token: %d, want %d", target, status, want)
		}
	}
	for _, args := range [][]string{{"token", "-scope", "ARCHIVE_WRITE"}, {"token", "-ttl", "-1h"}} {
		if err := run(context.Background(), env{args: args, getenv: getenv, stdout: io.Discard, stderr: io.Discard}); err == nil {
			t.Errorf("%v succeeded", args)
		}
	}
	noSecret := func(string) string { return "" }
	if err := run(context.Background(), env{args: []string{"token"}, getenv: noSecret, stdout: io.Discard, stderr: io.Discard}); err == nil {
		t.Error("token without a secret succeeded")
	}
}

func TestRefusesToStart(t *testing.T) {
	for _, tc := range []struct {
		vars map[string]string
		want []string
	}{
		{map[string]string{"PRODAPI_SANDBOX": "sample"}, []string{"AUTH_SERVER_SHARED_SECRET is empty"}},
		{map[string]string{"PRODAPI_SANDBOX": "sample", "AUTH_SERVER_SHARED_SECRET": devSecret, "PORT": "x", "PRODAPI_CACHE_STALE": "soon"},
			[]string{"PORT", "PRODAPI_CACHE_STALE"}},
		{map[string]string{"PRODAPI_SANDBOX": t.TempDir() + "/missing", "AUTH_SERVER_SHARED_SECRET": devSecret}, []string{"sandbox"}},
	} {
		vars := withTestOps(tc.vars)
		err := run(context.Background(), env{args: []string{"-addr", "127.0.0.1:0"}, getenv: func(k string) string { return vars[k] },
			stdout: io.Discard, stderr: io.Discard})
		for _, w := range tc.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("run(%v) = %v, want an error mentioning %q", tc.vars, err, w)
			}
		}
	}
	if err := run(context.Background(), env{args: []string{"frobnicate"}, getenv: func(string) string { return "" }, stdout: io.Discard, stderr: io.Discard}); err == nil {
		t.Error("unknown command accepted")
	}
}

// Shutdown under load loses no request: in-flight requests (each held up
// by the sandbox's latency) all complete before run returns.
func TestGracefulShutdown(t *testing.T) {
	// A grace far beyond what draining needs: on a busy machine 40
	// requests under -race can take more than the default 10s.
	in := start(t, "PRODAPI_SANDBOX_LATENCY", "300ms", "PRODAPI_AUTH_ENABLED", "false", "PRODAPI_SHUTDOWN_GRACE", "2m")
	const n = 40
	// Fresh connections: a keep-alive connection the server closes as
	// idle while a client picks it up is a client-side retry matter, not
	// a request the server accepted.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			// Distinct keys, so every request really waits on the backend.
			res, err := client.Get(fmt.Sprintf("%s/prodapi/v1/items?max_results=%d", in.base, i+1))
			if err != nil {
				errs <- err
				return
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				errs <- fmt.Errorf("status %d", res.StatusCode)
			}
		})
	}
	// Stop once every request is in flight, held by the backend.
	deadline := time.Now().Add(10 * time.Second)
	for in.metric(t, `prodapi_source_queries_total{backend="sandbox",op="search",resource="items"}`) < n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if err := in.stop(); err != nil {
		t.Errorf("run returned %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("request lost during shutdown: %v", err)
	}
	if !strings.Contains(in.stderr.String(), `"msg":"stopped"`) {
		t.Errorf("no clean stop logged:\n%s", in.stderr)
	}
}

// Logs: one JSON line per request, naming the client by its token's
// client_id, its address (the TCP peer's: without
// PRODAPI_TRUSTED_PROXY_HEADER no header is believed) and its
// User-Agent; never a token.
func TestAccessLog(t *testing.T) {
	in := start(t)
	tok := bearer(t, devSecret, sources.AllScopes...)
	request(t, http.MethodGet, in.base+"/prodapi/v1/items?max_results=1", "Authorization", tok,
		"X-Forwarded-For", "203.0.113.9", "User-Agent", "newsroom-app/1.0")
	in.get(t, "/prodapi/v1/desks/nope", tok)
	in.get(t, "/prodapi/v1/users", "Bearer garbage")
	// Logs are buffered (flushed every 100ms); stopping flushes them all.
	if err := in.stop(); err != nil {
		t.Fatal(err)
	}
	var requests []map[string]any
	sc := bufio.NewScanner(strings.NewReader(in.stderr.String()))
	for sc.Scan() {
		var line map[string]any
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("log line is not JSON: %s", sc.Text())
		}
		if line["msg"] == "request" {
			requests = append(requests, line)
		}
	}
	if len(requests) != 3 {
		t.Fatalf("%d request lines, want 3:\n%s", len(requests), in.stderr)
	}
	for i, want := range []struct {
		route  string
		status float64
	}{{"/prodapi/v1/items", 200}, {"/prodapi/v1/desks/{id}", 404}, {"/prodapi/v1/users", 401}} {
		if requests[i]["route"] != want.route || requests[i]["status"] != want.status || requests[i]["request_id"] == "" {
			t.Errorf("line %d: %v", i, requests[i])
		}
	}
	if requests[0]["cache"] != "miss" {
		t.Errorf("first items request: cache %v, want miss", requests[0]["cache"])
	}
	if requests[0]["client_id"] != "e2e" || requests[0]["client_ip"] != "127.0.0.1" || requests[0]["user_agent"] != "newsroom-app/1.0" {
		t.Errorf("first items request: client_id %v, client_ip %v, user_agent %v; want e2e, 127.0.0.1, newsroom-app/1.0",
			requests[0]["client_id"], requests[0]["client_ip"], requests[0]["user_agent"])
	}
	if id, ok := requests[2]["client_id"]; ok {
		t.Errorf("a refused token named client %v", id)
	}
	if strings.Contains(in.stderr.String(), strings.TrimPrefix(tok, "Bearer ")) || strings.Contains(in.stderr.String(), devSecret) {
		t.Error("a token or the secret reached the log")
	}
}

// Enriching a page costs a constant number of backend queries: a page of
// 5 planning items and a page of 100 cost the same.
func TestEnrichmentQueryBound(t *testing.T) {
	dir := manyPlanning(t, 120)
	in := start(t, "PRODAPI_SANDBOX", dir, "PRODAPI_AUTH_ENABLED", "false")
	cost := func(target string) float64 {
		before := in.sourceQueries(t)
		if status, _, body := in.get(t, target, ""); status != 200 {
			t.Fatalf("%s: %d %s", target, status, body)
		}
		return in.sourceQueries(t) - before
	}
	small, large := cost("/prodapi/v1/planning?max_results=5"), cost("/prodapi/v1/planning?max_results=100")
	if small != large || small > 5 {
		t.Errorf("a page of 5 cost %v queries, a page of 100 cost %v; want equal and at most 1 + 4", small, large)
	}
	for _, res := range []string{"items", "assignments", "events"} {
		small, large := cost("/prodapi/v1/"+res+"?max_results=5"), cost("/prodapi/v1/"+res+"?max_results=100")
		if small > large || large > 5 {
			t.Errorf("%s: a page of 5 cost %v queries, of 100 %v", res, small, large)
		}
	}
}

// manyPlanning writes a sandbox directory: the sample newsroom whose
// planning collection is n copies, under their own ids, of the sample's
// richest planning item (an event, assigned coverages with delivered
// content, a scheduled update), so that pages of any size need every
// enrichment step.
func manyPlanning(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	sample := filepath.Join("..", "..", "sources", "sandbox", "sample")
	entries, err := os.ReadDir(sample)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".json") && e.Name() != "planning.json" {
			b, err := os.ReadFile(filepath.Join(sample, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644)
		}
	}
	b, err := os.ReadFile(filepath.Join(sample, "planning.json"))
	if err != nil {
		t.Fatal(err)
	}
	v, err := codec.DecodeJSON(b, codec.DecodeOptions{Extended: true})
	if err != nil {
		t.Fatal(err)
	}
	var richest *sources.Doc
	for _, o := range v.([]any) {
		if d := o.(*sources.Doc); bytes.Contains(codec.AppendJSON(nil, d), []byte(`"scheduled_update_id"`)) {
			richest = d
		}
	}
	if richest == nil {
		t.Fatal("the sample has no planning item with a scheduled update")
	}
	var out []any
	for i := range n {
		d := richest.Clone()
		id := fmt.Sprintf("urn:copy:%d", i)
		d.Set("_id", id)
		d.Set("guid", id)
		out = append(out, d)
	}
	if err := os.WriteFile(filepath.Join(dir, "planning.json"), codec.AppendJSON(nil, out), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestRedact(t *testing.T) {
	err := fmt.Errorf(`error parsing uri "mongodb://admin:s3cr%%2Ft@db/x": bad`)
	got := redact(err, "mongodb://admin:s3cr%2Ft@db/x")
	if strings.Contains(got, "s3cr") {
		t.Errorf("redact left the password: %s", got)
	}
}

// Oversized headers are refused (431) before any handler, auth or
// backend work, and net/http's own refusals (a malformed Host) come in
// the error envelope too.
func TestHeaderLimit(t *testing.T) {
	in := start(t)
	req, _ := http.NewRequest(http.MethodGet, in.base+"/prodapi/v1/items", nil)
	req.Header.Set("X-Padding", strings.Repeat("a", 70<<10))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !strings.HasPrefix(string(b), `{"_status":"ERR","_error":{"code":431,`) {
		t.Errorf("70 KiB of headers: %d %s, want 431 in the envelope", res.StatusCode, b)
	}
	if q := in.sourceQueries(t); q != 0 {
		t.Errorf("a refused request cost %v backend queries", q)
	}

	c, err := net.Dial("tcp", strings.TrimPrefix(in.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /prodapi/v1/items HTTP/1.1\r\nHost: a b\r\n\r\n")
	res, err = http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != 400 || !strings.HasPrefix(string(b), `{"_status":"ERR","_error":{"code":400,`) {
		t.Errorf("malformed Host: %d %s, want 400 in the envelope", res.StatusCode, b)
	}
}
