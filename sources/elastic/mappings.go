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

// fieldTypes returns, per collection of mappings.json, the type of each
// field it maps, by dotted path: sub-objects' fields, and multi-fields
// (last_name.keyword); not the fields of nested documents, which only a
// nested query reaches.
func fieldTypes() map[string]map[string]string {
	v, err := codec.DecodeJSON(mappingsJSON, codec.DecodeOptions{Strict: true})
	if err != nil {
		panic(fmt.Sprintf("elastic: mappings.json: %v", err)) // embedded data; a test decodes it
	}
	mappings, _ := v.(*sources.Doc).Doc("mappings")
	out := make(map[string]map[string]string, mappings.Len())
	for c, m := range mappings.All() {
		types := map[string]string{}
		props, _ := m.(*sources.Doc).Doc("properties")
		addFieldTypes(types, "", props)
		out[c] = types
	}
	return out
}

func addFieldTypes(types map[string]string, prefix string, props *sources.Doc) {
	for name, p := range props.All() {
		spec, _ := p.(*sources.Doc)
		typ, _ := spec.String("type")
		if typ == "nested" {
			continue
		}
		if sub, ok := spec.Doc("properties"); ok {
			addFieldTypes(types, prefix+name+".", sub)
			continue
		}
		types[prefix+name] = typ
		fields, _ := spec.Doc("fields")
		for sub, f := range fields.All() {
			fd, _ := f.(*sources.Doc)
			types[prefix+name+"."+sub], _ = fd.String("type")
		}
	}
}
