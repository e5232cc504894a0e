package elastic

import (
	_ "embed"
	"fmt"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// mappingsJSON holds index settings shared by every index and a mapping
// per collection, close to Superdesk's for the fields clients query:
// ids and codes as keyword; headlines, sluglines and names as text with
// a keyword sub-field; body_html through an HTML-stripping analyzer;
// Superdesk's dates (written as 2006-01-02T15:04:05+0000) as date;
// planning coverages as nested documents. Other fields are mapped
// dynamically, as Elasticsearch does by default.
//
//go:embed mappings.json
var mappingsJSON []byte

// IndexMappings returns, for each search collection (archive, contacts,
// events, planning, assignments), the body of a create-index request
// ({"settings": ..., "mappings": ...}) that works on Elasticsearch 7.17
// and 8.x: what a seed program sends as PUT /<prefix>_<collection>
// before indexing documents. The bytes are the caller's.
func IndexMappings() map[string][]byte {
	v, err := codec.DecodeJSON(mappingsJSON, codec.DecodeOptions{Strict: true})
	if err != nil {
		panic(fmt.Sprintf("elastic: mappings.json: %v", err)) // embedded data; a test decodes it
	}
	root := v.(*sources.Doc)
	settings, _ := root.Get("settings")
	mappings, _ := root.Doc("mappings")
	out := make(map[string][]byte, mappings.Len())
	for c, m := range mappings.All() {
		out[c] = codec.AppendJSON(nil, sources.D("settings", settings, "mappings", m))
	}
	return out
}
