package sourcestest

import (
	"maps"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources/grammar"
)

func TestFixtures(t *testing.T) {
	fx, err := Fixtures(Dir())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for c, docs := range fx {
		got[c] = len(docs)
		for i, d := range docs {
			if !d.Has("_id") {
				t.Errorf("%s[%d] has no _id", c, i)
			}
		}
	}
	want := map[string]int{"archive": 6, "desks": 4, "users": 3, "contacts": 5, "planning": 3, "events": 4,
		"events_files": 2, "events_history": 3, "assignments": 4, "content_types": 3}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("counts (-got +want):\n%s", diff)
	}
	if _, err := Fixtures(t.TempDir()); err != nil {
		t.Errorf("Fixtures of an empty directory: %v", err)
	}
}

// Every operator and query type the API accepts (grammar's table) has a
// contract case, and the cases use nothing the API would refuse: a new
// operator arrives with a case, or this fails. The legacy query forms the
// server rewrites into bool never reach a store and need none.
func TestCasesCoverGrammar(t *testing.T) {
	c, err := cover()
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range grammar.MongoOps() {
		if len(c.ops[op.Name]) == 0 {
			t.Errorf("no FindDocuments case uses %s", op.Name)
		}
	}
	for op, cases := range c.ops {
		if _, ok := grammar.MongoOp(op); !ok {
			t.Errorf("%v use %s, which the API refuses", cases, op)
		}
	}
	for _, qt := range grammar.QueryTypes() {
		if !qt.Bool && len(c.queries[qt.Name]) == 0 {
			t.Errorf("no FindSearch case uses the %s query", qt.Name)
		}
	}
	for q, cases := range c.queries {
		if qt, ok := grammar.QueryTypeByName(q); !ok || qt.Bool {
			t.Errorf("%v use the %s query, which no backend receives", cases, q)
		}
	}
	for _, at := range grammar.AggTypes() {
		if len(c.aggs[at.Name]) == 0 {
			t.Errorf("no FindSearch case uses the %s aggregation", at.Name)
		}
	}
	for a, cases := range c.aggs {
		if !slices.ContainsFunc(grammar.AggTypes(), func(at grammar.AggType) bool { return at.Name == a }) {
			t.Errorf("%v use the %s aggregation, which the API refuses", cases, a)
		}
	}
}

// The coverage walk finds what it is shown, so the test above can fail.
func TestCover(t *testing.T) {
	c, err := cover()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		got  []string
		want string
	}{
		{c.ops["$nearSphere"], "FindDocuments/$nearSphere $maxDistance"},
		{c.ops["$geometry"], "FindDocuments/$geoIntersects"},
		{c.queries["term"], "FindSearch/nested coverages"},
		{c.queries["exists"], "FindSearch/must_not exists"},
		{c.queries["term"], "FindSearch/dis_max"},
		{c.aggs["terms"], "FindSearch/sub-aggregation"},
	} {
		if !slices.Contains(tc.got, tc.want) {
			t.Errorf("coverage misses %s: %v", tc.want, tc.got)
		}
	}
	if n := len(c.queries["query"]); n != 0 {
		t.Errorf("the body's query key counted as a query type %d times", n)
	}
}

// Case names are unique, so Options.Skip names exactly one case.
func TestCaseNames(t *testing.T) {
	names := CaseNames()
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("two cases named %q", n)
		}
		seen[n] = true
	}
	if len(names) < 100 {
		t.Errorf("%d cases, want the whole suite", len(names))
	}
	if got := unknownSkips(map[string]string{"FindDocuments/$eq": "x", "FindDocuments/$nope": "y"}); !slices.Equal(got, []string{"FindDocuments/$nope"}) {
		t.Errorf("unknownSkips = %q", got)
	}
}

// A skipped case never runs (its subtest reports the reason); the others
// run.
func TestSkip(t *testing.T) {
	s := &suite{skip: map[string]string{"G/skipped": "a known gap"}}
	ran := map[string]bool{}
	for _, name := range []string{"skipped", "kept"} {
		s.run(t, "G", name, func(t *testing.T) { ran[name] = true })
	}
	if !maps.Equal(ran, map[string]bool{"kept": true}) {
		t.Errorf("ran = %v, want only kept", ran)
	}
}
