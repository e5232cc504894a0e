package server

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/testkit"
)

const (
	body404 = `{"_status":"ERR","_error":{"code":404,"message":"The requested URL was not found on the server. If you entered the URL manually please check your spelling and try again."}}`
	body401 = `{"_status":"ERR","_error":{"code":401,"message":"Please provide proper credentials"}}`
	body403 = `{"_status":"ERR","_error":{"code":403,"message":"Invalid scope"}}`
	body405 = `{"_status":"ERR","_error":{"code":405,"message":"The method is not allowed for the requested URL."}}`
)

type testServer struct {
	*httptest.Server
	srv   *Server
	ops   *httptest.Server // the operator listener's handler
	loads atomic.Int64
}

func newTestServer(t *testing.T, load LoaderFunc, edit ...func(*Options)) *testServer {
	t.Helper()
	ts := &testServer{}
	opts := Options{Auth: AuthOptions{Enabled: true, Secret: testSecret, Now: func() time.Time { return testNow }},
		Now: func() time.Time { return testNow }}
	for _, e := range edit {
		e(&opts)
	}
	counting := LoaderFunc(func(ctx context.Context, q *sources.Query) (*sources.Representation, error) {
		ts.loads.Add(1)
		return load(ctx, q)
	})
	ts.srv = New(counting, opts)
	api, ops := ts.srv.Handler(), ts.srv.OpsHandler() // both before either serves
	ts.Server = httptest.NewServer(api)
	t.Cleanup(ts.Close)
	ts.ops = httptest.NewServer(ops)
	t.Cleanup(ts.ops.Close)
	return ts
}

func token(t *testing.T, scopes ...string) string {
	t.Helper()
	tok, err := MintToken(testSecret, "test-client", scopes, time.Hour, testNow)
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + tok
}

type response struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, ts *testServer, method, target string, header ...string) response {
	t.Helper()
	// Ask for the identity coding unless the test says otherwise: left
	// unset, the transport would ask for gzip and decode it silently.
	r := testkit.Do(t, method, ts.URL+target, append([]string{"Accept-Encoding", "identity"}, header...)...)
	return response{r.Status, r.Header, r.Body}
}

// doOps is do on the operator listener.
func doOps(t *testing.T, ts *testServer, method, target string, header ...string) response {
	t.Helper()
	r := testkit.Do(t, method, ts.ops.URL+target, append([]string{"Accept-Encoding", "identity"}, header...)...)
	return response{r.Status, r.Header, r.Body}
}

func okRep(body string) *sources.Representation {
	return &sources.Representation{Status: 200, Body: []byte(body), ETag: sources.ETag([]byte(body)), Total: 3}
}

func staticLoader(rep *sources.Representation, err error) LoaderFunc {
	return func(context.Context, *sources.Query) (*sources.Representation, error) { return rep, err }
}

