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
// directive (with and without a token URL, whose origin alone it adds to
// connect-src), and that every script, style and stylesheet element of
// the page carries the nonce, a fresh one per response, and no script is
// inline.
func TestDocsPolicy(t *testing.T) {
	for _, tc := range []struct{ name, tokenURL, connect string }{
		{"no token URL", "", "'self'"},
		{"a token URL", "https://superdesk.example:8443/api/auth_server/token?x=1", "'self' https://superdesk.example:8443"},
		{"an http token URL", "http://127.0.0.1:5000/api/auth_server/token", "'self' http://127.0.0.1:5000"},
		{"an IPv6 token URL", "https://[::1]:5000/token", "'self' https://[::1]:5000"},
		// Refused by config; the server offers no flow for them either.
		{"a relative token URL", "/api/auth_server/token", "'self'"},
		{"another scheme", "ftp://superdesk.example/token", "'self'"},
		{"credentials", "https://user:secret@superdesk.example/token", "'self'"},
		{"a host the policy cannot name", "https://super;desk.example/token", "'self'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := server.New(nil, server.Options{Auth: server.AuthOptions{Enabled: true, Secret: []byte(oaSecret), TokenURL: tc.tokenURL}})
			ts := httptest.NewServer(srv.Handler())
			defer ts.Close()
			x, nonce := docsPage(t, ts.URL, oaPrefix+"/docs") // authentication on: the page needs no token
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
				"style-src":       n,
				"img-src":         "'self' data: blob:",
				"connect-src":     tc.connect,
				"base-uri":        "'none'",
				"form-action":     "'none'",
				"frame-ancestors": "'none'",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Content-Security-Policy (-want +got):\n%s", diff)
			}

			tags := regexp.MustCompile(`<(?:script|style|link rel="stylesheet")[ >][^>]*>`).FindAllString(string(x.body), -1)
			if len(tags) != 4 {
				t.Errorf("%d script, style and stylesheet elements, want 4: %q", len(tags), tags)
			}
			for _, tag := range tags {
				if !strings.Contains(tag, ` nonce="`+nonce+`"`) {
					t.Errorf("%s lacks the nonce %s", tag, nonce)
				}
				if strings.HasPrefix(tag, "<script") && !strings.Contains(tag, ` src="/prodapi/v1/docs/`) {
					t.Errorf("%s: every script is a file of the page's, none inline", tag)
				}
			}
			if !bytes.Contains(x.body, []byte(`<div id="swagger-ui" data-spec="/prodapi/v1/openapi.json" data-api="/prodapi/v1">`)) {
				t.Errorf("the page does not hand its script the document and the API:\n%s", x.body)
			}

			_, again := docsPage(t, ts.URL, oaPrefix+"/docs/")
			if again == nonce {
				t.Errorf("two responses share the nonce %s", nonce)
			}
			head := oaDo(t, ts.URL, "HEAD", "HEAD", oaPrefix+"/docs")
			if head.status != 200 || len(head.body) != 0 || head.header.Get("Content-Security-Policy") == "" {
				t.Errorf("HEAD: %d, %d bytes, policy %q", head.status, len(head.body), head.header.Get("Content-Security-Policy"))
			}
		})
	}
}

