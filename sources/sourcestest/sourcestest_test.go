package sourcestest

import (
	"testing"

	"github.com/google/go-cmp/cmp"
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
