package sources_test

import (
	"testing"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

func TestProjectionApply(t *testing.T) {
	doc := func() *sources.Doc {
		return sources.D("_id", "a", "headline", "h", "task", sources.D("desk", "d", "stage", "s"),
			"renditions", []any{sources.D("href", "x", "width", int64(1)), sources.D("href", "y")}, "body_html", "<p>")
	}
	for _, tc := range []struct {
		name string
		p    sources.Projection
		want string
	}{
		{"none", sources.Projection{}, `{"_id":"a","headline":"h","task":{"desk":"d","stage":"s"},"renditions":[{"href":"x","width":1},{"href":"y"}],"body_html":"<p>"}`},
		{"include", sources.Projection{Fields: []string{"headline"}}, `{"_id":"a","headline":"h"}`},
		{"include dotted", sources.Projection{Fields: []string{"task.stage", "renditions.width"}}, `{"_id":"a","task":{"stage":"s"},"renditions":[{"width":1}]}`},
		{"include whole and dotted", sources.Projection{Fields: []string{"task", "task.stage"}}, `{"_id":"a","task":{"desk":"d","stage":"s"}}`},
		{"include missing", sources.Projection{Fields: []string{"nope"}}, `{"_id":"a"}`},
		{"exclude", sources.Projection{Fields: []string{"body_html", "task.desk", "renditions.href"}, Exclude: true},
			`{"_id":"a","headline":"h","task":{"stage":"s"},"renditions":[{"width":1},{}]}`},
	} {
		d := doc()
		tc.p.Apply(d)
		if got := string(codec.AppendJSON(nil, d)); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}

// A client's projection works inside the resource's own: through any
// projection, on a list or a detail, no field outside it comes back;
// without one a list keeps every field, as the original's lists do.
func TestQueryProject(t *testing.T) {
	items, _ := sources.ResourceByName("items")
	contacts, _ := sources.ResourceByName("contacts")
	desks, _ := sources.ResourceByName("desks")
	search := func(body string) *sources.Doc {
		v, err := codec.DecodeJSON([]byte(body), codec.DecodeOptions{Strict: true})
		if err != nil {
			t.Fatal(err)
		}
		return v.(*sources.Doc)
	}
	incl := func(f ...string) sources.Projection { return sources.Projection{Fields: f} }
	excl := func(f ...string) sources.Projection { return sources.Projection{Fields: f, Exclude: true} }
	for _, tc := range []struct {
		name string
		q    sources.Query
		doc  string
		want string
	}{
		{"items list, no projection: every field", sources.Query{Resource: items},
			`{"_id":"a","headline":"h","state":"s","force_unlock":true}`, `{"_id":"a","headline":"h","state":"s","force_unlock":true}`},
		{"items list, inclusion naming an outside field", sources.Query{Resource: items, Fields: incl("force_unlock", "headline")},
			`{"_id":"a","headline":"h","state":"s","force_unlock":true}`, `{"_id":"a","headline":"h"}`},
		{"items list, inclusion of an outside field alone", sources.Query{Resource: items, Fields: incl("force_unlock")},
			`{"_id":"a","headline":"h","force_unlock":true}`, `{"_id":"a"}`},
		{"items list, inclusion inside an outside field", sources.Query{Resource: items, Fields: incl("x.secret")},
			`{"_id":"a","x":{"secret":1}}`, `{"_id":"a"}`},
		{"items list, exclusion", sources.Query{Resource: items, Fields: excl("state")},
			`{"_id":"a","headline":"h","state":"s","force_unlock":true,"x":{"secret":1}}`, `{"_id":"a","headline":"h"}`},
		{"items list, dotted exclusion", sources.Query{Resource: items, Fields: excl("task.desk")},
			`{"_id":"a","task":{"desk":"d","stage":"s"},"force_unlock":true}`, `{"_id":"a","task":{"stage":"s"}}`},
		{"items list, _source includes", sources.Query{Resource: items, Search: search(`{"_source":{"includes":["force_unlock","headline"]}}`)},
			`{"_id":"a","headline":"h","force_unlock":true}`, `{"_id":"a","headline":"h"}`},
		{"items list, _source excludes", sources.Query{Resource: items, Search: search(`{"_source":{"excludes":["headline"]}}`)},
			`{"_id":"a","state":"s","force_unlock":true}`, `{"_id":"a","state":"s"}`},
		{"items list, search without _source: every field", sources.Query{Resource: items, Search: search(`{"query":{"match_all":{}}}`)},
			`{"_id":"a","headline":"h","force_unlock":true}`, `{"_id":"a","headline":"h","force_unlock":true}`},
		{"items detail, inclusion naming an outside field", sources.Query{Resource: items, ID: "a", Fields: incl("force_unlock", "headline")},
			`{"_id":"a","headline":"h","force_unlock":true}`, `{"_id":"a","headline":"h"}`},
		{"items detail, exclusion", sources.Query{Resource: items, ID: "a", Fields: excl("headline")},
			`{"_id":"a","headline":"h","state":"s","force_unlock":true}`, `{"_id":"a","state":"s"}`},
		{"contacts list, inclusion naming an outside field", sources.Query{Resource: contacts, Fields: incl("last_name", "x")},
			`{"_id":"c","last_name":"l","x":1}`, `{"_id":"c","last_name":"l"}`},
		{"contacts list, exclusion", sources.Query{Resource: contacts, Fields: excl("notes")},
			`{"_id":"c","last_name":"l","notes":"n","fields_meta":{}}`, `{"_id":"c","last_name":"l"}`},
		{"contacts detail, exclusion", sources.Query{Resource: contacts, ID: "c", Fields: excl("notes")},
			`{"_id":"c","last_name":"l","notes":"n","x":1}`, `{"_id":"c","last_name":"l"}`},
		{"a resource without a projection: the client's alone", sources.Query{Resource: desks, Fields: excl("name")},
			`{"_id":"d","name":"n","x":1}`, `{"_id":"d","x":1}`},
	} {
		v, err := codec.DecodeJSON([]byte(tc.doc), codec.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		d := v.(*sources.Doc)
		tc.q.Project(d)
		if got := string(codec.AppendJSON(nil, d)); got != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.name, got, tc.want)
		}
	}
}
