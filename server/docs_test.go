package server_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/server/docsui"
)

// The reference page's own behaviour in a browser (it renders, nothing is
// refused) is test/browser's; here are its headers, its policy and its
// script.

// docsPage fetches the page and returns it with its nonce, checking the
// headers every page carries.
func docsPage(t *testing.T, base, target string) (*oaExchange, string) {
	t.Helper()
	x := oaDo(t, base, "docs", "GET", target)
	if x.status != 200 {
		t.Fatalf("GET %s: %d %s", target, x.status, x.body)
	}
	for k, want := range map[string]string{
		"Content-Type":           "text/html; charset=utf-8",
		"Cache-Control":          "no-store", // a nonce serves one response
		"X-Content-Type-Options": "nosniff",
		"Referrer-Policy":        "no-referrer",
	} {
		if got := x.header.Get(k); got != want {
			t.Errorf("%s: %s = %q, want %q", target, k, got, want)
		}
	}
	m := regexp.MustCompile(`script-src 'nonce-([^']*)'`).FindStringSubmatch(x.header.Get("Content-Security-Policy"))
	if m == nil {
		t.Fatalf("%s: no script nonce in %q", target, x.header.Get("Content-Security-Policy"))
	}
	return x, m[1]
}

// TestDocsPolicy checks the page's Content-Security-Policy directive by
// directive, and that every script and style element of the page carries
// the nonce, a fresh one per response.
func TestDocsPolicy(t *testing.T) {
	ts := newOAServer(t, nil) // authentication on: the page needs no token
	x, nonce := docsPage(t, ts.URL, oaPrefix+"/docs")
	if raw, err := base64.RawURLEncoding.DecodeString(nonce); err != nil || len(raw) < 16 {
		t.Errorf("nonce %q: %d bytes, %v; want 128 random bits in base64url", nonce, len(raw), err)
	}
	got := map[string]string{}
	for d := range strings.SplitSeq(x.header.Get("Content-Security-Policy"), ";") {
		name, value, _ := strings.Cut(strings.TrimSpace(d), " ")
		got[name] = value
	}
	n := "'nonce-" + nonce + "'"
	want := map[string]string{
		"default-src":     "'none'",
		"script-src":      n,
		"style-src":       n + " " + strings.Join(docsui.StyleHashes(), " "),
		"img-src":         "'self' data:",
		"connect-src":     "'self'",
		"worker-src":      "blob:",
		"base-uri":        "'none'",
		"form-action":     "'none'",
		"frame-ancestors": "'none'",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Content-Security-Policy (-want +got):\n%s", diff)
	}
	for _, h := range docsui.StyleHashes() {
		if !regexp.MustCompile(`^'sha256-[A-Za-z0-9+/]{43}='$`).MatchString(h) {
			t.Errorf("style hash %s is not a SHA-256 hash source", h)
		}
	}

	tags := regexp.MustCompile(`<(script|style)\b[^>]*>`).FindAllString(string(x.body), -1)
	if len(tags) != 3 {
		t.Errorf("%d script and style elements, want 3: %q", len(tags), tags)
	}
	for _, tag := range tags {
		if !strings.Contains(tag, ` nonce="`+nonce+`"`) {
			t.Errorf("%s lacks the nonce %s", tag, nonce)
		}
	}
	if !bytes.Contains(x.body, []byte(`Redoc.init("/prodapi/v1/openapi.json", {nonce: "`+nonce+`"}`)) {
		t.Errorf("the page does not hand Redoc the document and the nonce:\n%s", x.body)
	}

	_, again := docsPage(t, ts.URL, oaPrefix+"/docs/")
	if again == nonce {
		t.Errorf("two responses share the nonce %s", nonce)
	}
	head := oaDo(t, ts.URL, "HEAD", "HEAD", oaPrefix+"/docs")
	if head.status != 200 || len(head.body) != 0 || head.header.Get("Content-Security-Policy") == "" {
		t.Errorf("HEAD: %d, %d bytes, policy %q", head.status, len(head.body), head.header.Get("Content-Security-Policy"))
	}
}

