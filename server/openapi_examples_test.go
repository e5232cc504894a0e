package server_test

import (
	"context"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/cache/changelog"
	"github.com/prodapi/prodapi/sources"
)

// TestOpenAPIExamples (openapi_test.go) holds every example to its
// schema; this test sends every request the document shows to the sample
// newsroom, served in process through the whole pipeline with a change
// log of its own (as prodapi -sandbox serves it), and holds each answer
// to the document:
//
//   - every parameter example, on every operation taking the parameter
//     (path parameters at their own examples): no 4xx or 5xx;
//   - every parameter default, all at once on each operation, with
//     cursor= where the operation takes it, as generated clients send
//     them: no 4xx or 5xx (a default page is a 400 beside a cursor);
//   - the request each component example names at the start of its
//     description ("GET /items?max_results=2"): the status it is
//     documented under (200, or 400 for the errors);
//   - the requests of every x-codeSamples entry and of the code blocks of
//     info.description (the guide): no 4xx or 5xx. Each sample must show
//     one.
//
// The examples it does not request are listed in oaUnrequested, each
// with its reason; the test logs them, and fails when one of them is no
// longer in the document.
func TestOpenAPIExampleRequests(t *testing.T) {
	d := loadOpenAPI(t)
	log := changelog.New(nil, changelog.Options{})
	t.Cleanup(func() { log.Close(context.Background()) })
	// Entries, so that a long poll from the start answers at once.
	err := log.Append(t.Context(), changelog.SourceSandbox, []sources.Change{
		{Collection: "archive", ID: "urn:newsml:riverton.example:2026-11-19T18:05:20.436314:a3a0921f-4393-462e-b5ba-04ffb1315805", Op: sources.OpUpdate, At: time.Now()},
		{Collection: "desks", ID: "67c42d4c957184d45484e656", Op: sources.OpReplace, At: time.Now()},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &oaExampleRun{t: t, d: d, base: newOAServerLog(t, nil, log).URL,
		auth: []string{"Authorization", oaToken(t, sources.AllScopes...)}, met: map[string]bool{}}
	r.parameters()
	r.components()
	r.samples()
	for _, key := range slices.Sorted(maps.Keys(oaUnrequested)) {
		if r.met[key] {
			t.Logf("not requested: %s: %s", key, oaUnrequested[key])
		} else {
			t.Errorf("oaUnrequested lists %s, which the document no longer has", key)
		}
	}
	t.Logf("%d example requests", r.requested)
}

// An oaExampleRun requests the document's examples from a server.
type oaExampleRun struct {
	t         *testing.T
	d         *openAPIDoc
	base      string   // the server's URL
	auth      []string // the Authorization header, with every scope
	requested int
	met       map[string]bool // the keys of oaUnrequested met
}

// request sends GET <prefix>/<target> and holds the exchange to the
// document.
func (r *oaExampleRun) request(name, target string, header ...string) *oaExchange {
	r.t.Helper()
	r.requested++
	x := oaDo(r.t, r.base, name, "GET", oaPrefix+"/"+strings.TrimPrefix(target, "/"), append(header, r.auth...)...)
	r.d.check(r.t, x)
	return x
}

// works fails the test when x is an error.
func (r *oaExampleRun) works(x *oaExchange) {
	r.t.Helper()
	if x.status >= 400 {
		r.t.Errorf("%s: GET %s → %d: %s", x.name, shorten(x.target), x.status, x.body)
	}
}

// unrequested reports whether oaUnrequested lists key, and notes it met.
func (r *oaExampleRun) unrequested(key string) bool {
	_, ok := oaUnrequested[key]
	r.met[key] = r.met[key] || ok
	return ok
}

// parameters requests each parameter example on each operation taking
// it, and each operation with every default at once.
func (r *oaExampleRun) parameters() {
	for _, o := range r.d.operations() {
		base, params := oaExamplePath(r.t, r.d, o)
		defaults := url.Values{}
		for _, p := range params {
			for _, ex := range oaParamExamples(r.d, p) {
				if r.unrequested(ex.key) {
					continue
				}
				switch p.in {
				case "query":
					r.works(r.request(o.id+" "+ex.key, base+"?"+oaQuery(p.name, ex.value)))
				case "header":
					r.works(r.request(o.id+" "+ex.key, base, p.name, ex.value))
				}
			}
			if def := at(p.p, "schema", "default"); def != nil && p.in == "query" {
				defaults.Set(p.name, exampleText(def))
			}
			if p.name == "cursor" {
				defaults.Set("cursor", "")
			}
		}
		if len(defaults) > 0 {
			r.works(r.request(o.id+" with every default", base+"?"+defaults.Encode()))
		}
	}
}

// components requests what each component example names, expecting the
// status it is documented under and the documents it shows.
func (r *oaExampleRun) components() {
	t, d := r.t, r.d
	statuses := oaExampleStatuses(t, d)
	for _, name := range sortedKeys(mapAt(d.root, "components", "examples")) {
		key := "examples/" + name
		if r.unrequested(key) {
			continue
		}
		desc, _ := at(d.root, "components", "examples", name, "description").(string)
		target, ok := strings.CutPrefix(desc, "GET /")
		if !ok {
			t.Errorf("%s: its description does not begin with the request it answers (GET /...)", key)
			continue
		}
		target, _, _ = strings.Cut(target, " ")
		x := r.request(key, oaEscapeTarget(strings.TrimRight(target, ",.:")))
		if want := statuses[name]; fmt.Sprint(x.status) != want {
			t.Errorf("%s: GET %s → %d, documented under %s: %s", key, shorten(x.target), x.status, want, x.body)
			continue
		}
		// The documents it shows are those the request answers, first
		// (an example may be cut short, never made up).
		got, _ := decodeJSON(x.body)
		shown, answered := oaDocIDs(at(d.root, "components", "examples", name, "value")), oaDocIDs(got)
		if len(shown) > len(answered) || !slices.Equal(shown, answered[:len(shown)]) {
			t.Errorf("%s shows the documents %q; GET %s answers %q", key, shown, shorten(x.target), answered)
		}
	}
}

// samples requests what the code samples and the guide's code blocks
// show; each must show one request at least.
func (r *oaExampleRun) samples() {
	targets := oaSampleTargets(r.d)
	sample := func(key, source string) {
		found := targets.FindAllStringSubmatch(source, -1)
		if len(found) == 0 {
			r.t.Errorf("%s shows no request (a quoted %s, or %s)", key, `"$API/<path>"`, `"<resource>?..."`)
		}
		for _, m := range found {
			r.works(r.request(key, m[1]+m[2]))
		}
	}
	for _, o := range r.d.operations() {
		samples, _ := o.op["x-codeSamples"].([]any)
		for _, s := range samples {
			sample(fmt.Sprintf("%s x-codeSamples %v", o.id, at(s, "label")), at(s, "source").(string))
		}
	}
	guide, _ := at(r.d.root, "info", "description").(string)
	for i, block := range regexp.MustCompile("(?s)```[a-z]*\n(.*?)```").FindAllStringSubmatch(guide, -1) {
		sample(fmt.Sprintf("info.description code block %d", i+1), block[1])
	}
}

// oaUnrequested are the examples TestOpenAPIExampleRequests leaves out,
// each with the reason. A change-log position is good on the log that
// made it alone: the document's are illustrations, and the convergence of
// the log's positions will bring examples a fresh log takes.
var oaUnrequested = map[string]string{
	// Positions are sealed under the server's secret: an example shows
	// their shape, never a literal that works. TestOpenAPIChangesExamples
	// sends each one and holds it to a 410 (the right shape), never a 400.
	"parameters/ChangesSince examples/position": "a change-log position (since): sealed under another secret, a 410 here",
	"parameters/LastEventId example":            "a change-log position (Last-Event-ID): sealed under another secret, a 410 here",
	"parameters/MinPosition example":            "a change-log position (min_position): sealed under another secret, a 410 here",
	"examples/ChangesPage":                      "answers a since position sealed under another secret",
	"examples/ChangesCaughtUp":                  "answers a since position sealed under another secret",
	"examples/ChangesPageWithDocs":              "answers a since position sealed under another secret",
}

// An oaParam is one of an operation's parameters, dereferenced.
type oaParam struct {
	key, name, in string // key: "parameters/Page", or "<operationId> <name>" inline
	p             map[string]any
}

// An oaExample is one example of a parameter, as it is sent.
type oaExample struct{ key, value string }

// oaExamplePath returns an operation's path with its path parameters at
// their examples, and its other parameters.
func oaExamplePath(t *testing.T, d *openAPIDoc, o oaOperation) (string, []oaParam) {
	t.Helper()
	path := o.path
	var params []oaParam
	for _, raw := range o.op["parameters"].([]any) {
		p := d.deref(t, raw)
		key := o.id + " " + fmt.Sprint(p["name"])
		if ref, ok := at(raw, "$ref").(string); ok {
			key = strings.TrimPrefix(ref, "#/components/")
		}
		param := oaParam{key: key, name: p["name"].(string), in: p["in"].(string), p: p}
		if param.in != "path" {
			params = append(params, param)
			continue
		}
		exs := oaParamExamples(d, param)
		if len(exs) == 0 {
			t.Errorf("%s: path parameter %s has no example", o.id, param.name)
			continue
		}
		escaped := url.PathEscape(exs[0].value)
		if param.name == "media_id" {
			escaped = exs[0].value // may hold a slash
		}
		path = strings.ReplaceAll(path, "{"+param.name+"}", escaped)
	}
	return path, params
}

// exampleText is a parameter's value as it is sent.
func exampleText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v) // a json.Number
}