func TestRouting(t *testing.T) {
	ts := newTestServer(t, staticLoader(okRep(`{"_items":[]}`), nil))
	all := token(t, sources.AllScopes...)
	desks := token(t, sources.ScopeDesks)
	home := `{"_links":{"child":[{"href":"items","title":"Item"},{"href":"desks","title":"desks"},{"href":"assignments","title":"Assignment"},{"href":"events","title":"Event"},{"href":"events_history","title":"events_history"},{"href":"events_files","title":"events_files"},{"href":"planning","title":"Planning"},{"href":"contacts","title":"contacts"},{"href":"users","title":"users"}]}}`
	for _, tc := range []struct {
		method, target, auth string
		status               int
		body                 string
		header               [2]string
	}{
		{"GET", "/prodapi/v1", all, 200, home, [2]string{"Cache-Control", "private"}},
		{"GET", "/prodapi/v1/", desks, 200, home, [2]string{}},
		{"GET", "/prodapi/v1", "", 401, body401, [2]string{"Www-Authenticate", `Bearer realm="prodapi"`}},
		{"GET", "/prodapi/v1/items", "Bearer nonsense", 401, body401, [2]string{}},
		{"GET", "/prodapi/v1/items", desks, 403, body403, [2]string{}},
		{"GET", "/prodapi/v1/desks", desks, 200, `{"_items":[]}`, [2]string{"X-Total-Count", "3"}},
		{"GET", "/prodapi/v1/desks/", desks, 200, `{"_items":[]}`, [2]string{}},
		{"GET", "/prodapi/v1/desks/5d76113ab3af37dea3a2eb9e", desks, 200, `{"_items":[]}`, [2]string{}},
		{"GET", "/prodapi/v1/desks/5d76113ab3af37dea3a2eb9e/", desks, 200, `{"_items":[]}`, [2]string{}},
		{"GET", "/prodapi/v1/items/urn:newsml:localhost:5000:2019-08-14T15:02:48.032188:d1be79f4", all, 200, `{"_items":[]}`, [2]string{}},
		{"GET", "/prodapi/v1/items/caf%C3%A9", all, 200, `{"_items":[]}`, [2]string{}},
		{"GET", "/prodapi/v1/items/urn%3Anewsml%3Ax", all, 200, `{"_items":[]}`, [2]string{}},
		// Routing comes first: 404 and 405 without any token.
		{"GET", "/prodapi/v1/nope", "", 404, body404, [2]string{"Cache-Control", "no-store"}},
		{"GET", "/prodapi/v1/upload", "", 404, body404, [2]string{}},
		{"GET", "/elsewhere", "", 404, body404, [2]string{}},
		{"GET", "/prodapi/v1//items", "", 404, body404, [2]string{}},
		{"GET", "/prodapi/v1/items/a%2Fb", "", 404, body404, [2]string{}},
		{"GET", "/prodapi/v1/items/a%20b", "", 404, body404, [2]string{}},
		{"GET", "/prodapi/v1/items/a@b", "", 404, body404, [2]string{}},
		{"GET", "/prodapi/v1/items/" + strings.Repeat("a", 513), "", 404, body404, [2]string{}},
		{"GET", "/prodapi/v1/items/a/b", "", 404, body404, [2]string{}},
		{"POST", "/prodapi/v1/items", "", 405, body405, [2]string{"Allow", "GET, HEAD, OPTIONS"}},
		{"PUT", "/prodapi/v1/items/x", all, 405, body405, [2]string{"Allow", "GET, HEAD, OPTIONS"}},
		{"PATCH", "/prodapi/v1/desks", all, 405, body405, [2]string{}},
		{"DELETE", "/prodapi/v1", all, 405, body405, [2]string{}},
		{"TRACE", "/prodapi/v1/items", "", 405, body405, [2]string{}},
		{"OPTIONS", "/prodapi/v1/items", "", 200, "", [2]string{"Allow", "GET, HEAD, OPTIONS"}},
		{"OPTIONS", "/prodapi/v1", "", 200, "", [2]string{"Allow", "GET, HEAD, OPTIONS"}},
		{"OPTIONS", "/prodapi/v1/users/5d76113ab3af37dea3a2eb9e", "", 200, "", [2]string{}},
		{"HEAD", "/prodapi/v1/desks", desks, 200, "", [2]string{"Content-Length", "13"}},
		{"HEAD", "/prodapi/v1/desks", "", 401, "", [2]string{}},
		{"GET", "/prodapi/v1/items?where=" + strings.Repeat("x", 17<<10), "", 414,
			`{"_status":"ERR","_error":{"code":414,"message":"The request URL is too long."}}`, [2]string{}},
		// The probes and the metrics are the operator listener's
		// (TestOpsRouting): the API's port does not know them.
		{"GET", "/healthz", "", 404, body404, [2]string{}},
		{"GET", "/readyz", "", 404, body404, [2]string{}},
		{"GET", "/metrics", "", 404, body404, [2]string{}},
		{"GET", "/metrics", all, 404, body404, [2]string{}},
	} {
		t.Run(tc.method+" "+tc.target[:min(len(tc.target), 60)], func(t *testing.T) {
			res := do(t, ts, tc.method, tc.target, "Authorization", tc.auth)
			if res.status != tc.status {
				t.Errorf("status = %d, want %d (body %s)", res.status, tc.status, res.body)
			}
			if res.body != tc.body {
				t.Errorf("body = %s, want %s", res.body, tc.body)
			}
			if tc.header[0] != "" && res.header.Get(tc.header[0]) != tc.header[1] {
				t.Errorf("%s = %q, want %q", tc.header[0], res.header.Get(tc.header[0]), tc.header[1])
			}
			if res.status >= 400 && res.header.Get("Content-Type") != "application/json" {
				t.Errorf("error Content-Type = %q", res.header.Get("Content-Type"))
			}
			if res.header.Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id")
			}
			if got := res.header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q, want nosniff", got)
			}
		})
	}
}

