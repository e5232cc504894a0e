package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// A schemaValidator checks JSON values against the JSON Schema 2020-12
// schemas of one OpenAPI 3.1 document, for the subset the document uses:
// boolean schemas, $ref (to "#/..." pointers in the document, applied with
// its sibling keywords), type (one or a list, "integer" included), enum,
// const, properties, required, additionalProperties (boolean or schema),
// items, prefixItems, minItems, maxItems, allOf, anyOf, oneOf, not,
// minimum, maximum, exclusiveMinimum, exclusiveMaximum, minLength,
// maxLength and pattern. format and the annotations (description,
// examples, default...) are ignored. Any other keyword is reported as an
// error, so the document cannot rely on a rule nobody checks.
//
// Values and schemas are decoded with decodeJSON (numbers as json.Number).
type schemaValidator struct {
	root any

	mu       sync.Mutex
	patterns map[string]*regexp.Regexp
}

func newSchemaValidator(root any) *schemaValidator {
	return &schemaValidator{root: root, patterns: map[string]*regexp.Regexp{}}
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

// annotations are keywords that never fail validation.
var annotations = map[string]bool{
	"description": true, "title": true, "examples": true, "example": true, "default": true,
	"deprecated": true, "readOnly": true, "writeOnly": true, "format": true, "$comment": true,
	"contentMediaType": true, "contentEncoding": true, "externalDocs": true,
}

// validate returns every violation of schema by value, each prefixed with
// its JSON pointer in value.
func (v *schemaValidator) validate(schema, value any) []string {
	var errs []string
	v.check(schema, value, "", &errs, 0)
	return errs
}

func (v *schemaValidator) check(schema, value any, at string, errs *[]string, depth int) {
	fail := func(format string, args ...any) {
		*errs = append(*errs, pointer(at)+": "+fmt.Sprintf(format, args...))
	}
	if depth > 64 {
		fail("schema references nest too deep")
		return
	}
	switch s := schema.(type) {
	case bool:
		if !s {
			fail("no value is allowed here")
		}
		return
	case map[string]any:
		v.checkObject(s, value, at, errs, depth, fail)
	default:
		fail("schema is %T, not an object or a boolean", schema)
	}
}

func (v *schemaValidator) checkObject(s map[string]any, value any, at string, errs *[]string, depth int, fail func(string, ...any)) {
	for key := range s {
		if !supported[key] && !annotations[key] {
			fail("unsupported schema keyword %q", key)
		}
	}
	if ref, ok := s["$ref"].(string); ok {
		target, err := v.resolve(ref)
		if err != nil {
			fail("%v", err)
			return
		}
		v.check(target, value, at, errs, depth+1)
	}
	if t, ok := s["type"]; ok && !typeMatches(t, value) {
		fail("%s is not of type %s", describe(value), compact(t))
		return // the other keywords would only repeat it
	}
	if c, ok := s["const"]; ok && !jsonEqual(c, value) {
		fail("%s is not %s", describe(value), compact(c))
	}
	if e, ok := s["enum"].([]any); ok && !slices.ContainsFunc(e, func(x any) bool { return jsonEqual(x, value) }) {
		fail("%s is not one of %s", describe(value), compact(e))
	}
	switch val := value.(type) {
	case map[string]any:
		v.checkProperties(s, val, at, errs, depth, fail)
	case []any:
		v.checkItems(s, val, at, errs, depth, fail)
	case string:
		n := utf8.RuneCountInString(val)
		if m, ok := intKeyword(s, "minLength"); ok && n < m {
			fail("%s is shorter than %d", describe(value), m)
		}
		if m, ok := intKeyword(s, "maxLength"); ok && n > m {
			fail("%s is longer than %d", describe(value), m)
		}
		if p, ok := s["pattern"].(string); ok {
			re, err := v.pattern(p)
			if err != nil {
				fail("bad pattern %q: %v", p, err)
			} else if !re.MatchString(val) {
				fail("%s does not match %q", describe(value), p)
			}
		}
	case json.Number:
		x := number(val)
		if m, ok := s["minimum"].(json.Number); ok && x.Cmp(number(m)) < 0 {
			fail("%s is below the minimum %s", val, m)
		}
		if m, ok := s["maximum"].(json.Number); ok && x.Cmp(number(m)) > 0 {
			fail("%s is above the maximum %s", val, m)
		}
		if m, ok := s["exclusiveMinimum"].(json.Number); ok && x.Cmp(number(m)) <= 0 {
			fail("%s is not above %s", val, m)
		}
		if m, ok := s["exclusiveMaximum"].(json.Number); ok && x.Cmp(number(m)) >= 0 {
			fail("%s is not below %s", val, m)
		}
	}
	if all, ok := s["allOf"].([]any); ok {
		for _, sub := range all {
			v.check(sub, value, at, errs, depth+1)
		}
	}
	if branches, ok := s["anyOf"].([]any); ok {
		var why []string
		matched := false
		for i, sub := range branches {
			e := v.validate1(sub, value, at, depth)
			if len(e) == 0 {
				matched = true
				break
			}
			why = append(why, fmt.Sprintf("branch %d: %s", i, strings.Join(e, "; ")))
		}
		if !matched {
			fail("matches no anyOf branch (%s)", strings.Join(why, " | "))
		}
	}
	if one, ok := s["oneOf"].([]any); ok {
		n := 0
		var why []string
		for i, sub := range one {
			e := v.validate1(sub, value, at, depth)
			if len(e) == 0 {
				n++
			} else {
				why = append(why, fmt.Sprintf("branch %d: %s", i, strings.Join(e, "; ")))
			}
		}
		if n != 1 {
			fail("matches %d oneOf branches, not exactly one (%s)", n, strings.Join(why, " | "))
		}
	}
	if not, ok := s["not"]; ok && len(v.validate1(not, value, at, depth)) == 0 {
		fail("%s matches a schema it must not", describe(value))
	}
}

func (v *schemaValidator) validate1(schema, value any, at string, depth int) []string {
	var errs []string
	v.check(schema, value, at, &errs, depth+1)
	return errs
}

func (v *schemaValidator) checkProperties(s map[string]any, obj map[string]any, at string, errs *[]string, depth int, fail func(string, ...any)) {
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, _ := r.(string); name != "" {
				if _, present := obj[name]; !present {
					fail("missing required property %q", name)
				}
			}
		}
	}
	props, _ := s["properties"].(map[string]any)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if sub, ok := props[k]; ok {
			v.check(sub, obj[k], at+"/"+escapePointer(k), errs, depth+1)
			continue
		}
		if ap, ok := s["additionalProperties"]; ok {
			if b, isBool := ap.(bool); isBool && !b {
				fail("property %q is not allowed", k)
				continue
			}
			v.check(ap, obj[k], at+"/"+escapePointer(k), errs, depth+1)
		}
	}
}

