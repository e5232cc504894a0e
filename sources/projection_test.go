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
