package sandbox_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// replace writes a collection file the way editors save: a new file
// renamed over the old one.
func replace(t *testing.T, dir, name, content string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func changeKeys(cs []sources.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Op+" "+c.Collection+"/"+c.ID)
	}
	slices.Sort(out)
	return out
}

func TestLiveReportsChangedDocuments(t *testing.T) {
	dir := t.TempDir()
	replace(t, dir, "archive.json", `[{"_id":"a","headline":"one"},{"_id":"b","headline":"two"}]`)
	l, err := sandbox.OpenLive(dir, sandbox.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan []sources.Change, 8)
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx, func(_ context.Context, cs []sources.Change) { got <- cs }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v", err)
		}
		l.Close()
	})
	items, _ := sources.ResourceByName("items")

	// a is corrected, b deleted, c published; the same file replaced.
	replace(t, dir, "archive.json", `[{"_id":"a","headline":"ONE"},{"_id":"c","headline":"three"}]`)
	var cs []sources.Change
	select {
	case cs = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("no changes after the file was replaced")
	}
	if want := []string{"delete archive/b", "insert archive/c", "update archive/a"}; !slices.Equal(changeKeys(cs), want) {
		t.Errorf("changes %q, want %q", changeKeys(cs), want)
	}
	d, err := l.Get(ctx, items, "a")
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := d.String("headline"); h != "ONE" {
		t.Errorf("a's headline %q after the reload", h)
	}
	if _, err := l.Get(ctx, items, "b"); !errors.Is(err, sources.ErrNotFound) {
		t.Errorf("b after its deletion: %v", err)
	}

	// A file that does not parse changes nothing: the previous documents
	// stay until it is fixed.
	replace(t, dir, "archive.json", `[{"_id":"a","headline":`)
	replace(t, dir, "archive.json", `[{"_id":"a","headline":"ONE"},{"_id":"c","headline":"three"}]`)
	replace(t, dir, "desks.json", `[{"_id":"d1","name":"Sport"}]`)
	select {
	case cs = <-got:
	case <-time.After(30 * time.Second):
		t.Fatal("no changes after the desks were written")
	}
	if want := []string{"insert desks/d1"}; !slices.Equal(changeKeys(cs), want) {
		t.Errorf("changes %q, want %q", changeKeys(cs), want)
	}
	if d, _ := l.Get(ctx, items, "a"); d == nil {
		t.Error("a broken file dropped the previous documents")
	}
}

// Two replicas watching one directory report an edit with the same
// Version, whatever they saw before it; another edit has another, a
// deletion "deleted".
func TestLiveVersions(t *testing.T) {
	dir := t.TempDir()
	replace(t, dir, "archive.json", `[{"_id":"a","headline":"one"},{"_id":"b","headline":"two"}]`)
	open := func() *sandbox.Live {
		l, err := sandbox.OpenLive(dir, sandbox.Options{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	a, b := open(), open()
	versions := func(l *sandbox.Live) map[string]string {
		t.Helper()
		cs, err := l.Reload()
		if err != nil {
			t.Fatal(err)
		}
		v := map[string]string{}
		for _, c := range cs {
			if c.Version == "" {
				t.Errorf("%s %s/%s without a version", c.Op, c.Collection, c.ID)
			}
			v[c.Op+" "+c.ID] = c.Version
		}
		return v
	}
	// b reads an edit a does not: two edits of a are one change to a.
	replace(t, dir, "archive.json", `[{"_id":"a","headline":"ONE"},{"_id":"b","headline":"two"}]`)
	first := versions(b)
	replace(t, dir, "archive.json", `[{"_id":"a","headline":"One"},{"_id":"c","headline":"three"}]`)
	va, vb := versions(a), versions(b)
	if !maps.Equal(va, vb) || len(va) != 3 {
		t.Errorf("a reports %v, b %v: want the same three", va, vb)
	}
	if first["update a"] == va["update a"] || va["delete b"] != "deleted" || va["insert c"] == "" {
		t.Errorf("versions: first edit %v, then %v", first, va)
	}
	// Undone: a's content is what it was after the first edit again.
	replace(t, dir, "archive.json", `[{"_id":"a","headline":"ONE"},{"_id":"c","headline":"three"}]`)
	if v := versions(a); v["update a"] != first["update a"] {
		t.Errorf("the first edit's content again: version %q, want %q", v["update a"], first["update a"])
	}
}