// TestDocsScript checks the script the page names: the embedded bundle,
// cached for a year under a name that changes with it, gzipped when
// asked, 304 on its ETag; any other name under docs/ is the API's 404.
func TestDocsScript(t *testing.T) {
	ts := newOAServer(t, nil)
	x, _ := docsPage(t, ts.URL, oaPrefix+"/docs")
	m := regexp.MustCompile(`<script nonce="[^"]*" src="([^"]*)">`).FindSubmatch(x.body)
	if m == nil {
		t.Fatalf("the page names no script:\n%s", x.body)
	}
	src := string(m[1])
	if !regexp.MustCompile(`^/prodapi/v1/docs/redoc-` + regexp.QuoteMeta(docsui.Version()) + `\.[0-9a-f]{12}\.js$`).MatchString(src) {
		t.Errorf("script %s: want /prodapi/v1/docs/redoc-<version>.<digest>.js", src)
	}
	js := oaDo(t, ts.URL, "script", "GET", src)
	if js.status != 200 || !bytes.Equal(js.body, docsui.Script()) {
		t.Fatalf("GET %s: %d, %d bytes, want the %d bytes of the bundle", src, js.status, len(js.body), len(docsui.Script()))
	}
	for k, want := range map[string]string{
		"Content-Type":           "text/javascript; charset=utf-8",
		"Cache-Control":          "public, max-age=31536000, immutable",
		"X-Content-Type-Options": "nosniff",
		"Vary":                   "Accept-Encoding",
	} {
		if got := js.header.Get(k); got != want {
			t.Errorf("script: %s = %q, want %q", k, got, want)
		}
	}
	zipped := oaDo(t, ts.URL, "gzip", "GET", src, "Accept-Encoding", "gzip")
	if zipped.header.Get("Content-Encoding") != "gzip" || !bytes.Equal(zipped.body, docsui.Script()) {
		t.Errorf("gzip: %q, %d bytes once decoded", zipped.header.Get("Content-Encoding"), len(zipped.body))
	}
	if x := oaDo(t, ts.URL, "304", "GET", src, "If-None-Match", js.header.Get("ETag")); x.status != 304 || len(x.body) != 0 {
		t.Errorf("If-None-Match: %d, %d bytes", x.status, len(x.body))
	}
	if x := oaDo(t, ts.URL, "HEAD", "HEAD", src); x.status != 200 || len(x.body) != 0 {
		t.Errorf("HEAD: %d, %d bytes", x.status, len(x.body))
	}
	for _, other := range []string{"/docs/redoc.js", "/docs/" + strings.Replace(src[len(oaPrefix+"/docs/"):], ".js", ".map", 1)} {
		x := oaDo(t, ts.URL, other, "GET", oaPrefix+other)
		var env struct {
			Status string `json:"_status"`
		}
		if x.status != 404 || json.Unmarshal(x.body, &env) != nil || env.Status != "ERR" {
			t.Errorf("GET %s: %d %s, want the API's 404", other, x.status, x.body)
		}
	}
}

// TestDocsPrefix checks the page under another prefix: it renders that
// prefix's document with that prefix's script.
func TestDocsPrefix(t *testing.T) {
	ts := httptest.NewServer(server.New(nil, server.Options{Prefix: "/api/news/"}).Handler())
	defer ts.Close()
	x, _ := docsPage(t, ts.URL, "/api/news/v1/docs")
	for _, want := range []string{`Redoc.init("/api/news/v1/openapi.json"`, `src="/api/news/v1/docs/redoc-`, `href="/api/news/v1/openapi.json"`} {
		if !bytes.Contains(x.body, []byte(want)) {
			t.Errorf("the page lacks %s:\n%s", want, x.body)
		}
	}
	if x := oaDo(t, ts.URL, "old prefix", "GET", oaPrefix+"/docs"); x.status != 404 {
		t.Errorf("GET %s/docs under another prefix: %d", oaPrefix, x.status)
	}
}
