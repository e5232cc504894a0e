package mongo_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
)

type watched struct {
	change sources.Change
	token  []byte
}

// watch runs Watch in the background, sending what it emits; stop ends it
// and returns its error.
func watch(t *testing.T, e *env, token []byte) (<-chan watched, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan watched, 16)
	done := make(chan error, 1)
	go func() {
		done <- e.store.Watch(ctx, []string{"archive", "planning", "desks"}, token, func(c sources.Change, tok []byte) error {
			out <- watched{c, tok}
			return nil
		})
	}()
	var err error
	stopped := false
	stop := func() error {
		if !stopped {
			stopped = true
			cancel()
			err = <-done
		}
		return err
	}
	t.Cleanup(func() { stop() })
	return out, stop
}

// watching is a server with change streams holding seed, and a Watch
// from now on whose stream is open (its first getMore came): writes made
// after it returns are its events. The stream's start, which such a
// Watch emits first, is taken.
func watching(t *testing.T, seed map[string][]*sources.Doc) (*env, <-chan watched, func() error) {
	t.Helper()
	e, events, stop, _ := watchingFromStart(t, seed)
	return e, events, stop
}

// watchingFromStart is watching, and the stream's start it emitted: the
// zero Change with its token.
func watchingFromStart(t *testing.T, seed map[string][]*sources.Doc) (*env, <-chan watched, func() error, watched) {
	t.Helper()
	e := newEnv(t, seed, mongosrc.Options{})
	e.srv.EnableChangeStreams()
	events, stop := watch(t, e, nil)
	start := next(t, events)
	if err := e.srv.WaitCommand(context.Background(), "getMore"); err != nil {
		t.Fatal(err)
	}
	return e, events, stop, start
}

func next(t *testing.T, ch <-chan watched) watched {
	t.Helper()
	select {
	case w := <-ch:
		return w
	case <-time.After(30 * time.Second):
		t.Fatal("no change event")
	}
	return watched{}
}

// Through the real driver: events, their resume tokens, and a restart
// that resumes after the last token it kept.
func TestWatchResumes(t *testing.T) {
	// The stream opens at "now": write once it is open.
	e, events, stop := watching(t, nil)
	e.srv.Change("archive", "update", "a")
	e.srv.Change("planning", "delete", "p1")
	first, second := next(t, events), next(t, events)
	if first.change.Collection != "archive" || first.change.ID != "a" || first.change.Op != sources.OpUpdate || first.change.At.IsZero() {
		t.Errorf("first event %+v", first.change)
	}
	if second.change.Collection != "planning" || second.change.ID != "p1" || second.change.Op != sources.OpDelete {
		t.Errorf("second event %+v", second.change)
	}
	if len(first.token) == 0 {
		t.Fatal("no resume token")
	}
	if err := stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Watch after cancel: %v", err)
	}

	// Writes while nobody watched; resuming after the first event
	// delivers the second again, then those.
	e.srv.Change("archive", "insert", "b")
	events, _ = watch(t, e, first.token)
	for i, want := range []string{"delete p1", "insert b"} {
		w := next(t, events)
		if got := w.change.Op + " " + w.change.ID; got != want {
			t.Errorf("resumed: %s, want %s", got, want)
		}
		// The event reported again has the version it had: the change
		// log appends it once.
		if i == 0 && w.change.Version != second.change.Version {
			t.Errorf("the second event resumed: version %q, first reported as %q", w.change.Version, second.change.Version)
		}
	}
	if first.change.Version == "" || first.change.Version == second.change.Version {
		t.Errorf("versions %q and %q: want two", first.change.Version, second.change.Version)
	}
	// Ids and operation types only: no full documents asked for.
	for _, c := range e.srv.Named("aggregate") {
		raw := string(c.Raw)
		if strings.Contains(raw, "updateLookup") || strings.Contains(raw, "fullDocumentBeforeChange") {
			t.Errorf("the stream asks for documents: %v", c.Body)
		}
		if !strings.Contains(raw, "$project") {
			t.Errorf("the stream does not project: %v", c.Body)
		}
	}
}

// Started from no token, a Watch first emits the zero Change with the
// token of its stream's start; a Watch resumed from that token reports
// what was written after the start, even when nothing else was kept.
func TestWatchEmitsItsStart(t *testing.T) {
	e, events, stop, start := watchingFromStart(t, nil)
	if start.change != (sources.Change{}) || len(start.token) == 0 {
		t.Fatalf("the first emit: %+v with token %q, want the zero Change with the start's token", start.change, start.token)
	}
	e.srv.Change("archive", "insert", "a")
	if w := next(t, events); w.change.Op+" "+w.change.ID != "insert a" {
		t.Errorf("the event after the start: %+v", w.change)
	}
	stop()
	// As if the event had failed: resumed from the start, it comes again,
	// and nothing of the start is emitted.
	events, _ = watch(t, e, start.token)
	if w := next(t, events); w.change.Op+" "+w.change.ID != "insert a" {
		t.Errorf("resumed from the start: %+v, want insert a", w.change)
	}
}

func TestWatchHistoryLost(t *testing.T) {
	e, events, stop := watching(t, nil)
	e.srv.Change("archive", "update", "a")
	w := next(t, events)
	stop()
	e.srv.TruncateChanges()
	err := e.store.Watch(context.Background(), []string{"archive"}, w.token, func(sources.Change, []byte) error { return nil })
	if !errors.Is(err, mongosrc.ErrHistoryLost) {
		t.Errorf("resuming before the oplog's start: %v, want ErrHistoryLost", err)
	}
}

func TestWatchStandalone(t *testing.T) {
	e := newEnv(t, nil, mongosrc.Options{})
	err := e.store.Watch(context.Background(), []string{"archive"}, nil, func(sources.Change, []byte) error { return nil })
	if !errors.Is(err, mongosrc.ErrNoChangeStreams) {
		t.Errorf("a standalone server: %v, want ErrNoChangeStreams", err)
	}
}

// The fake's Replace is a write: the document changes and the stream
// reports it.
func TestWatchReplace(t *testing.T) {
	e, events, _ := watching(t, map[string][]*sources.Doc{"desks": {sources.D("_id", "d1", "name", "Sport")}})
	if err := e.srv.Replace("desks", sources.D("_id", "d1", "name", "Sports")); err != nil {
		t.Fatal(err)
	}
	if err := e.srv.Replace("desks", sources.D("_id", "d2", "name", "News")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"replace d1", "insert d2"} {
		if w := next(t, events); w.change.Op+" "+w.change.ID != want || w.change.Collection != "desks" {
			t.Errorf("event %+v, want %s", w.change, want)
		}
	}
	desks, _ := sources.ResourceByName("desks")
	d, err := e.store.Get(context.Background(), desks, "d1")
	if err != nil {
		t.Fatal(err)
	}
	if name, _ := d.String("name"); name != "Sports" {
		t.Errorf("d1 after Replace: %q", name)
	}
}
