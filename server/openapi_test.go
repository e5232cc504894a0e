package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/cache"
	"github.com/prodapi/prodapi/enrich"
	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/server/changes"
	"github.com/prodapi/prodapi/server/changes/changestest"
	"github.com/prodapi/prodapi/server/fairshare"
	"github.com/prodapi/prodapi/server/render"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	"github.com/prodapi/prodapi/sources/grammar"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// The API description, server/openapi.json, is held here to the router
// (every route documented, every documented path routed), to the resource
// table (scopes, parameters, link titles, fields never returned), to
// itself (references, operations, examples against their schemas) and to
// real responses of the sample newsroom through the whole pipeline
// (sandbox → enrich → renderer → cache → server, with authentication on):
// every response's status must be documented for its operation, its body
// must validate against the documented schema, and its headers must be
// the documented ones.

const (
	oaPrefix = "/prodapi/v1"
	oaSecret = "openapi-test-secret-at-least-32-bytes"
	// oaFlood is the client whose rate is 11 requests a second, which a
	// clock that stands still never refills.
	oaFlood = "openapi-flood"
)

func oaNow() time.Time { return time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC) }

// oaResource ties a resource to its operations and schemas in the
// document, and to sample documents worth fetching.
type oaResource struct {
	name                    string
	list, get               string // operation ids
	schema, links, listType string // component schema names
	// details: sample ids fetched besides the first two of the list
	// (those with every kind of link).
	details []string
	// projection, and where (document lists) or source (search lists).
	projection, where, source string
}

var oaResources = []oaResource{
	{name: "items", list: "listItems", get: "getItem", schema: "Item", links: "ItemLinks", listType: "ItemList",
		details: []string{
			"urn:newsml:riverton.example:2026-11-19T18:05:20.436314:a3a0921f-4393-462e-b5ba-04ffb1315805",
			"urn:newsml:riverton.example:2026-11-20T11:05:15.663457:15b7f6ae-93c3-4046-947e-556a24b5a833",
			"urn:newsml:riverton.example:2026-11-19T19:38:52.765190:1880979e-fc9b-454c-bd98-31d4076de7f8",
			"urn:newsml:riverton.example:2026-11-25T09:30:51.747005:2d382cd3-6a77-4460-bd65-23e6958c42b8",
		},
		projection: `{"headline":1,"renditions.thumbnail":1}`,
		source:     `{"query":{"term":{"type":"picture"}},"size":3,"aggs":{"states":{"terms":{"field":"state"}}}}`},
	{name: "desks", list: "listDesks", get: "getDesk", schema: "Desk", links: "DeskLinks", listType: "DeskList",
		details: []string{"67c42d4c957184d45484e656"}, projection: `{"name":1}`, where: `{"name":"Sport"}`},
	{name: "assignments", list: "listAssignments", get: "getAssignment", schema: "Assignment", links: "AssignmentLinks", listType: "AssignmentList",
		details:    []string{"6af58e98957184d45484e9b5", "6b040414957184d45484eaad", "6b05bde0957184d45484ead1"},
		projection: `{"planning.scheduled":1}`,
		source:     `{"query":{"term":{"assigned_to.state":"completed"}},"aggs":{"types":{"terms":{"field":"planning.g2_content_type"}}}}`},
	{name: "events", list: "listEvents", get: "getEvent", schema: "Event", links: "EventLinks", listType: "EventList",
		details: []string{
			"urn:newsml:riverton.example:2026-10-28T11:20:15.394158:9f6d26b2-d4ae-4af5-bb68-eb68bda03923",
			"urn:newsml:riverton.example:2026-11-09T16:25:20.758754:0999f495-7688-4726-9581-467552608ba9",
			"urn:newsml:riverton.example:2026-09-15T10:00:55.109309:1007e910-f9a8-4ab8-99b3-43bb8a01f57a",
		},
		projection: `{"name":1,"dates.start":1}`,
		source:     `{"query":{"bool":{"must_not":[{"term":{"state":"draft"}}]}},"aggs":{"calendars":{"terms":{"field":"calendars.qcode"}}}}`},
	{name: "events_history", list: "listEventsHistory", get: "getEventsHistory", schema: "EventsHistory", links: "EventsHistoryLinks", listType: "EventsHistoryList",
		details: []string{"6ae1da60957184d45484eaec"}, projection: `{"operation":1,"event_id":1}`, where: `{"operation":{"$in":["create","post"]}}`},
	{name: "events_files", list: "listEventsFiles", get: "getEventsFile", schema: "EventsFile", links: "EventsFileLinks", listType: "EventsFileList",
		details: []string{"6ae89a30957184d45484e980"}, projection: `{"filename":1}`, where: `{"mimetype":"image/png"}`},
	{name: "planning", list: "listPlanning", get: "getPlanning", schema: "Planning", links: "PlanningLinks", listType: "PlanningList",
		details: []string{
			"urn:newsml:riverton.example:2026-11-12T10:00:57.705948:2d9cf439-699f-462a-942a-4dafff35f810",
			"urn:newsml:riverton.example:2026-11-10T10:55:14.841295:1f4ee209-655f-42b3-afe1-6f0169a09cb0",
			"urn:newsml:riverton.example:2026-11-24T10:00:03.208301:9f7499ea-9c89-46af-8f52-9c6965331798",
		},
		projection: `{"coverages.planning.scheduled":1,"slugline":1}`,
		source:     `{"query":{"exists":{"field":"event_item"}},"sort":[{"planning_date":"asc"}],"aggs":{"states":{"terms":{"field":"state"}}}}`},
	{name: "contacts", list: "listContacts", get: "getContact", schema: "Contact", listType: "ContactList",
		details:    []string{"682c52a0957184d45484e878", "67ed0398957184d45484e935"},
		projection: `{"last_name":1,"organisation":1}`,
		source:     `{"query":{"term":{"is_active":true}},"aggs":{"types":{"terms":{"field":"contact_type","size":3}}}}`},
	{name: "users", list: "listUsers", get: "getUser", schema: "User", links: "UserLinks", listType: "UserList",
		details: []string{"67c430d0957184d45484e7ac"}, projection: `{"username":1,"display_name":1}`,
		where: `{"is_active":true,"user_type":{"$in":["administrator","user"]}}`},
}

// ---------------------------------------------------------------------
// The document.

type openAPIDoc struct {
	raw       []byte
	root      map[string]any
	v         *schemaValidator
	templates []oaTemplate
}

type oaTemplate struct {
	path string
	re   *regexp.Regexp
}

func loadOpenAPI(t *testing.T) *openAPIDoc {
	t.Helper()
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	v, err := decodeJSON(raw)
	if err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	root, ok := v.(map[string]any)
	if !ok {
		t.Fatal("openapi.json is not an object")
	}
	d := &openAPIDoc{raw: raw, root: root, v: newSchemaValidator(root)}
	param := regexp.MustCompile(`\{[^}]+\}`)
	for p := range mapAt(root, "paths") {
		// {media_id} may hold a slash; other parameters hold none.
		var expr strings.Builder
		last := 0
		for _, loc := range param.FindAllStringIndex(p, -1) {
			expr.WriteString(regexp.QuoteMeta(p[last:loc[0]]))
			if p[loc[0]:loc[1]] == "{media_id}" {
				expr.WriteString(`.+`)
			} else {
				expr.WriteString(`[^/]+`)
			}
			last = loc[1]
		}
		expr.WriteString(regexp.QuoteMeta(p[last:]))
		d.templates = append(d.templates, oaTemplate{path: p, re: regexp.MustCompile("^" + expr.String() + "$")})
	}
	return d
}