// TestDocsFiles checks the files the page names: Swagger UI's stylesheet
// and bundle and the page's script, each embedded, cached for a year
// under a name that changes with it, gzipped when asked, 304 on its ETag;
// any other name under docs/ is the API's 404.
func TestDocsFiles(t *testing.T) {
	ts := newOAServer(t, nil)
	x, _ := docsPage(t, ts.URL, oaPrefix+"/docs")
	v := regexp.QuoteMeta(docsui.Version())
	for _, f := range []struct {
		attr, name, contentType string
		body                    []byte
	}{
		{`<link rel="stylesheet" nonce="[^"]*" href="([^"]*)">`, `swagger-ui-` + v + `\.[0-9a-f]{12}\.css`, "text/css; charset=utf-8", docsui.Stylesheet()},
		{`<script nonce="[^"]*" src="([^"]*bundle[^"]*)">`, `swagger-ui-bundle-` + v + `\.[0-9a-f]{12}\.js`, "text/javascript; charset=utf-8", docsui.Bundle()},
		{`<script nonce="[^"]*" src="([^"]*/docs\.[^"]*)">`, `docs\.[0-9a-f]{12}\.js`, "text/javascript; charset=utf-8", docsui.Script()},
	} {
		m := regexp.MustCompile(f.attr).FindSubmatch(x.body)
		if m == nil {
			t.Errorf("the page names no file like %s:\n%s", f.name, x.body)
			continue
		}
		src := string(m[1])
		if !regexp.MustCompile(`^/prodapi/v1/docs/` + f.name + `$`).MatchString(src) {
			t.Errorf("%s: want /prodapi/v1/docs/%s", src, f.name)
		}
		got := oaDo(t, ts.URL, src, "GET", src)
		if got.status != 200 || !bytes.Equal(got.body, f.body) {
			t.Errorf("GET %s: %d, %d bytes, want the %d bytes embedded", src, got.status, len(got.body), len(f.body))
			continue
		}
		for k, want := range map[string]string{
			"Content-Type":           f.contentType,
			"Cache-Control":          "public, max-age=31536000, immutable",
			"X-Content-Type-Options": "nosniff",
			"Vary":                   "Accept-Encoding",
		} {
			if got := got.header.Get(k); got != want {
				t.Errorf("%s: %s = %q, want %q", src, k, got, want)
			}
		}
		zipped := oaDo(t, ts.URL, "gzip", "GET", src, "Accept-Encoding", "gzip")
		if zipped.header.Get("Content-Encoding") != "gzip" || !bytes.Equal(zipped.body, f.body) {
			t.Errorf("%s gzip: %q, %d bytes once decoded", src, zipped.header.Get("Content-Encoding"), len(zipped.body))
		}
		if x := oaDo(t, ts.URL, "304", "GET", src, "If-None-Match", got.header.Get("ETag")); x.status != 304 || len(x.body) != 0 {
			t.Errorf("%s If-None-Match: %d, %d bytes", src, x.status, len(x.body))
		}
		if x := oaDo(t, ts.URL, "HEAD", "HEAD", src); x.status != 200 || len(x.body) != 0 {
			t.Errorf("%s HEAD: %d, %d bytes", src, x.status, len(x.body))
		}
		for _, other := range []string{strings.Replace(src, ".js", ".js.map", 1), strings.Replace(src, ".css", ".css.map", 1)} {
			if other == src {
				continue
			}
			x := oaDo(t, ts.URL, other, "GET", other)
			var env struct {
				Status string `json:"_status"`
			}
			if x.status != 404 || json.Unmarshal(x.body, &env) != nil || env.Status != "ERR" {
				t.Errorf("GET %s: %d %s, want the API's 404", other, x.status, x.body)
			}
		}
	}
	for _, other := range []string{"/docs/swagger-ui-bundle.js", "/docs/docs.js", "/docs/redoc.js"} {
		if x := oaDo(t, ts.URL, other, "GET", oaPrefix+other); x.status != 404 {
			t.Errorf("GET %s: %d, want 404", other, x.status)
		}
	}
}

// TestDocsPrefix checks the page under another prefix: it renders that
// prefix's document with that prefix's files, and tries that prefix's
// API.
func TestDocsPrefix(t *testing.T) {
	ts := httptest.NewServer(server.New(nil, server.Options{Prefix: "/api/news/"}).Handler())
	defer ts.Close()
	x, _ := docsPage(t, ts.URL, "/api/news/v1/docs")
	for _, want := range []string{`data-spec="/api/news/v1/openapi.json" data-api="/api/news/v1"`, `src="/api/news/v1/docs/swagger-ui-bundle-`,
		`href="/api/news/v1/docs/swagger-ui-`, `src="/api/news/v1/docs/docs.`, `href="/api/news/v1/openapi.json"`} {
		if !bytes.Contains(x.body, []byte(want)) {
			t.Errorf("the page lacks %s:\n%s", want, x.body)
		}
	}
	if x := oaDo(t, ts.URL, "old prefix", "GET", oaPrefix+"/docs"); x.status != 404 {
		t.Errorf("GET %s/docs under another prefix: %d", oaPrefix, x.status)
	}
}