// Refusals never reach the loader (nor, behind it, the cache or a backend).
func TestRefusalsCostNoLoad(t *testing.T) {
	ts := newTestServer(t, staticLoader(okRep(`{}`), nil))
	desks := token(t, sources.ScopeDesks)
	for _, tc := range []struct{ method, target, auth string }{
		{"GET", "/prodapi/v1/items", ""},
		{"GET", "/prodapi/v1/items", desks},
		{"GET", "/prodapi/v1/items/a%2Fb", desks},
		{"POST", "/prodapi/v1/desks", desks},
		{"GET", "/prodapi/v1/desks?sort=" + strings.Repeat("x", 17<<10), desks},
		{"OPTIONS", "/prodapi/v1/desks", ""},
		{"GET", "/prodapi/v1/assets/x.jpg", desks},
	} {
		do(t, ts, tc.method, tc.target, "Authorization", tc.auth)
	}
	if n := ts.loads.Load(); n != 0 {
		t.Errorf("refused requests made %d loads, want 0", n)
	}
}

func TestAuthDisabled(t *testing.T) {
	ts := newTestServer(t, staticLoader(okRep(`{"ok":1}`), nil), func(o *Options) { o.Auth.Enabled = false })
	for _, target := range []string{"/prodapi/v1", "/prodapi/v1/users", "/prodapi/v1/items/x"} {
		if res := do(t, ts, "GET", target); res.status != 200 {
			t.Errorf("GET %s without auth: %d", target, res.status)
		}
	}
}

func TestCustomPrefix(t *testing.T) {
	ts := newTestServer(t, staticLoader(okRep(`{}`), nil), func(o *Options) { o.Prefix = "api/news"; o.Auth.Enabled = false })
	if res := do(t, ts, "GET", "/api/news/v1/desks"); res.status != 200 {
		t.Errorf("custom prefix: %d", res.status)
	}
	if res := do(t, ts, "GET", "/prodapi/v1/desks"); res.status != 404 {
		t.Errorf("default prefix under a custom one: %d", res.status)
	}
}

func gz(t *testing.T, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	w.Close()
	return b.Bytes()
}

// An incomplete representation goes out with Cache-Control: no-store,
// and the Cache-Status the cache gave it.
func TestIncompleteIsNotStorable(t *testing.T) {
	const status = `prodapi; fwd=miss; fwd-status=200; detail="incomplete: planning"`
	rep := &sources.Representation{Status: 200, Body: []byte(`{"_id":"a"}`), ETag: `"abc"`, Total: -1,
		Missing: []string{"planning"}, CacheStatus: status, Outcome: "miss"}
	ts := newTestServer(t, staticLoader(rep, nil), func(o *Options) { o.Auth.Enabled = false })
	r := do(t, ts, "GET", "/prodapi/v1/items/a")
	if r.status != 200 || r.header.Get("Cache-Control") != "no-store" || r.header.Get("Cache-Status") != status {
		t.Errorf("%d, Cache-Control %q, Cache-Status %q; want 200, no-store, %q",
			r.status, r.header.Get("Cache-Control"), r.header.Get("Cache-Status"), status)
	}
}