// at walks maps by key; nil when a key is missing.
func at(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func mapAt(v any, keys ...string) map[string]any {
	m, _ := at(v, keys...).(map[string]any)
	return m
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// deref follows a $ref (once is all the document needs; more are
// followed too).
func (d *openAPIDoc) deref(t *testing.T, v any) map[string]any {
	t.Helper()
	for range 8 {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		ref, ok := m["$ref"].(string)
		if !ok {
			return m
		}
		next, err := resolvePointer(d.root, ref)
		if err != nil {
			t.Error(err)
			return nil
		}
		v = next
	}
	t.Errorf("references nest too deep")
	return nil
}

// operations returns every operation by id, with its path and method.
type oaOperation struct {
	id, path, method string
	op               map[string]any
}

func (d *openAPIDoc) operations() []oaOperation {
	var ops []oaOperation
	paths := mapAt(d.root, "paths")
	for _, p := range sortedKeys(paths) {
		item := paths[p].(map[string]any)
		for _, m := range sortedKeys(item) {
			if op, ok := item[m].(map[string]any); ok && slices.Contains([]string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}, m) {
				id, _ := op["operationId"].(string)
				ops = append(ops, oaOperation{id: id, path: p, method: m, op: op})
			}
		}
	}
	return ops
}

func (d *openAPIDoc) operation(id string) (oaOperation, bool) {
	for _, o := range d.operations() {
		if o.id == id {
			return o, true
		}
	}
	return oaOperation{}, false
}

// match finds the documented path of a request path under the prefix.
func (d *openAPIDoc) match(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, oaPrefix)
	if !ok {
		return "", false
	}
	if rest == "" {
		rest = "/"
	}
	if len(rest) > 1 {
		rest = strings.TrimSuffix(rest, "/")
	}
	for _, tp := range d.templates {
		if tp.path == rest {
			return tp.path, true
		}
	}
	for _, tp := range d.templates {
		if tp.re.MatchString(rest) {
			return tp.path, true
		}
	}
	return "", false
}

// ---------------------------------------------------------------------
// Structure.

// TestOpenAPIDocument checks the document's shape: JSON as the house
// writes it, an OpenAPI 3.1.0 document whose references all resolve,
// whose operations are complete and whose path parameters are declared.
func TestOpenAPIDocument(t *testing.T) {
	d := loadOpenAPI(t)

	// Strict JSON (no duplicate keys), formatted with two spaces, as
	// codec.AppendJSONIndent writes it, ending in a newline.
	ordered, err := codec.DecodeJSON(d.raw, codec.DecodeOptions{Strict: true})
	if err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if want := append(codec.AppendJSONIndent(nil, ordered, "  "), '\n'); !bytes.Equal(d.raw, want) {
		t.Errorf("openapi.json is not formatted with two-space indentation (as codec.AppendJSONIndent writes it); first difference near byte %d", firstDiff(d.raw, want))
	}

	for _, key := range []string{"openapi", "info", "servers", "paths", "components", "security", "tags"} {
		if _, ok := d.root[key]; !ok {
			t.Errorf("no top-level %q", key)
		}
	}
	if got := at(d.root, "openapi"); got != "3.1.0" {
		t.Errorf("openapi = %v, want 3.1.0", got)
	}
	if got := at(d.root, "info", "title"); got != "Superdesk Production API (prodapi)" {
		t.Errorf("info.title = %v", got)
	}
	if got := at(d.root, "info", "version"); got != "v1" {
		t.Errorf("info.version = %v", got)
	}
	servers, _ := at(d.root, "servers").([]any)
	if len(servers) != 1 || at(servers[0], "url") != "http://localhost:5500/prodapi/v1" {
		t.Errorf("servers = %v, want the one sample server", servers)
	}
	// The served copy rewrites the server URL wherever it appears: any
	// other mention of the sample's address would be left behind.
	if all, under := bytes.Count(d.raw, []byte("localhost:5500")), bytes.Count(d.raw, []byte("http://localhost:5500/prodapi/v1")); all != under {
		t.Errorf("localhost:5500 appears %d times, %d of them in the server URL http://localhost:5500/prodapi/v1, which the served copy rewrites", all, under)
	}
	scheme := mapAt(d.root, "components", "securitySchemes", "bearer")
	if scheme["type"] != "http" || scheme["scheme"] != "bearer" || scheme["bearerFormat"] != "JWT" {
		t.Errorf("securitySchemes.bearer = %v", scheme)
	}

	// Every $ref resolves.
	refs := 0
	walkJSON(d.root, "", func(v any, where string) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		if ref, ok := m["$ref"].(string); ok {
			refs++
			if _, err := resolvePointer(d.root, ref); err != nil {
				t.Errorf("%s: %v", where, err)
			}
		}
	})
	if refs < 100 {
		t.Errorf("only %d references: the walk is broken", refs)
	}

	tags := map[string]bool{}
	for _, tg := range at(d.root, "tags").([]any) {
		tags[at(tg, "name").(string)] = true
	}
	ids := map[string]bool{}
	ops := d.operations()
	if len(ops) != 22 {
		t.Errorf("%d operations, want 22 (home, 9 lists, 9 details, assets, openapi.json, changes)", len(ops))
	}
	for _, o := range ops {
		where := o.method + " " + o.path
		if o.method != "get" {
			t.Errorf("%s: only get is documented (HEAD and OPTIONS are described once)", where)
		}
		if o.id == "" || ids[o.id] {
			t.Errorf("%s: operationId %q missing or repeated", where, o.id)
		}
		ids[o.id] = true
		if s, _ := o.op["summary"].(string); s == "" {
			t.Errorf("%s: no summary", where)
		}
		if s, _ := o.op["description"].(string); s == "" {
			t.Errorf("%s: no description", where)
		}
		opTags, _ := o.op["tags"].([]any)
		if len(opTags) == 0 {
			t.Errorf("%s: no tags", where)
		}
		for _, tg := range opTags {
			if !tags[tg.(string)] {
				t.Errorf("%s: tag %v is not declared", where, tg)
			}
		}
		responses := mapAt(o.op, "responses")
		if len(responses) == 0 {
			t.Errorf("%s: no responses", where)
		}
		for status, r := range responses {
			if _, err := strconv.Atoi(status); err != nil || len(status) != 3 {
				t.Errorf("%s: response %q is not a status code", where, status)
			}
			if desc, _ := d.deref(t, r)["description"].(string); desc == "" {
				t.Errorf("%s %s: no description", where, status)
			}
		}
		for _, sec := range securityOf(d, o.op) {
			for name := range sec.(map[string]any) {
				if mapAt(d.root, "components", "securitySchemes", name) == nil {
					t.Errorf("%s: security scheme %q is not defined", where, name)
				}
			}
		}

		// Parameters: complete, unique, and every path parameter declared.
		declared := map[string]bool{}
		for _, p := range o.op["parameters"].([]any) {
			p := d.deref(t, p)
			name, _ := p["name"].(string)
			in, _ := p["in"].(string)
			if name == "" || !slices.Contains([]string{"path", "query", "header", "cookie"}, in) {
				t.Errorf("%s: parameter %v has no name or a bad location", where, p)
			}
			if _, hasSchema := p["schema"]; hasSchema == (p["content"] != nil) {
				t.Errorf("%s: parameter %s needs exactly one of schema and content", where, name)
			}
			if declared[in+" "+name] {
				t.Errorf("%s: parameter %s %s declared twice", where, in, name)
			}
			declared[in+" "+name] = true
			if in == "path" {
				if p["required"] != true {
					t.Errorf("%s: path parameter %s is not required", where, name)
				}
				if !strings.Contains(o.path, "{"+name+"}") {
					t.Errorf("%s: path parameter %s is not in the path", where, name)
				}
			}
			if desc, _ := p["description"].(string); desc == "" {
				t.Errorf("%s: parameter %s has no description", where, name)
			}
		}
		for _, m := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(o.path, -1) {
			if !declared["path "+m[1]] {
				t.Errorf("%s: path parameter {%s} is not declared", where, m[1])
			}
		}
	}
}

func securityOf(d *openAPIDoc, op map[string]any) []any {
	if s, ok := op["security"].([]any); ok {
		return s
	}
	s, _ := d.root["security"].([]any)
	return s
}

