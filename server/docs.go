package server

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"encoding/base64"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/prodapi/prodapi/server/docsui"
	"github.com/prodapi/prodapi/sources"
)

// The API reference page, at <prefix>/v1/docs: Redoc (server/docsui)
// rendering openapi.json in the browser. Like openapi.json it needs no
// token: it holds no newsroom data, and the document it fetches is public.
// Everything it loads comes from the service, so it works offline.
//
// The page runs only what it must. Its Content-Security-Policy
// (docsPolicy) allows scripts and style elements that carry the
// response's nonce (Redoc puts the nonce it is given on the style
// elements it creates), the one stylesheet the bundle inserts before it
// can be given the nonce, by its hash (docsui.StyleHashes), connections to the service alone (to fetch
// openapi.json), images from the service and data: URIs (Redoc's icons),
// and Redoc's search worker, which it starts from a blob: URL; nothing
// else (default-src 'none'), no <base>, no form submission, no framing.
// A nonce is good for one response, so the page is never stored.
//
// The script is served under a name that holds its version and a digest
// of its bytes, so it may be cached for a year.

// docsUI serves the page and its script.
type docsUI struct {
	prefix string // /<prefix>/v1
	page   *template.Template

	once   sync.Once
	script *sources.Representation // the bundle, its gzip coding and ETag, made on first use
	name   string                  // the script's file name: redoc-<version>.<digest>.js
}

func (s *Server) newDocsUI() *docsUI {
	return &docsUI{prefix: s.prefix, page: template.Must(template.New("docs").Parse(docsPage))}
}

// docsPage is the page. html/template escapes each value for its place:
// the nonce in attributes and in the script as a JavaScript string, the
// URLs as URLs and as JavaScript strings.
const docsPage = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>Superdesk Production API (prodapi): reference</title>
<style nonce="{{.Nonce}}">body { margin: 0; padding: 0; }</style>
</head>
<body>
<noscript>This page needs JavaScript. The API's description is at <a href="{{.SpecURL}}">{{.SpecURL}}</a>.</noscript>
<div id="redoc"></div>
<script nonce="{{.Nonce}}" src="{{.ScriptURL}}"></script>
<script nonce="{{.Nonce}}">Redoc.init({{.SpecURL}}, {nonce: {{.Nonce}}}, document.getElementById("redoc"));</script>
</body>
</html>
`

// docsPolicy is the page's Content-Security-Policy for one nonce.
func docsPolicy(nonce string) string {
	n := "'nonce-" + nonce + "'"
	return strings.Join([]string{
		"default-src 'none'",
		"script-src " + n,
		"style-src " + n + " " + strings.Join(docsui.StyleHashes(), " "),
		"img-src 'self' data:",
		"connect-src 'self'",
		"worker-src blob:",
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

// load makes the script's representation once: 1.1 MB gzipped at the
// best compression is work for the first visitor, not for every server
// the tests start.
func (d *docsUI) load() {
	d.once.Do(func() {
		js := docsui.Script()
		var zipped bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&zipped, gzip.BestCompression) // the level is valid
		zw.Write(js)
		zw.Close()
		etag := sources.ETag(js)
		d.script = &sources.Representation{Body: js, Gzip: zipped.Bytes(), ETag: etag, Total: -1}
		d.name = "redoc-" + docsui.Version() + "." + etag[1:13] + ".js"
	})
}

// docsPage answers the page.
func (s *Server) docsPage(d *docsUI) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		d.load()
		nonce := newNonce()
		var body bytes.Buffer
		err := d.page.Execute(&body, struct{ Nonce, SpecURL, ScriptURL string }{
			nonce, d.prefix + "/openapi.json", d.prefix + "/docs/" + d.name})
		if err != nil {
			return err // the template is fixed and its values are strings: a defect
		}
		h := w.Header()
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Content-Security-Policy", docsPolicy(nonce))
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

// docsScript answers <prefix>/v1/docs/{file}: the script under its
// current name, 404 under any other.
func (s *Server) docsScript(d *docsUI) handlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		d.load()
		if chi.URLParam(r, "file") != d.name {
			return s.notFound(w, r)
		}
		w.Header().Set("X-Content-Type-Options", "nosniff")
		s.writeTyped(w, r, d.script, hdrJavaScript, "public, max-age=31536000, immutable")
		return nil
	}
}
