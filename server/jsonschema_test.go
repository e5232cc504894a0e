package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// A schemaValidator checks JSON values against the schemas of one OpenAPI
// 3.1 document with github.com/santhosh-tekuri/jsonschema/v6, as JSON
// Schema 2020-12 (OpenAPI 3.1's dialect). A schema is any schema value
// of the document, inline or a $ref; its "#/..." references resolve
// against the document. format is an annotation, as 2020-12 has it;
// contentMediaType and contentSchema are asserted, so a JSON-valued
// parameter's examples (JSON text) are held to the shape they carry.
//
// Keywords outside JSON Schema 2020-12 and OpenAPI's annotations are
// errors (unknownKeywords), so the document cannot rely on a rule nobody
// checks: "nullable" or a misspelt "minlength" would be ignored by any
// validator.
//
// Values and schemas are decoded with decodeJSON (numbers as json.Number).
type schemaValidator struct {
	c *jsonschema.Compiler

	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema // by the schema's JSON
	errs     map[string]error
}

// docURL names the document for the compiler; nothing is fetched.
const docURL = "urn:prodapi:openapi.json"

func newSchemaValidator(root any) *schemaValidator {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertContent()
	c.UseLoader(refuseLoader{}) // references outside the document are errors
	if root == nil {
		root = map[string]any{}
	}
	if err := c.AddResource(docURL, root); err != nil {
		panic(err) // a decoded document is always addable
	}
	return &schemaValidator{c: c, compiled: map[string]*jsonschema.Schema{}, errs: map[string]error{}}
}

// refuseLoader loads nothing: every schema is in the document.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("reference to %s, outside the document", url)
}

// decodeJSON decodes data with numbers as json.Number, refusing trailing
// data.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

// validate returns every violation of schema by value, each prefixed with
// its JSON pointer in value ("/" for the value itself).
func (v *schemaValidator) validate(schema, value any) []string {
	var errs []string
	for _, e := range unknownKeywords(schema, "") {
		errs = append(errs, "/: schema "+e)
	}
	sch, err := v.compile(schema)
	if err != nil {
		return append(errs, "/: "+err.Error())
	}
	err = sch.Validate(value)
	var ve *jsonschema.ValidationError
	switch {
	case err == nil:
	case asValidationError(err, &ve):
		errs = append(errs, leaves(ve)...)
	default:
		errs = append(errs, "/: "+err.Error())
	}
	return errs
}

func asValidationError(err error, ve **jsonschema.ValidationError) bool {
	e, ok := err.(*jsonschema.ValidationError)
	*ve = e
	return ok
}

// leaves flattens a validation error to its causes, "pointer: message".
func leaves(e *jsonschema.ValidationError) []string {
	if len(e.Causes) == 0 {
		return []string{pointer(e.InstanceLocation) + ": " + e.BasicOutput().Error.String()}
	}
	var out []string
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	return out
}

func pointer(loc []string) string {
	if len(loc) == 0 {
		return "/"
	}
	var b strings.Builder
	for _, tok := range loc {
		b.WriteString("/" + escapePointer(tok))
	}
	return b.String()
}

// compile compiles a schema value once: it becomes a resource of its own
// whose "#/..." references are rewritten to point into the document.
func (v *schemaValidator) compile(schema any) (*jsonschema.Schema, error) {
	key, err := json.Marshal(schema) // map keys sorted: equal schemas, equal keys
	if err != nil {
		return nil, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if sch, ok := v.compiled[string(key)]; ok {
		return sch, nil
	}
	if err, ok := v.errs[string(key)]; ok {
		return nil, err
	}
	url := docURL + "/schema/" + strconv.Itoa(len(v.compiled)+len(v.errs))
	var sch *jsonschema.Schema
	if err = v.c.AddResource(url, intoDocument(schema)); err == nil {
		sch, err = v.c.Compile(url)
	}
	if err != nil {
		v.errs[string(key)] = err
		return nil, err
	}
	v.compiled[string(key)] = sch
	return sch, nil
}

// intoDocument copies a schema, pointing its local references ("#/...")
// at the document it came from.
func intoDocument(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if ref, ok := x.(string); ok && k == "$ref" && strings.HasPrefix(ref, "#") {
				out[k] = docURL + ref
				continue
			}
			out[k] = intoDocument(x)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = intoDocument(x)
		}
		return out
	}
	return v
}