func walkJSON(v any, where string, visit func(v any, where string)) {
	visit(v, where)
	switch v := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(v) {
			walkJSON(v[k], where+"/"+escapePointer(k), visit)
		}
	case []any:
		for i, e := range v {
			walkJSON(e, where+"/"+strconv.Itoa(i), visit)
		}
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestOpenAPIGenerators holds the document to what the mainstream client
// generators need to take it whole (make clients-test runs three of
// them): every parameter has a schema (a JSON-valued one is a string
// carrying JSON: contentMediaType and contentSchema, which generators
// send as text), a schema's type names one type besides null (a union is
// an anyOf: openapi-generator cannot split type lists), every array says
// what its items are (openapi-generator's Python target crashes on one
// that does not) and every object what its members are (openapi-typescript
// makes an object without properties a Record<string, never>, which
// nothing can be assigned to).
func TestOpenAPIGenerators(t *testing.T) {
	d := loadOpenAPI(t)
	walkJSON(mapAt(d.root, "components", "parameters"), "#/components/parameters", func(v any, where string) {
		p, ok := v.(map[string]any)
		if !ok || p["in"] == nil {
			return
		}
		if p["content"] != nil || p["schema"] == nil {
			t.Errorf("%s: a parameter needs a schema, not content", where)
		}
		if at(p, "schema", "contentMediaType") == "application/json" {
			if at(p, "schema", "type") != "string" || at(p, "schema", "contentSchema") == nil {
				t.Errorf("%s: a JSON-valued parameter is a string with a contentSchema", where)
			}
		}
	})
	schemas := 0
	visit := func(s map[string]any, where string) {
		schemas++
		var types []string
		switch ty := s["type"].(type) {
		case string:
			types = []string{ty}
		case []any:
			for _, x := range ty {
				if x != "null" {
					types = append(types, x.(string))
				}
			}
		}
		if len(types) > 1 {
			t.Errorf("%s: type %v: write a union as anyOf", where, s["type"])
		}
		if slices.Contains(types, "array") && s["items"] == nil && s["prefixItems"] == nil {
			t.Errorf("%s: an array without items", where)
		}
		if slices.Contains(types, "object") && !slices.ContainsFunc([]string{"properties", "additionalProperties", "patternProperties", "allOf", "anyOf", "oneOf", "$ref"},
			func(k string) bool { _, ok := s[k]; return ok }) {
			t.Errorf("%s: an object that does not say what it holds (additionalProperties: true when anything goes)", where)
		}
	}
	walkJSON(d.root, "#", func(v any, where string) {
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for _, k := range []string{"schema", "contentSchema"} {
			walkSchema(m[k], where+"/"+k, visit)
		}
		if strings.HasPrefix(where, "#/components/schemas/") && strings.Count(where, "/") == 3 {
			walkSchema(m, where, visit)
		}
	})
	if schemas < 500 {
		t.Errorf("only %d schemas visited: the walk is broken", schemas)
	}
}

// TestOpenAPIResources holds the document to the resource table: each
// resource's operations, scope, parameters (search and document lists
// take different ones), link titles, home entries, and the fields it never
// returns, which its schema must name in its description and never declare.
func TestOpenAPIResources(t *testing.T) {
	d := loadOpenAPI(t)
	if len(oaResources) != len(sources.Resources()) {
		t.Fatalf("the test knows %d resources, the API serves %d", len(oaResources), len(sources.Resources()))
	}
	var homeNames []any
	for _, res := range sources.Resources() {
		homeNames = append(homeNames, res.Name)
	}
	if diff := cmp.Diff(homeNames, at(d.root, "components", "schemas", "Home", "properties", "_links", "properties", "child", "items", "properties", "href", "enum")); diff != "" {
		t.Errorf("home hrefs (-resources +document):\n%s", diff)
	}
	for _, r := range oaResources {
		res, ok := sources.ResourceByName(r.name)
		if !ok {
			t.Fatalf("no resource %s", r.name)
		}
		t.Run(r.name, func(t *testing.T) {
			list, ok1 := d.operation(r.list)
			get, ok2 := d.operation(r.get)
			if !ok1 || !ok2 {
				t.Fatalf("operations %s, %s missing", r.list, r.get)
			}
			if list.path != "/"+r.name || get.path != "/"+r.name+"/{id}" {
				t.Errorf("paths %s and %s", list.path, get.path)
			}
			for _, o := range []oaOperation{list, get} {
				want := []any{map[string]any{"bearer": []any{res.Scope}}}
				if diff := cmp.Diff(want, o.op["security"]); diff != "" {
					t.Errorf("%s security (-want +got):\n%s", o.id, diff)
				}
			}
			// Search lists take source, q, df, default_operator, filter,
			// projections and an equality where; document lists a
			// MongoDB where.
			params := map[string]bool{}
			for _, p := range list.op["parameters"].([]any) {
				if ref, ok := at(p, "$ref").(string); ok {
					params[strings.TrimPrefix(ref, "#/components/parameters/")] = true
				}
			}
			for _, p := range []string{"Page", "MaxResults", "Sort", "Projection", "Embedded", "Pretty", "IfNoneMatch", "IfModifiedSince", "AcceptEncoding", "XRequestId"} {
				if !params[p] {
					t.Errorf("%s lacks %s", list.id, p)
				}
			}
			for _, p := range []string{"Source", "Q", "Df", "DefaultOperator", "Filter", "Projections", "WhereSearch"} {
				if params[p] != res.Search {
					t.Errorf("%s: parameter %s documented = %v, want %v (search list: %v)", list.id, p, params[p], res.Search, res.Search)
				}
			}
			if params["WhereDocument"] == res.Search {
				t.Errorf("%s: MongoDB where documented = %v on a search list = %v", list.id, params["WhereDocument"], res.Search)
			}

			schema := mapAt(d.root, "components", "schemas", r.schema)
			desc, _ := schema["description"].(string)
			props := mapAt(schema, "properties")
			for _, x := range res.Excluded {
				if !strings.Contains(desc, "`"+x[strings.LastIndex(x, ".")+1:]+"`") {
					t.Errorf("%s's description does not name %s among the fields never returned", r.schema, x)
				}
				head, rest, dotted := strings.Cut(x, ".")
				if !dotted {
					if _, ok := props[head]; ok {
						t.Errorf("%s declares %s, which is never returned", r.schema, x)
					}
					continue
				}
				if _, ok := mapAt(props, head, "properties")[rest]; ok {
					t.Errorf("%s declares %s, which is never returned", r.schema, x)
				}
			}
			for _, n := range res.Nested {
				// Associations are items without the item's excluded fields.
				if n != "associations" {
					t.Errorf("nested field %s is not documented", n)
				}
				assoc := mapAt(d.root, "components", "schemas", "Association", "properties")
				for _, x := range res.Excluded {
					if _, ok := assoc[x]; ok {
						t.Errorf("Association declares %s, which is never returned", x)
					}
				}
			}

			if res.NoLinks {
				if _, ok := props["_links"]; ok {
					t.Errorf("%s declares _links, which it never has", r.schema)
				}
				return
			}
			links := mapAt(d.root, "components", "schemas", r.links, "properties")
			if got := at(links, "self", "properties", "title", "const"); got != res.ItemTitle {
				t.Errorf("%s self title %v, want %s", r.links, got, res.ItemTitle)
			}
			if got := at(links, "collection", "properties", "title", "const"); got != res.Title {
				t.Errorf("%s collection title %v, want %s", r.links, got, res.Title)
			}
			if got := at(props, "_links", "$ref"); got != "#/components/schemas/"+r.links {
				t.Errorf("%s._links = %v", r.schema, got)
			}
		})
	}
}

// TestOpenAPIExamples validates every example in the document against
// its schema: media types (inline and component examples), parameters,
// headers, and schemas' own examples. Every component example must be
// used, and every successful JSON response of a resource must have one.
func TestOpenAPIExamples(t *testing.T) {
	d := loadOpenAPI(t)
	checked := 0
	used := map[string]bool{}
	check := func(where string, schema, value any) {
		t.Helper()
		checked++
		for _, e := range d.v.validate(schema, value) {
			t.Errorf("example %s: %s", where, e)
		}
	}
	exampleValue := func(ex any) any {
		m := d.deref(t, ex)
		if ref, ok := at(ex, "$ref").(string); ok {
			used[strings.TrimPrefix(ref, "#/components/examples/")] = true
		}
		return m["value"]
	}
	checkMedia := func(where string, media map[string]any) {
		schema, ok := media["schema"]
		if !ok {
			return
		}
		if ex, ok := media["example"]; ok {
			check(where+" example", schema, ex)
		}
		for _, name := range sortedKeys(mapAt(media, "examples")) {
			check(where+" examples/"+name, schema, exampleValue(media["examples"].(map[string]any)[name]))
		}
	}
	checkParam := func(where string, p map[string]any) {
		if schema, ok := p["schema"]; ok {
			if ex, ok := p["example"]; ok {
				check(where+" example", schema, ex)
			}
			for _, name := range sortedKeys(mapAt(p, "examples")) {
				check(where+" examples/"+name, schema, exampleValue(p["examples"].(map[string]any)[name]))
			}
		}
		for _, mt := range sortedKeys(mapAt(p, "content")) {
			checkMedia(where+" "+mt, mapAt(p, "content", mt))
		}
	}
	checkResponse := func(where string, r map[string]any) {
		for _, name := range sortedKeys(mapAt(r, "headers")) {
			checkParam(where+" header "+name, d.deref(t, r["headers"].(map[string]any)[name]))
		}
		for _, mt := range sortedKeys(mapAt(r, "content")) {
			checkMedia(where+" "+mt, mapAt(r, "content", mt))
		}
	}
	for _, o := range d.operations() {
		for i, p := range o.op["parameters"].([]any) {
			checkParam(fmt.Sprintf("%s parameter %d", o.id, i), d.deref(t, p))
		}
		for _, status := range sortedKeys(mapAt(o.op, "responses")) {
			r := d.deref(t, o.op["responses"].(map[string]any)[status])
			checkResponse(o.id+" "+status, r)
			if status == "200" && strings.HasPrefix(o.path, "/") && o.id != "getOpenAPI" && o.id != "getAsset" {
				if media := mapAt(r, "content", "application/json"); media["example"] == nil && len(mapAt(media, "examples")) == 0 {
					t.Errorf("%s 200 has no example", o.id)
				}
			}
		}
	}
	for _, kind := range []string{"parameters", "headers"} {
		for _, name := range sortedKeys(mapAt(d.root, "components", kind)) {
			checkParam(kind+"/"+name, mapAt(d.root, "components", kind, name))
		}
	}
	for _, name := range sortedKeys(mapAt(d.root, "components", "responses")) {
		checkResponse("responses/"+name, mapAt(d.root, "components", "responses", name))
	}
	// Schemas' own examples, at any depth.
	schemas := mapAt(d.root, "components", "schemas")
	for _, name := range sortedKeys(schemas) {
		walkSchema(schemas[name], "schemas/"+name, func(s map[string]any, where string) {
			exs, _ := s["examples"].([]any)
			for i, ex := range exs {
				check(fmt.Sprintf("%s examples/%d", where, i), s, ex)
			}
			if _, ok := s["example"]; ok {
				t.Errorf("%s: use examples (JSON Schema), not example, in a 3.1 schema", where)
			}
		})
	}
	for _, name := range sortedKeys(mapAt(d.root, "components", "examples")) {
		if !used[name] {
			t.Errorf("component example %s is never used, so never validated", name)
		}
	}
	if checked < 80 {
		t.Errorf("only %d examples checked", checked)
	}
	t.Logf("%d examples validated", checked)
}

// walkSchema visits a schema and its subschemas (not following $ref).
func walkSchema(v any, where string, visit func(map[string]any, string)) {
	s, ok := v.(map[string]any)
	if !ok {
		return
	}
	visit(s, where)
	for _, k := range sortedKeys(mapAt(s, "properties")) {
		walkSchema(s["properties"].(map[string]any)[k], where+"/properties/"+k, visit)
	}
	for _, k := range []string{"items", "additionalProperties", "not"} {
		walkSchema(s[k], where+"/"+k, visit)
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf", "prefixItems"} {
		list, _ := s[k].([]any)
		for i, sub := range list {
			walkSchema(sub, fmt.Sprintf("%s/%s/%d", where, k, i), visit)
		}
	}
}

// ---------------------------------------------------------------------
// The router.

// oaShape reduces a path to its shape: parameters of either syntax
// ({id}, {media_id}, chi's *) become {}, and a trailing slash goes.
func oaShape(p string) string {
	p = regexp.MustCompile(`\{[^}]+\}|\*`).ReplaceAllString(p, "{}")
	if len(p) > 1 {
		p = strings.TrimSuffix(p, "/")
	}
	return p
}

// TestOpenAPIRoutes walks the router: every API route is documented with
// a get operation, every documented path is routed for GET, HEAD and
// OPTIONS. Nothing else is routed but docs, the page that renders the
// document for people (the description names it in its introduction):
// the probes and the metrics are on the operator listener's port.
func TestOpenAPIRoutes(t *testing.T) {
	d := loadOpenAPI(t)
	documented := map[string]string{} // shape → path
	for p := range mapAt(d.root, "paths") {
		if mapAt(d.root, "paths", p, "get") == nil {
			t.Errorf("%s has no get operation", p)
		}
		documented[oaShape(p)] = p
	}
	h := server.New(nil, server.Options{Changes: changes.New(changestest.NewLog(), changes.Options{})}).Handler()
	routes, ok := h.(chi.Routes)
	if !ok {
		t.Fatalf("Handler returns %T, not a chi router", h)
	}
	routed := map[string]map[string]bool{} // shape → methods
	err := chi.Walk(routes, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		switch route {
		case oaPrefix + "/docs", oaPrefix + "/docs/", oaPrefix + "/docs/{file}":
			return nil
		}
		rest, ok := strings.CutPrefix(route, oaPrefix)
		if !ok {
			t.Errorf("%s %s is outside the API", method, route)
			return nil
		}
		if rest == "" {
			rest = "/" // the API root without its trailing slash is the home page too
		}
		shape := oaShape(rest)
		if _, ok := documented[shape]; !ok {
			t.Errorf("%s %s is not documented", method, route)
		}
		if routed[shape] == nil {
			routed[shape] = map[string]bool{}
		}
		routed[shape][method] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for shape, p := range documented {
		for _, m := range []string{"GET", "HEAD", "OPTIONS"} {
			if !routed[shape][m] {
				t.Errorf("%s %s is documented but not routed", m, p)
			}
		}
	}
	if len(routed) != len(documented) {
		t.Errorf("%d routed paths, %d documented", len(routed), len(documented))
	}
}

// TestOpenAPIStatuses holds each operation's documented statuses to what
// the server can answer, read from its code: routing and target length
// (414, middleware), authentication (401; 403 where a scope is needed),
// the fair share (429, wherever a token is read),
// query.Parse (400), the renderer (404 for a missing detail), errorOf
// (500, 503, 504), conditional requests (304), and for media
// http.ServeContent (206, 416) and object storage (302), and for /changes
// the change log (410; 503 when it fails or streams are full; 504 when a
// document of include=doc times out), and on lists and details its
// positions (min_position: 410, 503). 405 is answered
// on every path for every other method, described once as a component.
func TestOpenAPIStatuses(t *testing.T) {
	d := loadOpenAPI(t)
	want := map[string][]string{
		"getHome":    {"200", "304", "401", "414", "429", "500"},
		"getAsset":   {"200", "206", "302", "304", "401", "403", "404", "414", "416", "429", "500", "503", "504"},
		"getOpenAPI": {"200", "304", "414"},
		"getChanges": {"200", "400", "401", "403", "410", "414", "429", "500", "503", "504"},
	}
	for _, r := range oaResources {
		want[r.list] = []string{"200", "304", "400", "401", "403", "410", "414", "429", "500", "503", "504"}
		want[r.get] = []string{"200", "304", "400", "401", "403", "404", "410", "414", "429", "500", "503", "504"}
	}
	for _, o := range d.operations() {
		got := sortedKeys(mapAt(o.op, "responses"))
		if diff := cmp.Diff(want[o.id], got); diff != "" {
			t.Errorf("%s statuses (-server +document):\n%s", o.id, diff)
		}
	}
	if mapAt(d.root, "components", "responses", "MethodNotAllowed") == nil {
		t.Error("405 is not described")
	}
}

// ---------------------------------------------------------------------
// Real responses.

// failingReader fails every read with err.
type failingReader struct{ err error }

func (f failingReader) Get(context.Context, *sources.Resource, string) (*sources.Doc, error) {
	return nil, f.err
}

func (f failingReader) Find(context.Context, *sources.Query) (*sources.Result, error) {
	return nil, f.err
}

// oaAssets serves the sandbox's media, one object-storage key as a
// presigned redirect, and fails every lookup when err is set.
type oaAssets struct {
	store *sandbox.Store
	err   error
}

const oaRedirectKey = "20261119193852/council-vote.jpg"

func (a oaAssets) Asset(ctx context.Context, id string) (*sources.Asset, error) {
	if a.err != nil {
		return nil, a.err
	}
	if id == oaRedirectKey {
		return &sources.Asset{Redirect: "https://s3.example/newsroom/" + id + "?X-Amz-Signature=abc", Expires: oaNow().Add(15 * time.Minute)}, nil
	}
	return a.store.Asset(ctx, id)
}

// newOAServer serves the sample newsroom through the real pipeline, with
// authentication on; a non-nil failure replaces the backend reads and
// the media store with ones failing with it, and drops the cache (which
// would otherwise serve nothing either).
func newOAServer(t *testing.T, failure error) *httptest.Server {
	t.Helper()
	return newOAServerLog(t, failure, changestest.NewLog())
}

// newOAServerLog is newOAServer serving /changes of log.
func newOAServerLog(t *testing.T, failure error, log changes.Log) *httptest.Server {
	t.Helper()
	store, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := enrich.New(store, enrich.Options{MediaPrefix: "http://localhost:5500/prodapi/v1/assets"})
	// The fair share, as limits no request here reaches, but oaFlood's.
	limits, err := fairshare.New(fairshare.Options{Client: fairshare.Rate{Events: 1 << 30, Per: time.Second},
		Clients: map[string]fairshare.Rate{oaFlood: {Events: 11, Per: time.Second}}, Address: fairshare.Rate{Events: 1 << 20, Per: time.Second},
		MissCost: 10, MaxLoads: 8, Now: oaNow, Flush: -1, Hold: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { limits.Close(context.Background()) })
	var load server.Loader
	if failure != nil {
		load = render.New(failingReader{failure}, e.Enrich)
	} else {
		c := cache.New(nil, render.New(store, e.Enrich), cache.Options{Now: oaNow, NotFoundTTL: 5 * time.Second, Gate: limits})
		t.Cleanup(func() { c.Close(context.Background()) })
		load = c
	}
	srv := server.New(load, server.Options{
		Auth:   server.AuthOptions{Enabled: true, Secret: []byte(oaSecret), Now: oaNow},
		Assets: oaAssets{store: store, err: failure},
		Now:    oaNow,
		// The lists of search resources with min_position wait out the
		// search lag: a millisecond here.
		Changes: changes.New(log, changes.Options{SearchLag: time.Millisecond}),
		Limits:  limits,
	})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

func oaToken(t *testing.T, scopes ...string) string {
	t.Helper()
	tok, err := server.MintToken([]byte(oaSecret), "openapi-test", scopes, time.Hour, oaNow())
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + tok
}

// oaQuery builds a query string from name, value pairs, escaped.
func oaQuery(pairs ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		if b.Len() > 0 {
			b.WriteByte('&')
		}
		b.WriteString(url.QueryEscape(pairs[i]))
		if pairs[i+1] != "" || pairs[i] != "pretty" {
			b.WriteByte('=')
			b.WriteString(url.QueryEscape(pairs[i+1]))
		}
	}
	return b.String()
}

// An oaExchange is one request and the response it got.
type oaExchange struct {
	name, method, target string
	reqHeader            []string
	status               int
	header               http.Header
	body                 []byte
}

func oaDo(t *testing.T, base, name, method, target string, header ...string) *oaExchange {
	t.Helper()
	req, err := http.NewRequest(method, base+target, nil)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	// Unless the exchange asks for gzip, ask for identity: with no
	// Accept-Encoding the transport would ask for gzip itself and decode
	// it silently.
	req.Header.Set("Accept-Encoding", "identity")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] != "" {
			req.Header.Set(header[i], header[i+1])
		}
	}
	// The raw transport: no redirects.
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	defer res.Body.Close()
	x := &oaExchange{name: name, method: method, target: target, reqHeader: header, status: res.StatusCode, header: res.Header}
	if mt, _, _ := mime.ParseMediaType(res.Header.Get("Content-Type")); mt == "text/event-stream" {
		return x // a stream lasts: its status and headers are the exchange
	}
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if res.Header.Get("Content-Encoding") == "gzip" && len(body) > 0 {
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: gzip: %v", name, err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			t.Fatalf("%s: gzip: %v", name, err)
		}
	}
	x.body = body
	return x
}