func TestRepresentationHeaders(t *testing.T) {
	body := `{"_items":[{"_id":"a"}]}`
	stored := testNow.Add(-42 * time.Second)
	lastMod := time.Date(2026, 11, 20, 9, 15, 0, 0, time.UTC)
	rep := &sources.Representation{Status: 200, Gzip: gz(t, body), ETag: `"abc"`, Total: 7, LastModified: lastMod,
		StoredAt: stored, CacheStatus: "prodapi; hit; ttl=18", Outcome: "hit"}
	ts := newTestServer(t, staticLoader(rep, nil), func(o *Options) { o.Auth.Enabled = false })

	identity := do(t, ts, "GET", "/prodapi/v1/desks")
	if identity.body != body || identity.header.Get("Content-Encoding") != "" {
		t.Errorf("identity: body %q encoding %q", identity.body, identity.header.Get("Content-Encoding"))
	}
	for k, want := range map[string]string{"Etag": `"abc"`, "Age": "42", "Cache-Status": "prodapi; hit; ttl=18",
		"X-Total-Count": "7", "Cache-Control": "private", "Vary": "Accept-Encoding",
		"Last-Modified": "Fri, 20 Nov 2026 09:15:00 GMT", "Content-Type": "application/json"} {
		if got := identity.header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	zipped := do(t, ts, "GET", "/prodapi/v1/desks", "Accept-Encoding", "br, gzip;q=0.8")
	if zipped.header.Get("Content-Encoding") != "gzip" || zipped.body != string(rep.Gzip) || zipped.header.Get("Etag") != `"abc-gzip"` {
		t.Errorf("gzip not served to a gzip client: %q, ETag %q", zipped.header.Get("Content-Encoding"), zipped.header.Get("Etag"))
	}
	if r := do(t, ts, "GET", "/prodapi/v1/desks", "Accept-Encoding", "gzip", "If-None-Match", `"abc-gzip"`); r.status != 304 || r.header.Get("Etag") != `"abc-gzip"` {
		t.Errorf("304 for the gzip validator: %d %q", r.status, r.header.Get("Etag"))
	}
	if r := do(t, ts, "GET", "/prodapi/v1/desks", "Accept-Encoding", "gzip;q=0"); r.header.Get("Content-Encoding") != "" {
		t.Error("gzip served with q=0")
	}

	for _, tc := range []struct {
		header, value string
		status        int
	}{
		{"If-None-Match", `"abc"`, 304},
		{"If-None-Match", `W/"abc"`, 304},
		{"If-None-Match", `"x", "abc"`, 304},
		{"If-None-Match", `*`, 304},
		{"If-None-Match", `"other"`, 200},
		// A list never answers 304 by date (Eve disables it on
		// collections): its Last-Modified misses older documents that
		// changed or went.
		{"If-Modified-Since", "Fri, 20 Nov 2026 09:15:00 GMT", 200},
		{"If-Modified-Since", "Fri, 20 Nov 2026 09:16:00 GMT", 200},
		{"If-Modified-Since", "Fri, 20 Nov 2026 09:14:59 GMT", 200},
		{"If-Modified-Since", "garbage", 200},
	} {
		res := do(t, ts, "GET", "/prodapi/v1/desks", tc.header, tc.value)
		if res.status != tc.status {
			t.Errorf("%s: %s → %d, want %d", tc.header, tc.value, res.status, tc.status)
		}
		if tc.status == 304 && (res.body != "" || res.header.Get("Etag") != `"abc"`) {
			t.Errorf("304 body %q etag %q", res.body, res.header.Get("Etag"))
		}
	}
}

// A document answers 304 by If-Modified-Since (without If-None-Match);
// If-None-Match still wins over it.
func TestDetailIfModifiedSince(t *testing.T) {
	lastMod := time.Date(2026, 11, 20, 9, 15, 0, 0, time.UTC)
	rep := &sources.Representation{Status: 200, Body: []byte(`{"_id":"a"}`), ETag: `"abc"`, Total: -1, LastModified: lastMod}
	ts := newTestServer(t, staticLoader(rep, nil), func(o *Options) { o.Auth.Enabled = false })
	for _, tc := range []struct {
		headers []string
		status  int
	}{
		{[]string{"If-Modified-Since", "Fri, 20 Nov 2026 09:15:00 GMT"}, 304},
		{[]string{"If-Modified-Since", "Fri, 20 Nov 2026 09:16:00 GMT"}, 304},
		{[]string{"If-Modified-Since", "Fri, 20 Nov 2026 09:14:59 GMT"}, 200},
		{[]string{"If-Modified-Since", "garbage"}, 200},
		{[]string{"If-Modified-Since", "Fri, 20 Nov 2026 09:15:00 GMT", "If-None-Match", `"other"`}, 200},
	} {
		res := do(t, ts, "GET", "/prodapi/v1/desks/a", tc.headers...)
		if res.status != tc.status {
			t.Errorf("%q → %d, want %d", tc.headers, res.status, tc.status)
		}
	}
}

func TestLoaderErrors(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		retry  bool
	}{
		{fmt.Errorf("x: %w", sources.ErrUnavailable), 503, true},
		{fmt.Errorf("x: %w", sources.ErrPartial), 503, true},
		{fmt.Errorf("x: %w", sources.ErrTimeout), 504, true},
		{context.DeadlineExceeded, 504, true},
		{fmt.Errorf("x: %w", sources.ErrInvalid), 400, false},
		{errors.New("mongo: connection string mongodb://admin:hunter2@db secret detail"), 500, false},
	} {
		ts := newTestServer(t, staticLoader(nil, tc.err), func(o *Options) { o.Auth.Enabled = false })
		res := do(t, ts, "GET", "/prodapi/v1/desks")
		if res.status != tc.status {
			t.Errorf("%v: status %d, want %d", tc.err, res.status, tc.status)
		}
		if (res.header.Get("Retry-After") != "") != tc.retry {
			t.Errorf("%v: Retry-After %q", tc.err, res.header.Get("Retry-After"))
		}
		if strings.Contains(res.body, "hunter2") || strings.Contains(res.body, "mongo") || !strings.HasPrefix(res.body, `{"_status":"ERR","_error":{"code":`) {
			t.Errorf("%v: body %s", tc.err, res.body)
		}
	}
}