// oaParamExamples are a parameter's example and examples, as text.
func oaParamExamples(d *openAPIDoc, p oaParam) []oaExample {
	var exs []oaExample
	if v, ok := p.p["example"]; ok {
		exs = append(exs, oaExample{p.key + " example", exampleText(v)})
	}
	for _, name := range sortedKeys(mapAt(p.p, "examples")) {
		ex := mapAt(p.p, "examples", name)
		if ref, ok := ex["$ref"].(string); ok {
			v, _ := resolvePointer(d.root, ref)
			ex, _ = v.(map[string]any)
		}
		exs = append(exs, oaExample{p.key + " examples/" + name, exampleText(ex["value"])})
	}
	return exs
}

// oaExampleStatuses maps each component example to the status of the
// response it is an example of.
func oaExampleStatuses(t *testing.T, d *openAPIDoc) map[string]string {
	t.Helper()
	statuses := map[string]string{}
	for _, o := range d.operations() {
		for status, r := range mapAt(o.op, "responses") {
			for _, media := range mapAt(d.deref(t, r), "content") {
				for _, ex := range mapAt(media, "examples") {
					if ref, ok := at(ex, "$ref").(string); ok {
						statuses[strings.TrimPrefix(ref, "#/components/examples/")] = status
					}
				}
			}
		}
	}
	return statuses
}

