package feed_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/cache/feed"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/testkit"
)

// chanWatcher reports what the test sends it, one report at a time: send
// returns once the report is applied and queued.
type chanWatcher struct {
	reports chan []sources.Change
	queued  chan struct{}
}

func newChanWatcher() *chanWatcher {
	return &chanWatcher{reports: make(chan []sources.Change), queued: make(chan struct{})}
}

func (w *chanWatcher) Run(ctx context.Context, report func(context.Context, []sources.Change)) error {
	for {
		select {
		case cs, ok := <-w.reports:
			if !ok {
				return nil
			}
			report(ctx, cs)
			w.queued <- struct{}{}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (w *chanWatcher) send(cs ...sources.Change) {
	w.reports <- cs
	<-w.queued
}

// scriptedLog hands every Append to the test (calls) and returns what the
// test replies.
type scriptedLog struct {
	calls   chan appendCall
	replies chan error
}

type appendCall struct {
	source  string
	changes []sources.Change
}

func newScriptedLog() *scriptedLog {
	return &scriptedLog{calls: make(chan appendCall), replies: make(chan error)}
}

func (l *scriptedLog) Append(ctx context.Context, source string, cs []sources.Change) error {
	select {
	case l.calls <- appendCall{source, slices.Clone(cs)}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-l.replies:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// call waits for the next Append and returns what it was given; the test
// then replies.
func (l *scriptedLog) call(t *testing.T) []string {
	t.Helper()
	select {
	case c := <-l.calls:
		if c.source != "sandbox" {
			t.Errorf("appended from %q, want sandbox", c.source)
		}
		return versions(c.changes)
	case <-time.After(time.Minute):
		t.Fatal("no append within a minute")
		return nil
	}
}

// next waits for the next Append, answers it with err and returns what
// it was given.
func (l *scriptedLog) next(t *testing.T, err error) []string {
	t.Helper()
	got := l.call(t)
	l.replies <- err
	return got
}

func edit(id, v string) sources.Change {
	return sources.Change{Collection: "archive", ID: id, Op: sources.OpUpdate, Version: v}
}

func (r *recorder) versions() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return versions(r.changes)
}

func versions(cs []sources.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.ID+"@"+c.Version)
	}
	return out
}

// count is how many times s was logged.
func count(logs *testkit.Buffer, s string) int { return strings.Count(logs.String(), s) }

// localFeed runs a Local feed of w over rec and log until the test ends;
// stop cancels it and returns Run's error.
func localFeed(t *testing.T, w feed.Watcher, rec feed.Applier, log feed.Log, opts feed.LocalOptions) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- feed.NewLocal(w, rec, log, opts).Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				err = errors.New("Run did not return")
			}
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

var errDown = errors.New("redis: connection refused")

// An append that fails is retried, first and whole, until it succeeds;
// what the watcher reports meanwhile is applied to the cache at once and
// appended after it, in order. The outage is logged once, however many
// retries it takes.
func TestLocalRetriesInOrder(t *testing.T) {
	w, rec, log := newChanWatcher(), &recorder{}, newScriptedLog()
	var logs testkit.Buffer
	localFeed(t, w, rec, log, feed.LocalOptions{Pause: time.Millisecond, MaxPause: time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})

	w.send(edit("a", "1"))
	if got, want := log.next(t, errDown), []string{"a@1"}; !slices.Equal(got, want) {
		t.Fatalf("first append %v, want %v", got, want)
	}
	// The retry is under way: b and a's next version queue behind it, in
	// the cache already.
	if got, want := log.call(t), []string{"a@1"}; !slices.Equal(got, want) {
		t.Errorf("retry %v, want %v", got, want)
	}
	w.send(edit("b", "1"))
	w.send(edit("a", "2"))
	if got := rec.versions(); !slices.Equal(got, []string{"a@1", "b@1", "a@2"}) {
		t.Errorf("applied %v, want every report at once", got)
	}
	log.replies <- errDown
	for range 3 {
		if diff := cmp.Diff(log.next(t, errDown), []string{"a@1", "b@1", "a@2"}); diff != "" {
			t.Fatalf("retry (-got +want):\n%s", diff)
		}
	}
	if diff := cmp.Diff(log.next(t, nil), []string{"a@1", "b@1", "a@2"}); diff != "" {
		t.Fatalf("the append that succeeded (-got +want):\n%s", diff)
	}
	w.send(edit("c", "1"))
	if diff := cmp.Diff(log.next(t, nil), []string{"c@1"}); diff != "" {
		t.Errorf("after the outage (-got +want):\n%s", diff)
	}
	if n := count(&logs, "appending to the change log failed"); n != 1 {
		t.Errorf("the outage was logged %d times, want once:\n%s", n, logs.String())
	}
	if n := count(&logs, "takes appends again"); n != 1 {
		t.Errorf("the recovery was logged %d times, want once", n)
	}
}

// Past MaxQueue changes behind a failing append, the queue keeps each
// document's newest change, in the order of those changes; the batch
// being appended stays first.
func TestLocalCoalesces(t *testing.T) {
	w, rec, log := newChanWatcher(), &recorder{}, newScriptedLog()
	localFeed(t, w, rec, log, feed.LocalOptions{Pause: time.Millisecond, MaxPause: time.Millisecond, MaxQueue: 4})
	w.send(edit("x", "0"))
	if got := log.call(t); !slices.Equal(got, []string{"x@0"}) { // held until the reports below are queued
		t.Fatalf("first append %v", got)
	}
	// Six changes: past 4, the queue keeps b@1 c@1 a@3; then b@2.
	for _, ch := range []sources.Change{edit("a", "1"), edit("b", "1"), edit("a", "2"), edit("c", "1"), edit("a", "3"), edit("b", "2")} {
		w.send(ch)
	}
	log.replies <- errDown
	if diff := cmp.Diff(log.next(t, nil), []string{"x@0", "b@1", "c@1", "a@3", "b@2"}); diff != "" {
		t.Errorf("after the outage (-got +want):\n%s", diff)
	}
	if got := rec.versions(); len(got) != 7 {
		t.Errorf("applied %v, want every change", got)
	}
}

// A watcher that ends leaves Run waiting until what it reported is in
// the log; a Run stopped with changes still queued says so.
func TestLocalEnds(t *testing.T) {
	t.Run("watcher ends", func(t *testing.T) {
		w, log := newChanWatcher(), newScriptedLog()
		stop := localFeed(t, w, &recorder{}, log, feed.LocalOptions{Pause: time.Millisecond, MaxPause: time.Millisecond})
		w.send(edit("a", "1"))
		close(w.reports)
		log.next(t, errDown)
		if got := log.next(t, nil); !slices.Equal(got, []string{"a@1"}) {
			t.Errorf("after the watcher ended: %v", got)
		}
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	t.Run("stopped during an outage", func(t *testing.T) {
		w, log := newChanWatcher(), newScriptedLog()
		var logs testkit.Buffer
		stop := localFeed(t, w, &recorder{}, log, feed.LocalOptions{Pause: time.Hour,
			Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		w.send(edit("a", "1"))
		log.next(t, errDown)
		if err := stop(); !errors.Is(err, context.Canceled) {
			t.Errorf("Run: %v, want context.Canceled", err)
		}
		if count(&logs, "stopping with changes not in the change log") != 1 {
			t.Errorf("nothing said of the change left:\n%s", logs.String())
		}
	})
}