func TestNotFoundRepresentation(t *testing.T) {
	rep := &sources.Representation{Status: 404, Total: -1, CacheStatus: "prodapi; hit", StoredAt: testNow, Outcome: "hit"}
	ts := newTestServer(t, staticLoader(rep, nil), func(o *Options) { o.Auth.Enabled = false })
	res := do(t, ts, "GET", "/prodapi/v1/desks/5d76113ab3af37dea3a2eb9e")
	if res.status != 404 || res.body != body404 || res.header.Get("Cache-Status") != "prodapi; hit" {
		t.Errorf("got %d %s %v", res.status, res.body, res.header)
	}
}

func TestPanicRecovered(t *testing.T) {
	ts := newTestServer(t, func(context.Context, *sources.Query) (*sources.Representation, error) { panic("boom") },
		func(o *Options) { o.Auth.Enabled = false })
	res := do(t, ts, "GET", "/prodapi/v1/desks")
	if res.status != 500 || strings.Contains(res.body, "boom") || strings.Contains(res.body, "goroutine") {
		t.Errorf("panic: %d %s", res.status, res.body)
	}
	if res := do(t, ts, "GET", "/prodapi/v1/openapi.json"); res.status != 200 {
		t.Error("server down after a panic")
	}
	m := doOps(t, ts, "GET", "/metrics")
	if !strings.Contains(m.body, "prodapi_http_panics_total 1") {
		t.Errorf("panic not counted:\n%s", m.body)
	}
}

type fakeAssets map[string]*sources.Asset

func (f fakeAssets) Asset(_ context.Context, id string) (*sources.Asset, error) {
	a, ok := f[id]
	if !ok {
		return nil, fmt.Errorf("fake: %w", sources.ErrNotFound)
	}
	c := *a
	if a.Content != nil {
		b, _ := io.ReadAll(a.Content)
		a.Content.Seek(0, io.SeekStart)
		c.Content = nopCloser{bytes.NewReader(b)}
	}
	return &c, nil
}

