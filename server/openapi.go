package server

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"net/http"
	"strconv"
	"strings"

	"github.com/prodapi/prodapi/sources"
)

// openAPIDocument is the API's OpenAPI 3.1 description, written by hand.
// openapi_test.go holds it to the router (every route documented, every
// documented path routed) and to real responses of the sample newsroom.
//
//go:embed openapi.json
var openAPIDocument string

// openAPIServerURL is the document's one server URL, as it is written;
// the served copy names the configured prefix instead.
const openAPIServerURL = "http://localhost:5500/prodapi/v1"

// openAPIDocumentFor returns the document with its server URL on prefix
// ("/prodapi/v1", "/api/news/v1").
func openAPIDocumentFor(prefix string) []byte {
	old := sources.AppendJSONString(nil, openAPIServerURL)
	url := sources.AppendJSONString(nil, strings.TrimSuffix(openAPIServerURL, "/prodapi/v1")+prefix)
	return bytes.Replace([]byte(openAPIDocument), old, url, 1)
}

// openAPI serves the description at <prefix>/v1/openapi.json. It needs no
// token (it holds no newsroom data); it carries an ETag, may be cached
// publicly for five minutes, and is gzipped when the client allows it.
// The body and its gzipped form are computed once, here.
func (s *Server) openAPI() handlerFunc {
	doc := openAPIDocumentFor(s.prefix)
	etag := etagOf(doc)
	var zipped bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zipped, gzip.BestCompression) // the level is valid
	zw.Write(doc)
	zw.Close()
	gz := zipped.Bytes()
	return func(w http.ResponseWriter, r *http.Request) error {
		h := w.Header()
		h.Set("Cache-Control", "public, max-age=300")
		h.Set("Vary", "Accept-Encoding")
		h.Set("ETag", etag)
		if inm := r.Header.Get("If-None-Match"); inm != "" && matchesETag(inm, etag) {
			w.WriteHeader(http.StatusNotModified)
			return nil
		}
		body := doc
		if acceptsGzip(r) {
			body = gz
			h.Set("Content-Encoding", "gzip")
		}
		h.Set("Content-Type", "application/json")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusOK)
		if r.Method != http.MethodHead {
			w.Write(body)
		}
		return nil
	}
}