// Headers every response may carry without the document naming them.
var oaStandardHeaders = map[string]bool{
	"Content-Type": true, "Content-Length": true, "Date": true, "Content-Encoding": true,
	"Transfer-Encoding": true, "Connection": true,
	// On every answer, whoever writes it (the document's description says
	// so once): required where a response documents it.
	"X-Content-Type-Options": true,
}

// check validates one exchange against the document and returns the
// coverage key of what it exercised ("listItems 200").
func (d *openAPIDoc) check(t *testing.T, x *oaExchange) string {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf("%s (%s %s → %d): %s", x.name, x.method, shorten(x.target), x.status, fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(x.target)
	if err != nil {
		fail("%v", err)
		return ""
	}
	docPath, found := d.match(u.Path)
	var response map[string]any
	var key string
	switch {
	case x.status == http.StatusMethodNotAllowed:
		if x.method == http.MethodGet || x.method == http.MethodHead {
			fail("405 for %s", x.method)
		}
		response, key = mapAt(d.root, "components", "responses", "MethodNotAllowed"), "405"
	case !found && x.status == http.StatusNotFound:
		response, key = mapAt(d.root, "components", "responses", "NotFound"), "routing 404"
	case !found:
		fail("no documented path matches %s", u.Path)
		return ""
	default:
		op := mapAt(d.root, "paths", docPath, "get")
		id, _ := op["operationId"].(string)
		status := strconv.Itoa(x.status)
		r, ok := mapAt(op, "responses")[status]
		if !ok {
			fail("status %d is not documented for %s", x.status, id)
			return ""
		}
		response, key = d.deref(t, r), id+" "+status
	}

	// Headers: the required ones present, every present one documented,
	// each value valid.
	documented := map[string]map[string]any{}
	for name, h := range mapAt(response, "headers") {
		documented[http.CanonicalHeaderKey(name)] = d.deref(t, h)
	}
	for name, h := range documented {
		value := x.header.Get(name)
		if value == "" {
			if h["required"] == true {
				fail("required header %s is missing", name)
			}
			continue
		}
		for _, e := range d.v.validate(h["schema"], headerValue(h["schema"], value)) {
			fail("header %s: %s", name, e)
		}
	}
	for name := range x.header {
		if !oaStandardHeaders[name] && documented[name] == nil {
			fail("header %s (%q) is not documented for %s", name, x.header.Get(name), key)
		}
	}

	// Body: empty where none is documented (and for HEAD); otherwise of a
	// documented media type, and JSON valid against its schema.
	content := mapAt(response, "content")
	ctype := x.header.Get("Content-Type")
	if len(content) == 0 {
		if len(x.body) > 0 || ctype != "" {
			fail("a body (%s, %d bytes) where none is documented", ctype, len(x.body))
		}
		return key
	}
	mt, _, _ := mime.ParseMediaType(ctype)
	media, ok := content[mt].(map[string]any)
	if !ok {
		media, ok = content["*/*"].(map[string]any)
	}
	if !ok {
		fail("content type %q is not documented (%v)", ctype, sortedKeys(content))
		return key
	}
	if x.method == http.MethodHead {
		if len(x.body) > 0 {
			fail("HEAD with a body")
		}
		return key
	}
	if mt != "application/json" {
		return key
	}
	v, err := decodeJSON(x.body)
	if err != nil {
		fail("body is not JSON: %v", err)
		return key
	}
	for _, e := range d.v.validate(media["schema"], v) {
		fail("body: %s", e)
	}
	return key
}

// headerValue is a header's value as JSON: a number where the schema
// wants one and the value is one, a string otherwise.
func headerValue(schema any, raw string) any {
	if typeMatches(at(schema, "type"), json.Number("0")) && !typeMatches(at(schema, "type"), "") {
		if _, err := strconv.ParseFloat(raw, 64); err == nil {
			return json.Number(raw)
		}
	}
	return raw
}

// checkExcluded fails when a document of res carries a field res never
// returns (top-level, dotted one level, or in an association).
func checkExcluded(t *testing.T, x *oaExchange, res *sources.Resource) {
	t.Helper()
	var body map[string]any
	if json.Unmarshal(x.body, &body) != nil {
		return
	}
	docs := []any{body}
	if items, ok := body["_items"].([]any); ok {
		docs = items
	}
	for _, doc := range docs {
		doc, _ := doc.(map[string]any)
		targets := []map[string]any{doc}
		for _, n := range res.Nested {
			for _, a := range mapAt(doc, n) {
				if a, ok := a.(map[string]any); ok {
					targets = append(targets, a)
				}
			}
		}
		for i, d := range targets {
			for _, f := range res.Excluded {
				if f == "_links" && i > 0 {
					continue // associations keep their stored _links, as in the original
				}
				head, rest, dotted := strings.Cut(f, ".")
				if _, ok := d[head]; ok && !dotted {
					t.Errorf("%s: %s carries %s", x.name, res.Name, f)
				}
				if _, ok := mapAt(d, head)[rest]; ok && dotted {
					t.Errorf("%s: %s carries %s", x.name, res.Name, f)
				}
			}
		}
	}
}

// TestOpenAPIResponses requests every operation of the sample newsroom,
// with and without parameters, in every way that changes the status, and
// holds each response to the document. Every documented status of every
// operation must be exercised (but the home's 500: its body is static).
func TestOpenAPIResponses(t *testing.T) {
	d := loadOpenAPI(t)
	ts := newOAServer(t, nil)
	all := oaToken(t, sources.AllScopes...)
	none := oaToken(t)
	var exchanges []*oaExchange
	do := func(name, method, target string, header ...string) *oaExchange {
		t.Helper()
		x := oaDo(t, ts.URL, name, method, target, header...)
		exchanges = append(exchanges, x)
		return x
	}
	expect := func(x *oaExchange, status int) {
		t.Helper()
		if x.status != status {
			t.Errorf("%s: %s %s → %d, want %d: %s", x.name, x.method, shorten(x.target), x.status, status, x.body)
		}
	}
	long := "?q=" + strings.Repeat("a", 17<<10)

	home := do("home", "GET", oaPrefix, "Authorization", all)
	expect(home, 200)
	expect(do("home, any token", "GET", oaPrefix+"/", "Authorization", none), 200)
	expect(do("home, 304", "GET", oaPrefix, "Authorization", all, "If-None-Match", home.header.Get("ETag")), 304)
	expect(do("home, no token", "GET", oaPrefix), 401)
	expect(do("home, bad token", "GET", oaPrefix, "Authorization", "Bearer not.a.token"), 401)
	expect(do("home, 414", "GET", oaPrefix+long, "Authorization", all), 414)
	expect(do("home, HEAD", "HEAD", oaPrefix, "Authorization", all), 200)

	for _, r := range oaResources {
		res, _ := sources.ResourceByName(r.name)
		base := oaPrefix + "/" + r.name
		other := oaToken(t, otherScope(res.Scope))
		list := do(r.name+" list", "GET", base, "Authorization", all)
		expect(list, 200)
		var env struct {
			Items []struct {
				ID string `json:"_id"`
			} `json:"_items"`
		}
		if err := json.Unmarshal(list.body, &env); err != nil || len(env.Items) < 2 {
			t.Fatalf("%s list: %v %s", r.name, err, list.body)
		}
		expect(do(r.name+" list, trailing slash", "GET", base+"/", "Authorization", all), 200)
		expect(do(r.name+" list, page 2", "GET", base+"?"+oaQuery("page", "2", "max_results", "2"), "Authorization", all), 200)
		expect(do(r.name+" list, projection", "GET", base+"?"+oaQuery("projection", r.projection, "max_results", "3"), "Authorization", all), 200)
		expect(do(r.name+" list, sort", "GET", base+"?"+oaQuery("sort", "-_updated", "pretty", ""), "Authorization", all), 200)
		walk := do(r.name+" list, cursor", "GET", base+"?"+oaQuery("cursor", "", "max_results", "2"), "Authorization", all)
		expect(walk, 200)
		var page struct {
			Links struct{ Next struct{ Href string } } `json:"_links"`
		}
		if err := json.Unmarshal(walk.body, &page); err != nil || page.Links.Next.Href == "" {
			t.Fatalf("%s list, cursor: %v %s", r.name, err, walk.body)
		}
		expect(do(r.name+" list, next cursor", "GET", oaPrefix+"/"+page.Links.Next.Href, "Authorization", all), 200)
		expect(do(r.name+" list, cursor and page", "GET", base+"?"+oaQuery("cursor", "", "page", "2"), "Authorization", all), 400)
		expect(do(r.name+" list, bad cursor", "GET", base+"?"+oaQuery("cursor", "bm90IGEgY3Vyc29y"), "Authorization", all), 400)
		if res.Search {
			expect(do(r.name+" list, source", "GET", base+"?"+oaQuery("source", r.source), "Authorization", all), 200)
			expect(do(r.name+" list, q", "GET", base+"?"+oaQuery("q", "Riverton", "max_results", "2", "page", "2"), "Authorization", all), 200)
			expect(do(r.name+" list, where", "GET", base+"?"+oaQuery("where", `{"_id":"`+env.Items[0].ID+`"}`), "Authorization", all), 200)
			expect(do(r.name+" list, refused source", "GET", base+"?"+oaQuery("source", `{"query":{"match_all":{}},"highlight":{}}`), "Authorization", all), 400)
			expect(do(r.name+" list, operator in where", "GET", base+"?"+oaQuery("where", `{"_id":{"$ne":"x"}}`), "Authorization", all), 400)
		} else {
			expect(do(r.name+" list, where", "GET", base+"?"+oaQuery("where", r.where), "Authorization", all), 200)
			expect(do(r.name+" list, unknown operator", "GET", base+"?"+oaQuery("where", `{"_id":{"$foo":1}}`), "Authorization", all), 400)
		}
		hidden := hiddenField(res)
		expect(do(r.name+" list, hidden field", "GET", base+"?"+oaQuery("sort", hidden), "Authorization", all), 400)
		expect(do(r.name+" list, 304", "GET", base, "Authorization", all, "If-None-Match", list.header.Get("ETag")), 304)
		if lm := list.header.Get("Last-Modified"); lm != "" {
			expect(do(r.name+" list, no 304 by date", "GET", base, "Authorization", all, "If-Modified-Since", lm), 200)
		}
		expect(do(r.name+" list, gzip", "GET", base, "Authorization", all, "Accept-Encoding", "gzip"), 200)
		expect(do(r.name+" list, HEAD", "HEAD", base, "Authorization", all), 200)
		expect(do(r.name+" list, no token", "GET", base), 401)
		expect(do(r.name+" list, other scope", "GET", base, "Authorization", other), 403)
		expect(do(r.name+" list, 414", "GET", base+long, "Authorization", all), 414)
		expect(do(r.name+" list, min_position", "GET", base+"?"+oaQuery("min_position", oaPosition(t, ts.URL, all)), "Authorization", all), 200)
		expect(do(r.name+" list, foreign min_position", "GET", base+"?"+oaQuery("min_position", oaForeignPosition), "Authorization", all), 410)
		expect(do(r.name+" list, POST", "POST", base, "Authorization", all), 405)

		ids := append([]string{env.Items[0].ID, env.Items[1].ID}, r.details...)
		for i, id := range ids {
			target := base + "/" + url.PathEscape(id)
			x := do(fmt.Sprintf("%s detail %d", r.name, i), "GET", target, "Authorization", all)
			expect(x, 200)
			if i == 0 {
				expect(do(r.name+" detail, 304", "GET", target, "Authorization", all, "If-None-Match", x.header.Get("ETag")), 304)
				expect(do(r.name+" detail, HEAD", "HEAD", target+"/", "Authorization", all), 200)
				expect(do(r.name+" detail, page 2", "GET", target+"?"+oaQuery("page", "2", "max_results", "5", "projection", r.projection), "Authorization", all), 200)
				expect(do(r.name+" detail, bad projection", "GET", target+"?"+oaQuery("projection", "1"), "Authorization", all), 400)
				expect(do(r.name+" detail, no token", "GET", target), 401)
				expect(do(r.name+" detail, other scope", "GET", target, "Authorization", other), 403)
				expect(do(r.name+" detail, 414", "GET", target+long, "Authorization", all), 414)
				expect(do(r.name+" detail, min_position", "GET", target+"?"+oaQuery("min_position", oaPosition(t, ts.URL, all)), "Authorization", all), 200)
				expect(do(r.name+" detail, foreign min_position", "GET", target+"?"+oaQuery("min_position", oaForeignPosition), "Authorization", all), 410)
				expect(do(r.name+" detail, DELETE", "DELETE", target, "Authorization", all), 405)
			}
		}
		expect(do(r.name+" detail, missing", "GET", base+"/no-such-id", "Authorization", all), 404)
		expect(do(r.name+" detail, missing again (cached)", "GET", base+"/no-such-id", "Authorization", all), 404)
		expect(do(r.name+" detail, not an id", "GET", base+"/bad%20id", "Authorization", all), 404)
	}

	asset := oaPrefix + "/assets/6aff5018957184d45484eb7d.jpg"
	archive := oaToken(t, sources.ScopeArchive)
	a := do("asset", "GET", asset, "Authorization", archive)
	expect(a, 200)
	expect(do("asset, download", "GET", asset+"?download=1", "Authorization", archive), 200)
	expect(do("asset, no extension", "HEAD", oaPrefix+"/assets/6ae89a30957184d45484e974", "Authorization", archive), 200)
	expect(do("asset, range", "GET", asset, "Authorization", archive, "Range", "bytes=0-9"), 206)
	expect(do("asset, ranges", "GET", asset, "Authorization", archive, "Range", "bytes=0-1,5-6"), 206)
	expect(do("asset, 304", "GET", asset, "Authorization", archive, "If-None-Match", a.header.Get("ETag")), 304)
	expect(do("asset, 304 by date", "GET", asset, "Authorization", archive, "If-Modified-Since", a.header.Get("Last-Modified")), 304)
	expect(do("asset, 416", "GET", asset, "Authorization", archive, "Range", "bytes=99999999-"), 416)
	expect(do("asset, redirect", "GET", oaPrefix+"/assets/"+oaRedirectKey, "Authorization", archive), 302)
	expect(do("asset, missing", "GET", oaPrefix+"/assets/6aff5018957184d45484ffff.jpg", "Authorization", archive), 404)
	expect(do("asset, not a media id", "GET", oaPrefix+"/assets/a/b/c", "Authorization", archive), 404)
	expect(do("asset, no token", "GET", asset), 401)
	expect(do("asset, other scope", "GET", asset, "Authorization", oaToken(t, sources.ScopeDesks)), 403)
	expect(do("asset, 414", "GET", asset+long, "Authorization", archive), 414)
	expect(do("asset, PUT", "PUT", asset, "Authorization", archive), 405)

	doc := do("openapi.json", "GET", oaPrefix+"/openapi.json")
	expect(doc, 200)
	expect(do("openapi.json, 304", "GET", oaPrefix+"/openapi.json", "If-None-Match", doc.header.Get("ETag")), 304)
	expect(do("openapi.json, gzip", "GET", oaPrefix+"/openapi.json", "Accept-Encoding", "gzip"), 200)
	expect(do("openapi.json, 414", "GET", oaPrefix+"/openapi.json"+long), 414)
	expect(do("openapi.json, POST", "POST", oaPrefix+"/openapi.json"), 405)

	expect(do("unknown route", "GET", oaPrefix+"/nope", "Authorization", all), 404)
	expect(do("unknown route under a resource", "GET", oaPrefix+"/items/a/b", "Authorization", all), 404)

	for _, x := range oaTooMany(t, ts.URL, asset) {
		exchanges = append(exchanges, x)
		expect(x, 429)
	}

	// Backend failures, with nothing cached.
	for _, f := range []struct {
		name   string
		err    error
		status int
	}{
		{"unavailable", fmt.Errorf("test: %w", sources.ErrUnavailable), 503},
		{"timeout", fmt.Errorf("test: %w", sources.ErrTimeout), 504},
		{"defect", errors.New("test: a defect"), 500},
	} {
		failing := newOAServer(t, f.err)
		run := func(name, target string, header ...string) {
			x := oaDo(t, failing.URL, name, "GET", target, header...)
			exchanges = append(exchanges, x)
			expect(x, f.status)
		}
		for _, r := range oaResources {
			run(r.name+" list, "+f.name, oaPrefix+"/"+r.name, "Authorization", all)
			run(r.name+" detail, "+f.name, oaPrefix+"/"+r.name+"/"+url.PathEscape(r.details[0]), "Authorization", all)
		}
		run("asset, "+f.name, asset, "Authorization", archive)
	}

	exchanges = append(exchanges, oaChangesExchanges(t, d)...)
	exercised := map[string]bool{}
	for _, x := range exchanges {
		if key := d.check(t, x); key != "" {
			exercised[key] = true
		}
		if path, ok := d.match(strings.SplitN(x.target, "?", 2)[0]); ok && x.status == 200 && x.method == "GET" {
			if res, ok := sources.ResourceByName(strings.Trim(strings.SplitN(path, "/{", 2)[0], "/")); ok {
				checkExcluded(t, x, res)
			}
		}
	}
	var missed []string
	for _, o := range d.operations() {
		for status := range mapAt(o.op, "responses") {
			key := o.id + " " + status
			if !exercised[key] && key != "getHome 500" {
				missed = append(missed, key)
			}
		}
	}
	for _, key := range []string{"405", "routing 404"} {
		if !exercised[key] {
			missed = append(missed, key)
		}
	}
	sort.Strings(missed)
	if len(missed) > 0 {
		t.Errorf("documented responses no request exercised: %v", missed)
	}
	t.Logf("%d exchanges checked, %d documented responses exercised", len(exchanges), len(exercised))
}

// oaTooMany requests every operation that reads a token as a client
// whose rate is spent (oaFlood's: 11 requests, on a clock that stands
// still): each a 429.
func oaTooMany(t *testing.T, base, asset string) []*oaExchange {
	t.Helper()
	tok, err := server.MintToken([]byte(oaSecret), oaFlood, sources.AllScopes, time.Hour, oaNow())
	if err != nil {
		t.Fatal(err)
	}
	flood := "Bearer " + tok
	for range 11 {
		oaDo(t, base, "spending", "GET", oaPrefix, "Authorization", flood)
	}
	xs := []*oaExchange{oaDo(t, base, "home, 429", "GET", oaPrefix, "Authorization", flood)}
	for _, r := range oaResources {
		xs = append(xs, oaDo(t, base, r.name+" list, 429", "GET", oaPrefix+"/"+r.name, "Authorization", flood),
			oaDo(t, base, r.name+" detail, 429", "GET", oaPrefix+"/"+r.name+"/"+url.PathEscape(r.details[0]), "Authorization", flood))
	}
	return append(xs, oaDo(t, base, "asset, 429", "GET", asset, "Authorization", flood),
		oaDo(t, base, "changes, 429", "GET", oaPrefix+"/changes", "Authorization", flood))
}

// shorten cuts a long request target for messages.
func shorten(s string) string {
	if len(s) > 160 {
		return s[:150] + "...(" + strconv.Itoa(len(s)) + " bytes)"
	}
	return s
}

// otherScope is a scope that is not s.
func otherScope(s string) string {
	if s == sources.ScopeDesks {
		return sources.ScopeUsers
	}
	return sources.ScopeDesks
}

// hiddenField names a field res never returns and refuses to sort on:
// the last of its excluded fields (never _updated or _created, which may
// be sorted on).
func hiddenField(res *sources.Resource) string {
	return res.Excluded[len(res.Excluded)-1]
}

// TestOpenAPIOptions checks what the document says of OPTIONS: no token,
// 200, Allow, no body, on every documented path.
func TestOpenAPIOptions(t *testing.T) {
	d := loadOpenAPI(t)
	ts := newOAServer(t, nil)
	for p := range mapAt(d.root, "paths") {
		target := oaPrefix + strings.NewReplacer("{id}", "x", "{media_id}", "x.jpg").Replace(p)
		x := oaDo(t, ts.URL, "OPTIONS "+p, "OPTIONS", target)
		if x.status != 200 || x.header.Get("Allow") != "GET, HEAD, OPTIONS" || len(x.body) != 0 || x.header.Get("X-Request-Id") == "" {
			t.Errorf("OPTIONS %s: %d, Allow %q, %d bytes", target, x.status, x.header.Get("Allow"), len(x.body))
		}
	}
}

// TestOpenAPIServed checks the served copy: the document itself, without a
// token even with authentication on, its caching headers, HEAD, gzip, and
// the server URL following the configured prefix.
func TestOpenAPIServed(t *testing.T) {
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	ts := newOAServer(t, nil)
	got := oaDo(t, ts.URL, "served", "GET", oaPrefix+"/openapi.json")
	if got.status != 200 || !bytes.Equal(got.body, raw) {
		t.Fatalf("GET openapi.json: %d, %d bytes, want the %d bytes of openapi.json", got.status, len(got.body), len(raw))
	}
	for k, want := range map[string]string{"Content-Type": "application/json", "Cache-Control": "public, max-age=300", "Vary": "Accept-Encoding"} {
		if v := got.header.Get(k); v != want {
			t.Errorf("%s = %q, want %q", k, v, want)
		}
	}
	etag := got.header.Get("ETag")
	if !regexp.MustCompile(`^"[0-9a-f]{32}"$`).MatchString(etag) {
		t.Errorf("ETag %q", etag)
	}
	zipped := oaDo(t, ts.URL, "gzip", "GET", oaPrefix+"/openapi.json/", "Accept-Encoding", "gzip")
	if zipped.status == 200 {
		// The gzip coding has its own strong validator (RFC 9110 §8.8.3).
		if zipped.header.Get("Content-Encoding") != "gzip" || !bytes.Equal(zipped.body, raw) || zipped.header.Get("ETag") != strings.TrimSuffix(etag, `"`)+`-gzip"` {
			t.Errorf("gzip: %q, %d bytes, ETag %q", zipped.header.Get("Content-Encoding"), len(zipped.body), zipped.header.Get("ETag"))
		}
	}
	head := oaDo(t, ts.URL, "HEAD", "HEAD", oaPrefix+"/openapi.json")
	if head.status != 200 || len(head.body) != 0 || head.header.Get("Content-Length") != strconv.Itoa(len(raw)) {
		t.Errorf("HEAD: %d, %d bytes, Content-Length %q", head.status, len(head.body), head.header.Get("Content-Length"))
	}
	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		if x := oaDo(t, ts.URL, "304", "GET", oaPrefix+"/openapi.json", "If-None-Match", inm); x.status != 304 || len(x.body) != 0 {
			t.Errorf("If-None-Match %s: %d", inm, x.status)
		}
	}
	if x := oaDo(t, ts.URL, "stale", "GET", oaPrefix+"/openapi.json", "If-None-Match", `"other"`); x.status != 200 {
		t.Errorf("a stale If-None-Match: %d", x.status)
	}

	for _, tc := range []struct{ prefix, baseURL, base, url string }{
		{"", "", "/prodapi/v1", "http://localhost:5500/prodapi/v1"},
		{"prodapi", "http://localhost:5500/", "/prodapi/v1", "http://localhost:5500/prodapi/v1"},
		{"/api/news/", "https://news.example", "/api/news/v1", "https://news.example/api/news/v1"},
	} {
		srv := httptest.NewServer(server.New(nil, server.Options{Prefix: tc.prefix, BaseURL: tc.baseURL, Auth: server.AuthOptions{Enabled: true, Secret: []byte(oaSecret)}}).Handler())
		x := oaDo(t, srv.URL, "prefix "+tc.prefix, "GET", tc.base+"/openapi.json")
		srv.Close()
		var doc struct {
			Servers []struct {
				URL string `json:"url"`
			} `json:"servers"`
		}
		if x.status != 200 || json.Unmarshal(x.body, &doc) != nil || len(doc.Servers) != 1 || doc.Servers[0].URL != tc.url {
			t.Errorf("prefix %q: %d, servers %+v, want %s", tc.prefix, x.status, doc.Servers, tc.url)
			continue
		}
		// Nothing else changes but the code samples' and the examples'
		// URLs, which follow.
		want := bytes.ReplaceAll(raw, []byte(`http://localhost:5500/prodapi/v1`), []byte(tc.url))
		if !bytes.Equal(x.body, want) {
			t.Errorf("prefix %q: the document differs beyond its server URL", tc.prefix)
		}
		if tc.url != "http://localhost:5500/prodapi/v1" && bytes.Contains(x.body, []byte("localhost:5500")) {
			t.Errorf("prefix %q: the served document still names localhost:5500", tc.prefix)
		}
	}
}