// keywords are JSON Schema 2020-12's (core, applicator, unevaluated,
// validation, meta-data, format-annotation and content vocabularies) and
// the annotations OpenAPI 3.1 adds that assert nothing.
var keywords = map[string]bool{
	"$schema": true, "$id": true, "$ref": true, "$anchor": true, "$dynamicRef": true, "$dynamicAnchor": true,
	"$vocabulary": true, "$comment": true, "$defs": true,
	"prefixItems": true, "items": true, "contains": true, "additionalProperties": true, "properties": true,
	"patternProperties": true, "dependentSchemas": true, "propertyNames": true, "if": true, "then": true, "else": true,
	"allOf": true, "anyOf": true, "oneOf": true, "not": true,
	"unevaluatedItems": true, "unevaluatedProperties": true,
	"type": true, "const": true, "enum": true, "multipleOf": true, "maximum": true, "exclusiveMaximum": true,
	"minimum": true, "exclusiveMinimum": true, "maxLength": true, "minLength": true, "pattern": true,
	"maxItems": true, "minItems": true, "uniqueItems": true, "maxContains": true, "minContains": true,
	"maxProperties": true, "minProperties": true, "required": true, "dependentRequired": true,
	"title": true, "description": true, "default": true, "deprecated": true, "readOnly": true, "writeOnly": true, "examples": true,
	"format": true, "contentEncoding": true, "contentMediaType": true, "contentSchema": true,
	"example": true, "externalDocs": true,
}

// unknownKeywords lists the keywords of schema and of its subschemas (not
// following $ref) that neither JSON Schema 2020-12 nor OpenAPI defines.
func unknownKeywords(schema any, at string) []string {
	s, ok := schema.(map[string]any)
	if !ok {
		return nil
	}
	var out []string
	for _, k := range sortedKeys(s) {
		if !keywords[k] {
			out = append(out, fmt.Sprintf("%s: unknown keyword %q", pointerOr(at), k))
		}
	}
	for _, k := range []string{"properties", "patternProperties", "dependentSchemas", "$defs"} {
		m, _ := s[k].(map[string]any)
		for _, name := range sortedKeys(m) {
			out = append(out, unknownKeywords(m[name], at+"/"+k+"/"+escapePointer(name))...)
		}
	}
	for _, k := range []string{"items", "contains", "additionalProperties", "propertyNames", "if", "then", "else",
		"not", "unevaluatedItems", "unevaluatedProperties", "contentSchema"} {
		out = append(out, unknownKeywords(s[k], at+"/"+k)...)
	}
	for _, k := range []string{"prefixItems", "allOf", "anyOf", "oneOf"} {
		list, _ := s[k].([]any)
		for i, sub := range list {
			out = append(out, unknownKeywords(sub, at+"/"+k+"/"+strconv.Itoa(i))...)
		}
	}
	return out
}

func pointerOr(at string) string {
	if at == "" {
		return "/"
	}
	return at
}

func resolvePointer(root any, ref string) (any, error) {
	p, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, fmt.Errorf("reference %q is not local", ref)
	}
	cur := root
	if p == "" {
		return cur, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("reference %q is not a JSON pointer", ref)
	}
	for _, tok := range strings.Split(p[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			next, ok := c[tok]
			if !ok {
				return nil, fmt.Errorf("reference %q does not resolve (no %q)", ref, tok)
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, fmt.Errorf("reference %q does not resolve (index %q)", ref, tok)
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("reference %q does not resolve (%q in a %T)", ref, tok, cur)
		}
	}
	return cur, nil
}

