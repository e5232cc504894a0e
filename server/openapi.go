package server

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"net/http"
	"slices"
	"strings"

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
	if _, ok := tokenOrigin(s.auth.opts.TokenURL); ok {
		doc = openAPIWithOAuth2(doc, s.auth.opts.TokenURL)
	}
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

// openAPIWithOAuth2 returns the document offering, beside the bearer
// scheme, OAuth 2 client credentials against tokenURL, Superdesk's auth
// server: an oauth2 scheme, whose scopes are those the operations need,
// and wherever a bearer requirement stands, the same requirement of
// oauth2, so that a client (and the reference page) may take either. The
// token the auth server issues is the bearer token.
func openAPIWithOAuth2(doc []byte, tokenURL string) []byte {
	v, err := codec.DecodeJSON(doc, codec.DecodeOptions{})
	root, ok := v.(*sources.Doc)
	if err != nil || !ok {
		return doc // openapi_test.go holds the document to be a JSON object: unreachable
	}
	// Each scope reads the resources of the operations that need it alone,
	// in the document's order.
	var scopeNames []string
	reads := map[string][]string{}
	withOAuth2 := func(path string, security any) []any {
		reqs, _ := security.([]any)
		out := slices.Clone(reqs)
		for _, req := range reqs {
			req, _ := req.(*sources.Doc)
			scopes, ok := req.Get("bearer")
			if !ok {
				continue
			}
			out = append(out, sources.D("oauth2", scopes))
			if names, _ := scopes.([]any); len(reqs) == 1 && len(names) == 1 {
				name, _ := names[0].(string)
				res, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
				if _, seen := reads[name]; !seen {
					scopeNames = append(scopeNames, name)
				}
				if !slices.Contains(reads[name], res) {
					reads[name] = append(reads[name], res)
				}
			}
		}
		return out
	}
	sec, _ := root.Get("security")
	root.Set("security", withOAuth2("", sec))
	paths, _ := root.Doc("paths")
	for _, p := range paths.Fields() {
		item, _ := p.Value.(*sources.Doc)
		for _, op := range item.Fields() {
			if op, ok := op.Value.(*sources.Doc); ok && op.Has("security") {
				sec, _ := op.Get("security")
				op.Set("security", withOAuth2(p.Key, sec))
			}
		}
	}
	scopes := sources.NewDoc()
	for _, name := range scopeNames {
		scopes.Set(name, "Read "+strings.Join(reads[name], ", ")+".")
	}
	components, _ := root.Doc("components")
	schemes, _ := components.Doc("securitySchemes")
	schemes.Set("oauth2", sources.D(
		"type", "oauth2",
		"description", "Superdesk's auth server (`PRODAPI_TOKEN_URL`): a client's id and secret get a token by the client credentials grant, "+
			"the JWT the `bearer` scheme describes, with the scopes the auth server grants that client.",
		"flows", sources.D("clientCredentials", sources.D("tokenUrl", tokenURL, "scopes", scopes)),
	))
	return append(codec.AppendJSONIndent(nil, root, "  "), '\n')
}