// The description's operator and query-type lists are the grammar's
// (sources/grammar), which the parsers, the adapters and the contract
// suite use: an operator added to or dropped from the grammar fails here
// until the description says so too.
func TestOpenAPINamesTheGrammar(t *testing.T) {
	d := loadOpenAPI(t)
	where, _ := at(d.root, "components", "parameters", "WhereDocument", "description").(string)
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`\$[A-Za-z]+`).FindAllString(where, -1) {
		named[m] = true
	}
	want := map[string]bool{}
	for _, op := range grammar.MongoOps() {
		want[op.Name] = true
	}
	for _, op := range grammar.BannedMongoOps() {
		want[op] = true
	}
	for name := range want {
		if !named[name] {
			t.Errorf("the where description does not name %s", name)
		}
	}
	for name := range named {
		if _, known := grammar.MongoOp(name); !known && !grammar.BannedMongoOp(name) {
			t.Errorf("the where description names %s, which the grammar does not know", name)
		}
	}

	query, _ := at(d.root, "components", "schemas", "SearchSource", "properties", "query", "description").(string)
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(query, -1) {
		listed[m[1]] = true
	}
	for _, qt := range grammar.QueryTypes() {
		if qt.Name != "query" && !listed[qt.Name] { // "query" is the legacy wrapper of a whole query
			t.Errorf("the query description does not name %s", qt.Name)
		}
	}
	for name := range listed {
		if _, ok := grammar.QueryTypeByName(name); !ok {
			t.Errorf("the query description names %s, which the grammar does not accept", name)
		}
	}
}

