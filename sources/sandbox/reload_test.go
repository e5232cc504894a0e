package sandbox

import (
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A reload keeps what did not change: a collection whose documents are
// all as they were (its orders with it), and the text of each document
// that is, whatever moved around it. It reports the rest.
func TestReloadKeepsUnchanged(t *testing.T) {
	files := fstest.MapFS{
		"desks.json":   {Data: []byte(`[{"_id": "d1", "name": "Arts"}, {"_id": "d2", "name": "Sport"}]`)},
		"archive.json": {Data: []byte(`[{"_id": "a", "headline": "one"}, {"_id": "b", "headline": "two"}, {"_id": "c", "headline": "three"}]`)},
	}
	prev, err := Load(files, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// b rewritten; a reformatted (same document, other text); c moved
	// first; d new. desks.json written again, the same.
	files["archive.json"] = &fstest.MapFile{Data: []byte(`[{"_id": "c", "headline": "three"}, {"_id":"a","headline":"one"}, {"_id": "b", "headline": "TWO"}, {"_id": "d"}]`)}
	next, err := load(files, Options{}, prev)
	if err != nil {
		t.Fatal(err)
	}
	if next.colls["desks"] != prev.colls["desks"] || next.colls["users"] != prev.colls["users"] {
		t.Error("unchanged collections were not kept")
	}
	old, cur := prev.colls["archive"], next.colls["archive"]
	if cur == old {
		t.Fatal("the changed collection was kept")
	}
	kept := map[string]bool{}
	for i, d := range cur.docs {
		j, ok := old.ids[d.id]
		kept[d.id.String()] = ok && old.docs[j].text == cur.docs[i].text
	}
	if diff := cmp.Diff(kept, map[string]bool{"a": false, "b": false, "c": true, "d": false}); diff != "" {
		t.Errorf("texts kept (-got +want):\n%s", diff)
	}
	var got []string
	for _, c := range diff(prev, next, time.Now()) {
		got = append(got, c.Op+" "+c.Collection+"/"+c.ID)
	}
	slices.Sort(got)
	if diff := cmp.Diff(got, []string{"insert archive/d", "update archive/b"}); diff != "" {
		t.Errorf("changes (-got +want):\n%s", diff)
	}
}
