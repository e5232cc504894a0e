package server

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"net/http"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
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

// openAPIDocumentFor returns the document with its server URL replaced
// by the service's ("https://news.example/api/news/v1"), wherever it
// appears: in servers, and in the code samples and examples, so that a
// sample copied from the served document runs against the service.
func openAPIDocumentFor(serverURL string) []byte {
	quoted := codec.AppendJSONString(nil, serverURL)
	return bytes.ReplaceAll([]byte(openAPIDocument), []byte(openAPIServerURL), quoted[1:len(quoted)-1])
}

// openAPI serves the description at <prefix>/v1/openapi.json. It needs no
// token (it holds no newsroom data); it carries an ETag, may be cached
// publicly for five minutes, and is gzipped when the client allows it.
// The body and its gzipped form are computed once, here.
func (s *Server) openAPI() handlerFunc {
	doc := openAPIDocumentFor(s.baseURL + s.prefix)
	var zipped bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&zipped, gzip.BestCompression) // the level is valid
	zw.Write(doc)
	zw.Close()
	rep := &sources.Representation{Body: doc, Gzip: zipped.Bytes(), ETag: sources.ETag(doc), Total: -1}
	return func(w http.ResponseWriter, r *http.Request) error {
		s.writeBody(w, r, rep, "public, max-age=300")
		return nil
	}
}