type nopCloser struct{ io.ReadSeeker }

func (nopCloser) Close() error { return nil }

func TestAssets(t *testing.T) {
	data := []byte("0123456789abcdefghij")
	assets := fakeAssets{
		"5d553c333031e2855a2e5662.jpg": {Content: nopCloser{bytes.NewReader(data)}, Size: 20, ContentType: "image/jpeg",
			MD5: "d41d8cd98f00b204e9800998ecf8427e", Modified: time.Date(2019, 8, 15, 12, 23, 4, 0, time.UTC), Filename: "5d553c333031e2855a2e5662"},
		"20240115120112/photo.jpg": {Redirect: "https://s3.example/bucket/photo.jpg?X-Amz-Signature=x", Expires: testNow.Add(15 * time.Minute)},
	}
	ts := newTestServer(t, staticLoader(nil, nil), func(o *Options) { o.Assets = assets })
	archive := token(t, sources.ScopeArchive)
	path := "/prodapi/v1/assets/5d553c333031e2855a2e5662.jpg"

	res := do(t, ts, "GET", path, "Authorization", archive)
	if res.status != 200 || res.body != string(data) {
		t.Fatalf("asset: %d %q", res.status, res.body)
	}
	for k, want := range map[string]string{"Content-Type": "image/jpeg", "Etag": `"d41d8cd98f00b204e9800998ecf8427e"`,
		"Last-Modified": "Thu, 15 Aug 2019 12:23:04 GMT", "Cache-Control": "private, max-age=2592000",
		"Content-Disposition": "Inline; filename=5d553c333031e2855a2e5662", "X-Content-Type-Options": "nosniff"} {
		if got := res.header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if r := do(t, ts, "GET", path+"?download=1", "Authorization", archive); r.header.Get("Content-Disposition") != "Attachment; filename=5d553c333031e2855a2e5662" {
		t.Errorf("download disposition %q", r.header.Get("Content-Disposition"))
	}
	if r := do(t, ts, "GET", path, "Authorization", archive, "Range", "bytes=0-9"); r.status != 206 || r.body != "0123456789" || r.header.Get("Content-Range") != "bytes 0-9/20" {
		t.Errorf("range: %d %q %q", r.status, r.body, r.header.Get("Content-Range"))
	}
	if r := do(t, ts, "GET", path, "Authorization", archive, "Range", "bytes=-5"); r.status != 206 || r.body != "fghij" {
		t.Errorf("suffix range: %d %q", r.status, r.body)
	}
	if r := do(t, ts, "GET", path, "Authorization", archive, "Range", "bytes=50-60"); r.status != 416 || !strings.HasPrefix(r.body, `{"_status":"ERR","_error":{"code":416`) {
		t.Errorf("unsatisfiable range: %d %q", r.status, r.body)
	}
	if r := do(t, ts, "GET", path, "Authorization", archive, "If-None-Match", `"d41d8cd98f00b204e9800998ecf8427e"`); r.status != 304 {
		t.Errorf("If-None-Match: %d", r.status)
	}
	if r := do(t, ts, "HEAD", path, "Authorization", archive); r.status != 200 || r.body != "" || r.header.Get("Content-Length") != "20" {
		t.Errorf("HEAD: %d %q %q", r.status, r.body, r.header.Get("Content-Length"))
	}
	redirect := do(t, ts, "GET", "/prodapi/v1/assets/20240115120112/photo.jpg", "Authorization", archive)
	if redirect.status != 302 || redirect.header.Get("Location") != assets["20240115120112/photo.jpg"].Redirect ||
		redirect.header.Get("Cache-Control") != "private, max-age=840" {
		t.Errorf("redirect: %d %v", redirect.status, redirect.header)
	}
	for _, tc := range []struct {
		target, auth string
		status       int
	}{
		{path, "", 401},
		{path, token(t, sources.ScopeDesks), 403},
		{"/prodapi/v1/assets/missing.jpg", archive, 404},
		{"/prodapi/v1/assets/a/../b", "", 404},
		{"/prodapi/v1/assets/a%2F..%2Fb", "", 404},
		{"/prodapi/v1/assets/a/b/c", "", 404},
		{"/prodapi/v1/assets/a%5Cb", "", 404},
		{"/prodapi/v1/assets/" + strings.Repeat("a", 256), "", 404},
	} {
		if r := do(t, ts, "GET", tc.target, "Authorization", tc.auth); r.status != tc.status {
			t.Errorf("GET %s: %d, want %d (%s)", tc.target, r.status, tc.status, r.body)
		}
	}
}

// Readiness is the replica's own: ready while it serves, whatever the
// backends, unready once it drains; backends decide it only when asked
// to. Each check's state is in the body and in prodapi_check_up.
func TestReady(t *testing.T) {
	up := func(context.Context) error { return nil }
	down := func(context.Context) error { return fmt.Errorf("x: %w", sources.ErrUnavailable) }
	slow := func(context.Context) error { return fmt.Errorf("x: %w", sources.ErrTimeout) }
	allDown := []Check{{Name: "mongo", Critical: true, Probe: down}, {Name: "elastic", Critical: true, Probe: slow}, {Name: "redis", Critical: false, Probe: up}}
	for _, tc := range []struct {
		name            string
		checks          []Check
		requireBackends bool
		drain           bool
		status          int
		body            string
		up0, up1, up2   float64
		notProbed       bool
	}{
		{name: "none", status: 200, body: `{"status":"ready","checks":{}}`, notProbed: true},
		{name: "all up", checks: []Check{{Name: "mongo", Critical: true, Probe: up}, {Name: "elastic", Critical: true, Probe: up}, {Name: "redis", Critical: false, Probe: up}}, status: 200,
			body: `{"status":"ready","checks":{"mongo":"ok","elastic":"ok","redis":"ok"}}`, up0: 1, up1: 1, up2: 1},
		{name: "redis down", checks: []Check{{Name: "sandbox", Critical: true, Probe: up}, {Name: "redis", Critical: false, Probe: down}}, status: 200,
			body: `{"status":"degraded","checks":{"sandbox":"ok","redis":"unavailable"}}`, up0: 1},
		{name: "one platform source down", checks: []Check{{Name: "mongo", Critical: true, Probe: down}, {Name: "elastic", Critical: true, Probe: up}}, status: 200,
			body: `{"status":"degraded","checks":{"mongo":"unavailable","elastic":"ok"}}`, up1: 1},
		{name: "every backend down: still ready", checks: allDown, status: 200,
			body: `{"status":"degraded","checks":{"mongo":"unavailable","elastic":"timeout","redis":"ok"}}`, up2: 1},
		{name: "every backend down, readiness requiring them", checks: allDown, requireBackends: true, status: 503,
			body: `{"status":"unavailable","checks":{"mongo":"unavailable","elastic":"timeout","redis":"ok"}}`, up2: 1},
		{name: "one backend up, readiness requiring them", checks: []Check{{Name: "mongo", Critical: true, Probe: down}, {Name: "elastic", Critical: true, Probe: up}},
			requireBackends: true, status: 200, body: `{"status":"degraded","checks":{"mongo":"unavailable","elastic":"ok"}}`, up1: 1},
		{name: "a note", checks: []Check{{Name: "sandbox", Critical: true, Probe: up},
			{Name: "change_feed", Probe: up, Note: func() string { return "polls: deletions are not seen" }},
			{Name: "redis", Probe: up, Note: func() string { return "" }}}, status: 200,
			body: `{"status":"ready","checks":{"sandbox":"ok","change_feed":"ok","redis":"ok"},"notes":{"change_feed":"polls: deletions are not seen"}}`,
			up0:  1, up1: 1, up2: 1},
		{name: "draining", checks: []Check{{Name: "mongo", Critical: true, Probe: up}, {Name: "elastic", Critical: true, Probe: up}, {Name: "redis", Critical: false, Probe: up}}, drain: true, status: 503,
			body: `{"status":"draining","checks":{"mongo":"ok","elastic":"ok","redis":"ok"}}`, up0: 1, up1: 1, up2: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reg := metrics.NewMetrics()
			ts := newTestServer(t, staticLoader(nil, nil), func(o *Options) {
				o.Checks, o.ReadyRequiresBackends, o.Metrics = tc.checks, tc.requireBackends, reg
			})
			if tc.drain {
				ts.srv.Drain()
			}
			res := doOps(t, ts, "GET", "/readyz")
			if res.status != tc.status || res.body != tc.body {
				t.Errorf("got %d %s, want %d %s", res.status, res.body, tc.status, tc.body)
			}
			gauge := reg.Gauge("prodapi_check_up", "", "check")
			for i, want := range []float64{tc.up0, tc.up1, tc.up2} {
				if i < len(tc.checks) {
					if got := gauge.Value(tc.checks[i].Name); got != want {
						t.Errorf("prodapi_check_up{check=%q} = %v, want %v", tc.checks[i].Name, got, want)
					}
				}
			}
			if m := doOps(t, ts, "GET", "/metrics"); strings.Contains(m.body, "prodapi_check_up{") == tc.notProbed {
				t.Errorf("/metrics with %d checks:\n%s", len(tc.checks), m.body)
			}
		})
	}
}