// TestOpenAPIOAuth2 checks the served document with a token URL
// (PRODAPI_TOKEN_URL): an oauth2 client-credentials scheme against it,
// naming every scope the operations need and what each reads, and beside
// every bearer requirement the same oauth2 one; nothing else changes.
// Without a token URL, or with one the server cannot name (config refuses
// it), the document offers no OAuth 2.
func TestOpenAPIOAuth2(t *testing.T) {
	serve := func(tokenURL string) map[string]any {
		t.Helper()
		ts := httptest.NewServer(server.New(nil, server.Options{Auth: server.AuthOptions{Enabled: true, Secret: []byte(oaSecret), TokenURL: tokenURL}}).Handler())
		defer ts.Close()
		x := oaDo(t, ts.URL, "openapi.json", "GET", oaPrefix+"/openapi.json")
		v, err := decodeJSON(x.body)
		if x.status != 200 || err != nil {
			t.Fatalf("token URL %q: %d, %v", tokenURL, x.status, err)
		}
		return v.(map[string]any)
	}
	plain := serve("")
	if at(plain, "components", "securitySchemes", "oauth2") != nil {
		t.Error("without a token URL, the document offers OAuth 2")
	}
	if diff := cmp.Diff(plain, serve("/api/auth_server/token")); diff != "" {
		t.Errorf("with a relative token URL, the document changed (-without +with):\n%s", diff)
	}

	const tokenURL = "https://superdesk.example/api/auth_server/token"
	doc := serve(tokenURL)
	want := map[string]any{
		"ARCHIVE_READ":     "Read items, assets.",
		"DESKS_READ":       "Read desks.",
		"ASSIGNMENTS_READ": "Read assignments.",
		"EVENTS_READ":      "Read events, events_history, events_files.",
		"PLANNING_READ":    "Read planning.",
		"CONTACTS_READ":    "Read contacts.",
		"USERS_READ":       "Read users.",
	}
	scheme := mapAt(doc, "components", "securitySchemes", "oauth2")
	if scheme["type"] != "oauth2" || at(scheme, "flows", "clientCredentials", "tokenUrl") != tokenURL || len(mapAt(scheme, "flows")) != 1 {
		t.Errorf("securitySchemes.oauth2 = %v", scheme)
	}
	if diff := cmp.Diff(want, mapAt(scheme, "flows", "clientCredentials", "scopes")); diff != "" {
		t.Errorf("oauth2 scopes (-want +got):\n%s", diff)
	}
	for _, s := range sources.AllScopes {
		if _, ok := want[s]; !ok {
			t.Errorf("scope %s: the test does not know it", s)
		}
	}

	// Take the oauth2 requirements out, each after the bearer one it
	// repeats, and the scheme: the document without a token URL is left.
	strip := func(where string, security []any) []any {
		var bearer, oauth2 []any
		for _, req := range security {
			if s, ok := at(req, "bearer").([]any); ok {
				bearer = append(bearer, s)
			} else if s, ok := at(req, "oauth2").([]any); ok {
				oauth2 = append(oauth2, s)
			} else {
				t.Errorf("%s: requirement %v", where, req)
			}
		}
		if diff := cmp.Diff(bearer, oauth2); diff != "" {
			t.Errorf("%s: the oauth2 requirements are not the bearer ones (-bearer +oauth2):\n%s", where, diff)
		}
		return security[:len(bearer)]
	}
	doc["security"] = strip("security", doc["security"].([]any))
	for p, item := range mapAt(doc, "paths") {
		op := mapAt(item, "get")
		if sec, ok := op["security"].([]any); ok {
			op["security"] = strip(p, sec)
		}
	}
	delete(mapAt(doc, "components", "securitySchemes"), "oauth2")
	if diff := cmp.Diff(plain, doc); diff != "" {
		t.Errorf("beyond OAuth 2, the document changed (-without +with):\n%s", diff)
	}
}
