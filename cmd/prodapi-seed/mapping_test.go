package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	essrc "github.com/prodapi/prodapi/sources/elastic"
)

// No Elasticsearch runs here, so this test does what Elasticsearch does
// with each _source the seed sends: it walks the document against the
// index's mapping, adding dynamic fields as Elasticsearch's dynamic
// mapping would (dates by dynamic_date_formats, long, float, boolean,
// text, object), and reports every value the resulting field would
// refuse: a bulk item error in the real run. It also counts mapped fields
// against index.mapping.total_fields.limit (1000).
func TestSampleFitsTheMappings(t *testing.T) {
	t.Parallel()
	docs := sampleDocs(t)
	mappings := essrc.IndexMappings()
	for _, c := range searchCollections() {
		t.Run(c, func(t *testing.T) {
			root := parseMapping(t, mappings[c])
			for _, d := range docs[c] {
				id, _ := d.Get("_id")
				src := decodeDoc(t, codec.AppendJSON(nil, esSource(d, c)))
				for _, problem := range root.index(src, "") {
					t.Errorf("%s %v: %s", c, id, problem)
				}
			}
			if n := root.count(); n > 1000 {
				t.Errorf("%d mapped fields, over Elasticsearch's limit of 1000", n)
			}
		})
	}
}

// The checker refuses what Elasticsearch refuses.
func TestMappingChecker(t *testing.T) {
	t.Parallel()
	m := `{"mappings": {"dynamic_date_formats": ["strict_date_optional_time", "yyyy-MM-dd'T'HH:mm:ssZ"], "properties": {
		"n": {"type": "long"}, "k": {"type": "keyword"}, "d": {"type": "date"}, "b": {"type": "boolean"},
		"off": {"type": "object", "enabled": false}, "fixed": {"type": "object", "dynamic": false},
		"loc": {"type": "geo_point"}, "nest": {"type": "nested", "properties": {"x": {"type": "long"}}}}}}`
	for _, tc := range []struct {
		docs []string
		want string // a problem of the last document, "" for none
	}{
		{[]string{`{"n": 1, "k": "a", "d": "2026-11-20T09:15:00+0000", "b": true, "off": {"any": [1, "x"]}, "fixed": {"any": "x"}}`}, ""},
		{[]string{`{"n": "12", "k": 12, "d": "2026-11-20", "b": "false", "loc": {"lat": 51.5, "lon": -0.1}, "nest": [{"x": 1}]}`}, ""},
		{[]string{`{"n": 1.5, "d": 1700000000000, "loc": "51.5,-0.1", "k": ["a", "b"]}`}, ""},
		{[]string{`{"n": "twelve"}`}, "n: long"},
		{[]string{`{"k": {"a": 1}}`}, "k: keyword"},
		{[]string{`{"d": "soon"}`}, "d: date"},
		{[]string{`{"d": ""}`}, "d: date"},
		{[]string{`{"b": "maybe"}`}, "b: boolean"},
		{[]string{`{"nest": 3}`}, "nest: nested"},
		{[]string{`{"new": "2026-11-20T09:15:00+0000"}`, `{"new": "tomorrow"}`}, "new: date"},
		{[]string{`{"new": 3}`, `{"new": "three"}`}, "new: long"},
		{[]string{`{"new": 3}`, `{"new": 3.5}`}, ""},
		{[]string{`{"new": "text"}`, `{"new": 3}`}, ""},
		{[]string{`{"new": "text"}`, `{"new": {"a": 1}}`}, "new: text"},
		{[]string{`{"new": {"a": 1}}`, `{"new": "text"}`}, "new: object"},
		{[]string{`{"": 1}`}, "empty field name"},
	} {
		root := parseMapping(t, []byte(m))
		var problems []string
		for _, doc := range tc.docs {
			problems = root.index(decodeDoc(t, []byte(doc)), "")
		}
		got := strings.Join(problems, "; ")
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%v: problems %q, want %q", tc.docs, got, tc.want)
		}
	}
}

// A field is a mapped field: an explicit one from the mapping or one
// dynamic mapping added.
type field struct {
	typ      string // keyword, text, date, long, float, boolean, geo_point, object, nested, ...
	disabled bool   // "enabled": false: kept in _source, not parsed
	dynamic  bool   // unknown sub-fields are added (objects)
	props    map[string]*field
	subs     int // multi-fields (text's .keyword)
}

func parseMapping(t *testing.T, body []byte) *field {
	t.Helper()
	root := decodeDoc(t, body)
	m, ok := root.Doc("mappings")
	if !ok {
		t.Fatalf("no mappings in %s", body)
	}
	return parseField(m, "object", true)
}

