package server

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/prodapi/prodapi/server/docsui"
	"github.com/prodapi/prodapi/sources"
)

// The API reference page, at <prefix>/v1/docs: Swagger UI (server/docsui)
// rendering openapi.json in the browser, where a reader can Authorize (a
// bearer token, or, when AuthOptions.TokenURL names Superdesk's auth
// server, a client id and secret for OAuth 2 client credentials) and Try
// it out against the service. Like openapi.json it needs no token: it
// holds no newsroom data, and the document it fetches is public.
// Everything it loads comes from the service, so it works offline.
//
// The page runs only what it must. Its Content-Security-Policy (policy)
// allows the scripts and the stylesheet that carry the response's nonce
// (no script is inline), images from the service, data: URIs (Swagger
// UI's icons) and blob: URLs (an image a tried request answers), and
// connections to the service alone (the document, and the requests Try
// it out sends), plus the token URL's origin when the document offers
// OAuth 2; nothing else (default-src 'none'), no <base>, no form
// submission, no framing. A nonce is good for one response, so the page
// is never stored.
//
// The files are served under names that hold a digest of their bytes
// (and Swagger UI's version), so they may be cached for a year.

// docsUI serves the page and its files.
type docsUI struct {
	prefix  string // /<prefix>/v1
	connect string // the policy's connect-src
	page    *template.Template

	once  sync.Once
	files []docsFile // the stylesheet, Swagger UI's bundle, the page's script: made on first use
}

// A docsFile is one of the page's files, under its served name.
type docsFile struct {
	name        string // swagger-ui-bundle-5.35.0.<digest>.js
	contentType []string
	rep         *sources.Representation
}

func (s *Server) newDocsUI() *docsUI {
	connect := "'self'"
	if origin, ok := tokenOrigin(s.auth.opts.TokenURL); ok {
		connect += " " + origin
	}
	return &docsUI{prefix: s.prefix, connect: connect, page: template.Must(template.New("docs").Parse(docsPage))}
}

// tokenOrigin is the origin of an OAuth 2 token URL ("https://sd.example"
// of https://sd.example/api/auth_server/token), which the page's policy
// names: an absolute http or https URL without credentials, whose host
// holds nothing but what names and addresses are written with, so that
// it cannot end the policy's directive. Anything else offers no OAuth 2
// flow (config refuses it, more precisely, before the server starts).
func tokenOrigin(tokenURL string) (string, bool) {
	u, err := url.Parse(tokenURL)
	if tokenURL == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.User != nil || u.Host == "" ||
		strings.ContainsFunc(u.Host, func(r rune) bool { return !strings.ContainsRune(hostRunes, r) }) {
		return "", false
	}
	return u.Scheme + "://" + u.Host, true
}

// hostRunes are the runes of DNS names, IPv4 and bracketed IPv6
// addresses, and ports.
const hostRunes = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]"

// docsPage is the page. html/template escapes each value for its place:
// the nonce and the URLs in attributes.
const docsPage = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>Superdesk Production API (prodapi): reference</title>
<link rel="stylesheet" nonce="{{.Nonce}}" href="{{.Stylesheet}}">
<style nonce="{{.Nonce}}">body { margin: 0; background: #fafafa; }</style>
</head>
<body>
<noscript>This page needs JavaScript. The API's description is at <a href="{{.SpecURL}}">{{.SpecURL}}</a>.</noscript>
<div id="swagger-ui" data-spec="{{.SpecURL}}" data-api="{{.APIURL}}"></div>
<script nonce="{{.Nonce}}" src="{{.Bundle}}"></script>
<script nonce="{{.Nonce}}" src="{{.Script}}"></script>
</body>
</html>
`

// policy is the page's Content-Security-Policy for one nonce.
func (d *docsUI) policy(nonce string) string {
	n := "'nonce-" + nonce + "'"
	return strings.Join([]string{
		"default-src 'none'",
		"script-src " + n,
		"style-src " + n,
		"img-src 'self' data: blob:",
		"connect-src " + d.connect,
		"base-uri 'none'",
		"form-action 'none'",
		"frame-ancestors 'none'",
	}, "; ")
}

// newNonce returns 128 random bits in base64url, which CSP nonces may be
// written in and which HTML and JavaScript need not escape.
func newNonce() string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand crashes the program instead)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// load makes the files' representations once: 2 MB gzipped at the best
// compression is work for the first visitor, not for every server the
// tests start.
func (d *docsUI) load() {
	d.once.Do(func() {
		file := func(stem, ext string, contentType []string, body []byte) docsFile {
			var zipped bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&zipped, gzip.BestCompression) // the level is valid
			zw.Write(body)
			zw.Close()
			etag := sources.ETag(body)
			return docsFile{name: stem + "." + etag[1:13] + ext, contentType: contentType,
				rep: &sources.Representation{Body: body, Gzip: zipped.Bytes(), ETag: etag, Total: -1}}
		}
		v := docsui.Version()
		d.files = []docsFile{
			file("swagger-ui-"+v, ".css", hdrCSS, docsui.Stylesheet()),
			file("swagger-ui-bundle-"+v, ".js", hdrJavaScript, docsui.Bundle()),
			file("docs", ".js", hdrJavaScript, docsui.Script()),
		}
	})
}

// hdrCSS is the stylesheet's Content-Type.
var hdrCSS = []string{"text/css; charset=utf-8"}

// docsPage answers the page.
func (s *Server) docsPage(d *docsUI) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		d.load()
		nonce := newNonce()
		var body bytes.Buffer
		err := d.page.Execute(&body, struct{ Nonce, SpecURL, APIURL, Stylesheet, Bundle, Script string }{
			nonce, d.prefix + "/openapi.json", d.prefix,
			d.prefix + "/docs/" + d.files[0].name, d.prefix + "/docs/" + d.files[1].name, d.prefix + "/docs/" + d.files[2].name})
		if err != nil {
			return err // the template is fixed and its values are strings: a defect
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", d.policy(nonce))
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Content-Length", strconv.Itoa(body.Len()))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			w.Write(body.Bytes())
		}
		return nil
	}
}

// docsFiles answers <prefix>/v1/docs/{file}: a file of the page under its
// current name, 404 under any other.
func (s *Server) docsFiles(d *docsUI) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		d.load()
		for _, f := range d.files {
			if chi.URLParam(r, "file") == f.name {
				w.Header().Set("X-Content-Type-Options", "nosniff")
				s.writeTyped(w, r, f.rep, f.contentType, "public, max-age=31536000, immutable")
				return nil
			}
		}
		return s.notFound(w, r)
	}
}