func (v *schemaValidator) checkItems(s map[string]any, arr []any, at string, errs *[]string, depth int, fail func(string, ...any)) {
	if m, ok := intKeyword(s, "minItems"); ok && len(arr) < m {
		fail("has %d items, fewer than %d", len(arr), m)
	}
	if m, ok := intKeyword(s, "maxItems"); ok && len(arr) > m {
		fail("has %d items, more than %d", len(arr), m)
	}
	prefix, _ := s["prefixItems"].([]any)
	for i, item := range arr {
		where := at + "/" + strconv.Itoa(i)
		if i < len(prefix) {
			v.check(prefix[i], item, where, errs, depth+1)
			continue
		}
		if sub, ok := s["items"]; ok {
			v.check(sub, item, where, errs, depth+1)
		}
	}
}

// supported are the keywords the validator applies.
var supported = map[string]bool{
	"$ref": true, "type": true, "enum": true, "const": true,
	"properties": true, "required": true, "additionalProperties": true,
	"items": true, "prefixItems": true, "minItems": true, "maxItems": true,
	"allOf": true, "anyOf": true, "oneOf": true, "not": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"minLength": true, "maxLength": true, "pattern": true,
}

// resolve follows a local reference ("#/components/schemas/Item").
func (v *schemaValidator) resolve(ref string) (any, error) {
	return resolvePointer(v.root, ref)
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

func (v *schemaValidator) pattern(p string) (*regexp.Regexp, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if re, ok := v.patterns[p]; ok {
		return re, nil
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, err
	}
	v.patterns[p] = re
	return re, nil
}

func typeMatches(t, value any) bool {
	switch t := t.(type) {
	case string:
		return isType(t, value)
	case []any:
		for _, x := range t {
			if name, _ := x.(string); isType(name, value) {
				return true
			}
		}
	}
	return false
}

func isType(name string, value any) bool {
	switch value := value.(type) {
	case nil:
		return name == "null"
	case bool:
		return name == "boolean"
	case string:
		return name == "string"
	case []any:
		return name == "array"
	case map[string]any:
		return name == "object"
	case json.Number:
		if name == "number" {
			return true
		}
		if name == "integer" {
			return number(value).IsInt()
		}
	}
	return false
}

func number(n json.Number) *big.Float {
	f, _, err := big.ParseFloat(n.String(), 10, 200, big.ToNearestEven)
	if err != nil {
		return new(big.Float)
	}
	return f
}

// jsonEqual compares JSON values, numbers by value (1 equals 1.0).
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		bn, ok := b.(json.Number)
		return ok && number(a).Cmp(number(bn)) == 0
	case []any:
		bs, ok := b.([]any)
		if !ok || len(a) != len(bs) {
			return false
		}
		for i := range a {
			if !jsonEqual(a[i], bs[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		bm, ok := b.(map[string]any)
		if !ok || len(a) != len(bm) {
			return false
		}
		for k, av := range a {
			bv, ok := bm[k]
			if !ok || !jsonEqual(av, bv) {
				return false
			}
		}
		return true
	}
	return a == b
}

func intKeyword(s map[string]any, key string) (int, bool) {
	n, ok := s[key].(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return int(i), err == nil
}

func escapePointer(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

func pointer(at string) string {
	if at == "" {
		return "/"
	}
	return at
}

func describe(v any) string {
	s := compact(v)
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

func compact(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// TestSchemaValidator holds the validator to the JSON Schema 2020-12
// semantics of each keyword it supports, valid and invalid values alike.
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
		{`{"$ref": "#/components/schemas/Pair"}`, `{"a": "x"}`, true},
		{`{"$ref": "#/components/schemas/Pair"}`, `{"a": ""}`, false},
		{`{"$ref": "#/components/schemas/Pair"}`, `{"a": "x", "b": 1}`, false},
		{`{"$ref": "#/components/schemas/Pair", "required": ["z"]}`, `{"a": "x"}`, false},
		{`{"$ref": "#/components/schemas/Tree"}`, `{"kids": [{"kids": []}, {}]}`, true},
		{`{"$ref": "#/components/schemas/Tree"}`, `{"kids": [{"kids": [1]}]}`, false},
		{`{"$ref": "#/components/schemas/a~0b~1c"}`, `1`, true},
		{`{"$ref": "#/components/schemas/Missing"}`, `1`, false},
		{`{"$ref": "https://example.com/schema"}`, `1`, false},
		{`{"patternProperties": {}}`, `{}`, false},
		{`{"type": "string", "if": {}}`, `"a"`, false},
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
	want := []string{`/_items/1/a~1b: 1 is not of type "string"`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("errors (-want +got):\n%s", diff)
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