// validID is the loop form of the original's item_url pattern.
func FuzzValidID(f *testing.F) {
	pattern := regexp.MustCompile(`^[\p{L}\p{N}_,.:-]{1,512}$`)
	for _, s := range []string{"urn:newsml:localhost:5000:2019-08-14T15:02:48.032188:d1be79f4", "café", "a b", "a/b", "", "٣", "x\xff", "tag:a,b_c-d.e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := validID(id), pattern.MatchString(id) && len(id) <= 512; got != want {
			t.Errorf("validID(%q) = %v, the pattern says %v", id, got, want)
		}
	})
}

// Every request is timed by route and cache outcome, and counted while in
// flight; a 5xx without a cache outcome is an error.
func TestRequestDurations(t *testing.T) {
	rep := &sources.Representation{Status: 200, Total: -1, Body: []byte(`{}`), CacheStatus: "prodapi; hit", StoredAt: testNow, Outcome: "hit"}
	ts := newTestServer(t, staticLoader(rep, nil), func(o *Options) { o.Auth.Enabled = false })
	do(t, ts, "GET", "/prodapi/v1/desks/5d76113ab3af37dea3a2eb9e")
	do(t, ts, "GET", "/prodapi/v1/desks/5d76113ab3af37dea3a2eb9e")
	doOps(t, ts, "GET", "/healthz")
	do(t, ts, "GET", "/no/such/thing")
	m := doOps(t, ts, "GET", "/metrics")
	for _, want := range []string{
		`prodapi_http_request_duration_seconds_count{outcome="hit",route="/prodapi/v1/desks/{id}"} 2`,
		`prodapi_http_request_duration_seconds_count{outcome="none",route="/healthz"} 1`,
		`prodapi_http_request_duration_seconds_count{outcome="none",route="unmatched"} 1`,
		"prodapi_http_requests_in_flight 1", // the /metrics request itself
		`prodapi_http_requests_total{code="200",route="/prodapi/v1/desks/{id}"} 2`,
	} {
		if !strings.Contains(m.body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(m.body, `outcome="miss"`) {
		t.Error("series of an outcome never seen are exposed")
	}
	// The server errors of every route are counted from 0, so that an
	// alert on their rate has data and sees the first one; other codes
	// appear when first answered.
	for _, want := range []string{
		`prodapi_http_requests_total{code="500",route="/prodapi/v1/items"} 0`,
		`prodapi_http_requests_total{code="503",route="/prodapi/v1/desks/{id}"} 0`,
		`prodapi_http_requests_total{code="504",route="/healthz"} 0`,
	} {
		if !strings.Contains(m.body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if strings.Contains(m.body, `code="304"`) {
		t.Error("counters of a code never answered are exposed")
	}
	if got := outcomes[outcomeIndex("", 503)]; got != "error" {
		t.Errorf("a 503 without an outcome is %q, want error", got)
	}
}