// typeMatches reports whether a schema's type (a name or a list of them)
// admits value; headerValue uses it to read a header as a number or a
// string.
func typeMatches(t, value any) bool {
	names := []any{t}
	if list, ok := t.([]any); ok {
		names = list
	}
	return slices.ContainsFunc(names, func(n any) bool {
		switch value.(type) {
		case json.Number:
			return n == "number" || n == "integer"
		case string:
			return n == "string"
		}
		return false
	})
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// TestSchemaValidator holds the wiring to JSON Schema 2020-12: references
// into the document (escaped, recursive, missing, remote), numbers as
// json.Number, format as an annotation, and unknown keywords refused.
func TestSchemaValidator(t *testing.T) {
	root := mustDecode(t, `{"components": {"schemas": {
		"Name": {"type": "string", "minLength": 1},
		"Pair": {"type": "object", "required": ["a"], "properties": {"a": {"$ref": "#/components/schemas/Name"}}, "additionalProperties": false},
		"Tree": {"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#/components/schemas/Tree"}}}},
		"a~b/c": {"const": 1}
	}}}`)
	v := newSchemaValidator(root)
	for _, tc := range []struct {
		schema, value string
		valid         bool
	}{
		{`true`, `{"x": 1}`, true},
		{`false`, `null`, false},
		{`{}`, `[1, "a"]`, true},
		{`{"type": "string"}`, `"a"`, true},
		{`{"type": "string"}`, `1`, false},
		{`{"type": "integer"}`, `3`, true},
		{`{"type": "integer"}`, `3.0`, true},
		{`{"type": "integer"}`, `3.5`, false},
		{`{"type": "number"}`, `3.5`, true},
		{`{"type": "number"}`, `"3"`, false},
		{`{"type": ["string", "null"]}`, `null`, true},
		{`{"type": ["string", "null"]}`, `false`, false},
		{`{"type": "boolean"}`, `true`, true},
		{`{"type": "null"}`, `0`, false},
		{`{"type": "array"}`, `{}`, false},
		{`{"type": "object"}`, `[]`, false},
		{`{"const": "ERR"}`, `"ERR"`, true},
		{`{"const": "ERR"}`, `"OK"`, false},
		{`{"const": 400}`, `400.0`, true},
		{`{"const": {"a": [1, 2]}}`, `{"a": [1, 2]}`, true},
		{`{"const": {"a": [1, 2]}}`, `{"a": [2, 1]}`, false},
		{`{"enum": [0, 1, true, false]}`, `1`, true},
		{`{"enum": [0, 1, true, false]}`, `2`, false},
		{`{"enum": [0, 1, true, false]}`, `"1"`, false},
		{`{"properties": {"a": {"type": "integer"}}}`, `{"a": 1, "b": "x"}`, true},
		{`{"properties": {"a": {"type": "integer"}}}`, `{"a": "1"}`, false},
		{`{"properties": {"a": {"type": "integer"}}}`, `"not an object"`, true},
		{`{"required": ["a", "b"]}`, `{"a": 1}`, false},
		{`{"required": ["a"]}`, `{"a": null}`, true},
		{`{"properties": {"a": {}}, "additionalProperties": false}`, `{"a": 1}`, true},
		{`{"properties": {"a": {}}, "additionalProperties": false}`, `{"a": 1, "b": 2}`, false},
		{`{"additionalProperties": {"type": "string"}}`, `{"a": "x", "b": "y"}`, true},
		{`{"additionalProperties": {"type": "string"}}`, `{"a": "x", "b": 2}`, false},
		{`{"items": {"type": "string"}}`, `["a", "b"]`, true},
		{`{"items": {"type": "string"}}`, `["a", 2]`, false},
		{`{"prefixItems": [{"type": "string"}, {"type": "integer"}]}`, `["a", 2, null]`, true},
		{`{"prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}`, `["a", 2, null]`, false},
		{`{"prefixItems": [{"type": "string"}, {"type": "integer"}]}`, `[2, "a"]`, false},
		{`{"minItems": 2}`, `[1]`, false},
		{`{"maxItems": 1}`, `[1, 2]`, false},
		{`{"allOf": [{"type": "integer"}, {"minimum": 2}]}`, `3`, true},
		{`{"allOf": [{"type": "integer"}, {"minimum": 2}]}`, `1`, false},
		{`{"anyOf": [{"type": "string"}, {"type": "null"}]}`, `null`, true},
		{`{"anyOf": [{"type": "string"}, {"type": "null"}]}`, `1`, false},
		{`{"oneOf": [{"type": "object"}, {"type": "array"}]}`, `[]`, true},
		{`{"oneOf": [{"type": "number"}, {"type": "integer"}]}`, `1`, false},
		{`{"oneOf": [{"type": "number"}, {"type": "integer"}]}`, `1.5`, true},
		{`{"not": {"type": "string"}}`, `1`, true},
		{`{"not": {"type": "string"}}`, `"a"`, false},
		{`{"minimum": 1, "maximum": 500}`, `500`, true},
		{`{"minimum": 1, "maximum": 500}`, `501`, false},
		{`{"minimum": 1}`, `0`, false},
		{`{"exclusiveMinimum": 0}`, `0`, false},
		{`{"exclusiveMaximum": 10}`, `9.99`, true},
		{`{"minLength": 2}`, `"é"`, false},
		{`{"maxLength": 2}`, `"éé"`, true},
		{`{"pattern": "^items/"}`, `"items/x"`, true},
		{`{"pattern": "^items/"}`, `"desks/x"`, false},
		{`{"pattern": "^items/"}`, `7`, true},
		{`{"format": "uri", "description": "ignored"}`, `"not a uri"`, true},
		{`{"type": "string", "contentMediaType": "application/json", "contentSchema": {"required": ["a"]}}`, `"{\"a\": 1}"`, true},
		{`{"type": "string", "contentMediaType": "application/json", "contentSchema": {"required": ["a"]}}`, `"{\"b\": 1}"`, false},
		{`{"type": "string", "contentMediaType": "application/json"}`, `"not JSON"`, false},
		{`{"$ref": "#/components/schemas/Pair"}`, `{"a": "x"}`, true},
		{`{"$ref": "#/components/schemas/Pair"}`, `{"a": ""}`, false},
		{`{"$ref": "#/components/schemas/Pair"}`, `{"a": "x", "b": 1}`, false},
		{`{"$ref": "#/components/schemas/Pair", "required": ["z"]}`, `{"a": "x"}`, false},
		{`{"$ref": "#/components/schemas/Tree"}`, `{"kids": [{"kids": []}, {}]}`, true},
		{`{"$ref": "#/components/schemas/Tree"}`, `{"kids": [{"kids": [1]}]}`, false},
		{`{"$ref": "#/components/schemas/a~0b~1c"}`, `1`, true},
		{`{"$ref": "#/components/schemas/Missing"}`, `1`, false},
		{`{"$ref": "https://example.com/schema"}`, `1`, false},
		{`{"nullable": true}`, `null`, false},
		{`{"properties": {"a": {"minlength": 1}}}`, `{}`, false},
		{`{"patternProperties": {"^x": {"type": "string"}}}`, `{"xa": "s"}`, true},
		{`{"patternProperties": {"^x": {"type": "string"}}}`, `{"xa": 1}`, false},
	} {
		schema, value := mustDecode(t, tc.schema), mustDecode(t, tc.value)
		errs := v.validate(schema, value)
		if got := len(errs) == 0; got != tc.valid {
			t.Errorf("%s against %s: valid = %v, want %v (%v)", tc.value, tc.schema, got, tc.valid, errs)
		}
	}
}

// TestSchemaValidatorReportsWhere checks that violations name their place.
func TestSchemaValidatorReportsWhere(t *testing.T) {
	v := newSchemaValidator(nil)
	schema := mustDecode(t, `{"properties": {"_items": {"items": {"properties": {"a/b": {"type": "string"}}}}}}`)
	got := v.validate(schema, mustDecode(t, `{"_items": [{"a/b": "x"}, {"a/b": 1}]}`))
	if len(got) != 1 || !strings.HasPrefix(got[0], "/_items/1/a~1b: ") || !strings.Contains(got[0], "string") {
		t.Errorf("errors = %q; want one at /_items/1/a~1b naming the type wanted", got)
	}
	got = v.validate(mustDecode(t, `{"items": {"properties": {"x": {"nullable": true}}}}`), mustDecode(t, `[]`))
	want := []string{`/: schema /items/properties/x: unknown keyword "nullable"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
	}
}

// TestOpenAPISchemaKeywords refuses, anywhere in the document, a schema
// keyword that neither JSON Schema 2020-12 nor OpenAPI defines: the
// validator would ignore it, so the rule it seems to state would go
// unchecked.
func TestOpenAPISchemaKeywords(t *testing.T) {
	d := loadOpenAPI(t)
	n := 0
	var walk func(v any, where string)
	walk = func(v any, where string) {
		switch v := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(v) {
				if k == "schema" {
					n++
					for _, e := range unknownKeywords(v[k], "") {
						t.Errorf("%s/schema: %s", where, e)
					}
					continue
				}
				walk(v[k], where+"/"+escapePointer(k))
			}
		case []any:
			for i, x := range v {
				walk(x, where+"/"+strconv.Itoa(i))
			}
		}
	}
	walk(d.root["paths"], "#/paths")
	walk(mapAt(d.root, "components"), "#/components")
	schemas := mapAt(d.root, "components", "schemas")
	for _, name := range sortedKeys(schemas) {
		n++
		for _, e := range unknownKeywords(schemas[name], "") {
			t.Errorf("#/components/schemas/%s: %s", name, e)
		}
	}
	if n < 50 {
		t.Errorf("only %d schemas checked", n)
	}
}

func mustDecode(t *testing.T, s string) any {
	t.Helper()
	v, err := decodeJSON([]byte(s))
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return v
}
