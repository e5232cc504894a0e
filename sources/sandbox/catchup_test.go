package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/testkit"
)

// writeDir writes collection files into a new directory.
func writeDir(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// logEntries are changes as the change log hands them over.
func logEntries(changes []sources.Change) []sources.LogEntry {
	var out []sources.LogEntry
	for _, ch := range changes {
		for _, r := range sources.ResourcesOf(ch.Collection) {
			out = append(out, sources.LogEntry{Resource: r.Name, ID: ch.ID, Op: ch.Op, Version: ch.Version})
		}
	}
	return out
}

// A replica whose view is behind the log's entries (another replica's
// watcher saw an edit first) reloads once, through Run, so that the
// reload's changes are reported as any other's, and serves the entries'
// versions when CatchUp returns; one that is not behind does nothing.
func TestLiveCatchUp(t *testing.T) {
	const before = `[{"_id":"a","headline":"one"},{"_id":"b","headline":"two"}]`
	dir := writeDir(t, map[string]string{"archive.json": `[{"_id":"a","headline":"ONE"},{"_id":"c","headline":"three"}]`})
	old, err := Load(os.DirFS(writeDir(t, map[string]string{"archive.json": before})), Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := OpenLive(dir, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	// The entries of the edit, as the other replica appended them.
	entries := logEntries(diff(old, l.cur.Load(), time.Now()))
	if len(entries) != 3 {
		t.Fatalf("entries %+v", entries)
	}
	ctx := t.Context()
	if err := l.CatchUp(ctx, entries); err != nil {
		t.Errorf("a view that has the entries' versions: %v", err)
	}
	// This replica has not seen the edit yet, and Run has not started:
	// CatchUp waits for it, until its context ends.
	l.cur.Store(old)
	early, cancel := context.WithCancel(ctx)
	cancel()
	if err := l.CatchUp(early, entries); !errors.Is(err, context.Canceled) {
		t.Errorf("behind, before Run starts: %v, want the context's end", err)
	}

	// Catch-ups asked before Run starts (the follower's, at start) wait
	// for it, then share its reload with those asked after.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 2 {
		wg.Go(func() { errs <- l.CatchUp(ctx, entries) })
	}
	var mu sync.Mutex
	var reported []sources.Change
	runCtx, stop := context.WithCancel(ctx)
	ran := make(chan error, 1)
	go func() { // ends with stop
		ran <- l.Run(runCtx, func(_ context.Context, cs []sources.Change) {
			mu.Lock()
			defer mu.Unlock()
			reported = append(reported, cs...)
		})
	}()
	testkit.Eventually(t, "Run running", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.running
	})
	for range 2 {
		wg.Go(func() { errs <- l.CatchUp(ctx, entries) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("CatchUp: %v", err)
		}
	}
	items, _ := sources.ResourceByName("items")
	if d, err := l.Get(ctx, items, "a"); err != nil || d == nil {
		t.Fatalf("a after the catch-up: %v", err)
	} else if h, _ := d.String("headline"); h != "ONE" {
		t.Errorf("a's headline %q after the catch-up, want ONE", h)
	}
	if _, err := l.Get(ctx, items, "b"); !errors.Is(err, sources.ErrNotFound) {
		t.Errorf("b after the catch-up: %v, want deleted", err)
	}
	mu.Lock()
	var keys []string
	for _, c := range reported {
		keys = append(keys, c.Op+" "+c.ID)
	}
	mu.Unlock()
	slices.Sort(keys)
	// Reported once (a second reload, if any, found nothing new).
	if want := []string{"delete b", "insert c", "update a"}; !slices.Equal(keys, want) {
		t.Errorf("reported %q, want %q", keys, want)
	}

	// A flush has no version to compare: a reload. One that fails is
	// the caller's error (it retries).
	if err := os.WriteFile(filepath.Join(dir, "archive.json"), []byte(`[{"_id":`), 0o644); err != nil {
		t.Fatal(err)
	}
	flush := []sources.LogEntry{{Resource: "items", Op: sources.OpFlush}}
	if err := l.CatchUp(ctx, flush); err == nil {
		t.Error("a reload of a broken file: no error")
	}
	if err := os.WriteFile(filepath.Join(dir, "archive.json"), []byte(`[{"_id":"a","headline":"ONE"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := l.CatchUp(ctx, flush); err != nil {
		t.Errorf("a flush: %v", err)
	}
	if _, err := l.Get(ctx, items, "c"); !errors.Is(err, sources.ErrNotFound) {
		t.Errorf("c after the flush's reload: %v, want deleted", err)
	}
	stop()
	if err := <-ran; !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}
	if err := l.CatchUp(ctx, flush); !errors.Is(err, errNotWatching) {
		t.Errorf("after Run: %v, want errNotWatching", err)
	}
}
