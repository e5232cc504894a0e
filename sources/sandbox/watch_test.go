package sandbox_test

import (
	"context"
	"errors"
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