func parseField(m *sources.Doc, typ string, dynamic bool) *field {
	f := &field{typ: typ, dynamic: dynamic, props: map[string]*field{}}
	if v, ok := m.Get("enabled"); ok && v == false {
		f.disabled = true
	}
	if v, ok := m.Get("dynamic"); ok {
		f.dynamic = v == true || v == "true"
	}
	if fields, ok := m.Doc("fields"); ok {
		f.subs = fields.Len()
	}
	if props, ok := m.Doc("properties"); ok {
		for name, p := range props.All() {
			pd := p.(*sources.Doc)
			t, _ := pd.String("type")
			if t == "" {
				t = "object"
			}
			f.props[name] = parseField(pd, t, f.dynamic)
		}
	}
	return f
}

func (f *field) count() int {
	n := 0
	for _, p := range f.props {
		n += 1 + p.subs + p.count()
	}
	return n
}

// index checks a document (or an object value) against f, adding
// dynamic fields, and returns the problems found.
func (f *field) index(d *sources.Doc, path string) []string {
	var problems []string
	for k, v := range d.All() {
		p := path + k
		if k == "" {
			problems = append(problems, p+": empty field name")
			continue
		}
		sub, ok := f.props[k]
		if !ok {
			if !f.dynamic {
				continue
			}
			sub = dynamicField(v, f.dynamic)
			if sub == nil {
				continue // null or [] maps nothing yet
			}
			f.props[k] = sub
		}
		problems = append(problems, sub.value(v, p)...)
	}
	return problems
}

// value checks one value (arrays: each element) against f.
func (f *field) value(v any, path string) []string {
	if f.disabled || v == nil {
		return nil
	}
	if a, ok := v.([]any); ok {
		if f.typ == "geo_point" && len(a) == 2 && isNumber(a[0]) && isNumber(a[1]) {
			return nil // [lon, lat]
		}
		var problems []string
		for _, e := range a {
			problems = append(problems, f.value(e, path)...)
		}
		return problems
	}
	refuse := func() []string {
		return []string{fmt.Sprintf("%s: %s field refuses %s", path, f.typ, codec.AppendJSON(nil, v))}
	}
	switch f.typ {
	case "object", "nested":
		d, ok := v.(*sources.Doc)
		if !ok {
			return refuse()
		}
		return f.index(d, path+".")
	case "keyword", "text":
		if _, ok := v.(*sources.Doc); ok {
			return refuse()
		}
	case "date":
		switch x := v.(type) {
		case string:
			if !isDate(x) {
				return refuse()
			}
		case int64:
		default:
			return refuse()
		}
	case "long", "integer", "short", "float", "double":
		switch x := v.(type) {
		case int64, float64:
		case string:
			if _, err := strconv.ParseFloat(x, 64); err != nil {
				return refuse()
			}
		default:
			return refuse()
		}
	case "boolean":
		switch x := v.(type) {
		case bool:
		case string:
			if x != "true" && x != "false" && x != "" {
				return refuse()
			}
		default:
			return refuse()
		}
	case "geo_point":
		switch x := v.(type) {
		case *sources.Doc:
			lat, okLat := x.Get("lat")
			lon, okLon := x.Get("lon")
			if !okLat || !okLon || !isNumber(lat) || !isNumber(lon) {
				return refuse()
			}
		case string:
		default:
			return refuse()
		}
	}
	return nil
}

// dynamicField is the field dynamic mapping creates for a first value.
func dynamicField(v any, dynamic bool) *field {
	if a, ok := v.([]any); ok {
		for _, e := range a {
			if f := dynamicField(e, dynamic); f != nil {
				return f
			}
		}
		return nil
	}
	switch x := v.(type) {
	case nil:
		return nil
	case bool:
		return &field{typ: "boolean"}
	case int64:
		return &field{typ: "long"}
	case float64:
		return &field{typ: "float"}
	case string:
		if isDate(x) {
			return &field{typ: "date"}
		}
		return &field{typ: "text", subs: 1}
	case *sources.Doc:
		return &field{typ: "object", dynamic: dynamic, props: map[string]*field{}}
	}
	return nil
}

func isNumber(v any) bool {
	switch v.(type) {
	case int64, float64:
		return true
	}
	return false
}

// isDate reports whether s parses as strict_date_optional_time or
// yyyy-MM-dd'T'HH:mm:ssZ, the formats of the mappings' dates and of
// dynamic date detection. Like Elasticsearch, a bare year counts.
var datePattern = regexp.MustCompile(`^\d{4}(-\d{2}(-\d{2}(T\d{2}(:\d{2}(:\d{2}([.,]\d{1,9})?)?)?(Z|[+-]\d{2}(:?\d{2})?)?)?)?)?$`)

func isDate(s string) bool { return datePattern.MatchString(s) }