// oaDocIDs are the _id of a document, or of each document of a list.
func oaDocIDs(v any) []string {
	if id, ok := at(v, "_id").(string); ok {
		return []string{id}
	}
	var ids []string
	items, _ := at(v, "_items").([]any)
	for _, it := range items {
		id, _ := at(it, "_id").(string)
		ids = append(ids, id)
	}
	return ids
}

// oaEscapeTarget escapes the query of a target as an example's
// description writes it, unescaped (GET /items?where={"a": 1}).
func oaEscapeTarget(target string) string {
	path, query, ok := strings.Cut(target, "?")
	if !ok {
		return path
	}
	var pairs []string
	for pair := range strings.SplitSeq(query, "&") {
		name, value, _ := strings.Cut(pair, "=")
		pairs = append(pairs, name, value)
	}
	return path + "?" + oaQuery(pairs...)
}

// oaSampleTargets finds the requests a code sample shows: a quoted
// target under the API ("$API/items?max_results=100&cursor=",
// `${API}/desks`, API + "/items/<id>", "$API/") or relative to it
// ("changes?since=now"), whole (nothing for the shell or the language to
// fill in). The target is the first submatch and the second together.
func oaSampleTargets(d *openAPIDoc) *regexp.Regexp {
	var roots []string
	for p := range mapAt(d.root, "paths") {
		root, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
		if root != "" && !slices.Contains(roots, root) {
			roots = append(roots, regexp.QuoteMeta(root))
		}
	}
	slices.Sort(roots)
	target := "(?:" + strings.Join(roots, "|") + ")(?:[/?][^\"'`\\s$<{]*)?"
	return regexp.MustCompile("[\"'`](?:(?:\\$API|\\$\\{API\\})/(" + target + ")?|/?(" + target + "))[\"'`]")
}
