package server

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// A TestChangeLog is an in-memory ChangeLog for tests (exported for the
// server_test package's): entries at positions 1, 2..., whose tokens read
// "<position>-0"; "0-0" is the position before the first. Trim drops the
// oldest, as the real log's retention does.
type TestChangeLog struct {
	mu      sync.Mutex
	entries []sources.LogEntry // every entry appended; those after trimmed are kept
	trimmed int                // entries up to this position are gone
	err     error              // Read fails with it when set
	reads   [][]string         // the resources of every Read
	grew    chan struct{}      // closed and replaced on every Append
	waiting chan struct{}      // gets a value whenever a Wait starts blocking
}

func NewTestChangeLog() *TestChangeLog {
	return &TestChangeLog{grew: make(chan struct{}), waiting: make(chan struct{}, 1)}
}

func logToken(n int) string { return strconv.Itoa(n) + "-0" }

func logPosition(tok string) (int, bool) {
	s, ok := strings.CutSuffix(tok, "-0")
	n, err := strconv.Atoi(s)
	return n, ok && err == nil && n >= 0 && strconv.Itoa(n) == s
}

// Append adds a change and returns its token.
func (l *TestChangeLog) Append(resource, id, op string, at time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	tok := logToken(len(l.entries) + 1)
	l.entries = append(l.entries, sources.LogEntry{Token: tok, Resource: resource, ID: id, Op: op, At: at})
	close(l.grew)
	l.grew = make(chan struct{})
	return tok
}

// Trim drops the entries up to and including position n.
func (l *TestChangeLog) Trim(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trimmed = n
}

// Fail makes every Read fail with err (nil: succeed again).
func (l *TestChangeLog) Fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.err = err
}

// Reads returns the resources every Read was given.
func (l *TestChangeLog) Reads() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reads)
}

// AwaitWaiter returns once some Wait is blocked on the log.
func (l *TestChangeLog) AwaitWaiter(t *testing.T) {
	t.Helper()
	select {
	case <-l.waiting:
	case <-time.After(time.Minute):
		t.Fatal("nobody waited on the change log")
	}
}

func (l *TestChangeLog) Valid(tok string) bool {
	_, ok := logPosition(tok)
	return ok
}

func (l *TestChangeLog) Read(ctx context.Context, since string, resources []string, max int) ([]sources.LogEntry, string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads = append(l.reads, slices.Clone(resources))
	if l.err != nil {
		return nil, "", l.err
	}
	if resources == nil || max < 1 {
		return nil, "", fmt.Errorf("test log: Read(%q, %v, %d): resources nil or max < 1", since, resources, max)
	}
	from, next := l.trimmed, logToken(l.trimmed)
	switch since {
	case "":
	case "now":
		return nil, logToken(len(l.entries)), nil
	default:
		n, ok := logPosition(since)
		switch {
		case !ok:
			return nil, "", fmt.Errorf("test log: %q: %w", since, sources.ErrInvalid)
		case n < l.trimmed:
			return nil, "", fmt.Errorf("test log: %q: %w", since, sources.ErrExpired)
		}
		from, next = min(n, len(l.entries)), since
	}
	var out []sources.LogEntry
	for _, e := range l.entries[from:] {
		if len(out) == max {
			break
		}
		next = e.Token
		if slices.Contains(resources, e.Resource) {
			out = append(out, e)
		}
	}
	return out, next, nil
}

func (l *TestChangeLog) Wait(ctx context.Context, since string) error {
	for {
		l.mu.Lock()
		n, ok := logPosition(since)
		if !ok {
			n = l.trimmed
		}
		if since == "now" {
			n = len(l.entries)
		}
		has, grew := len(l.entries) > n, l.grew
		l.mu.Unlock()
		if has {
			return nil
		}
		select {
		case l.waiting <- struct{}{}:
		default:
		}
		select {
		case <-grew:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fakeTimers is the streams' clock in tests: afterFunc registers a timer,
// and fire runs one, as if its time had come.
type fakeTimers struct {
	mu      sync.Mutex
	pending map[*fakeTimer]bool
	added   chan struct{} // gets a value on every afterFunc
}

type fakeTimer struct {
	d time.Duration
	f func()
}

func newFakeTimers() *fakeTimers {
	return &fakeTimers{pending: map[*fakeTimer]bool{}, added: make(chan struct{}, 1)}
}

func (ft *fakeTimers) afterFunc(d time.Duration, f func()) func() bool {
	t := &fakeTimer{d: d, f: f}
	ft.mu.Lock()
	ft.pending[t] = true
	ft.mu.Unlock()
	select {
	case ft.added <- struct{}{}:
	default:
	}
	return func() bool {
		ft.mu.Lock()
		defer ft.mu.Unlock()
		was := ft.pending[t]
		delete(ft.pending, t)
		return was
	}
}

// fire waits for a pending timer of d, and runs it.
func (ft *fakeTimers) fire(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		ft.mu.Lock()
		var due *fakeTimer
		for p := range ft.pending {
			if p.d == d {
				due = p
				break
			}
		}
		delete(ft.pending, due)
		ft.mu.Unlock()
		if due != nil {
			due.f()
			return
		}
		select {
		case <-ft.added:
		case <-deadline:
			t.Fatalf("no timer of %s was set", d)
		}
	}
}
