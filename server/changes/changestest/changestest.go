// Package changestest is an in-memory change log for tests of the
// /changes feed and of what serves it: a changes.Log whose tokens read
// "<position>-0", which a test appends to, trims, fails, holds back from
// being applied and waits on.
package changestest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// A Log is an in-memory changes.Log: entries at positions 1, 2...,
// whose tokens read "<position>-0"; "0-0" is the position before the
// first. Trim drops the oldest, as the real log's retention does.
type Log struct {
	mu      sync.Mutex
	entries []sources.LogEntry // every entry appended; those after trimmed are kept
	trimmed int                // entries up to this position are gone
	applied int                // entries up to this position are applied; -1: every one
	err     error              // Read, Wait and WaitApplied fail with it when set
	reads   [][]string         // the resources of every Read
	grew    chan struct{}      // closed and replaced on every Append, Apply and Fail
	waiting chan struct{}      // gets a value whenever a Wait or WaitApplied starts blocking
}

// NewLog returns an empty log, which applies every entry as it is
// appended (until Hold).
func NewLog() *Log {
	return &Log{applied: -1, grew: make(chan struct{}), waiting: make(chan struct{}, 1)}
}

// Token is the token of position n.
func Token(n int) string { return strconv.Itoa(n) + "-0" }

// Position is the position of tok; ok is false when tok is no token.
func Position(tok string) (n int, ok bool) {
	s, ok := strings.CutSuffix(tok, "-0")
	n, err := strconv.Atoi(s)
	return n, ok && err == nil && n >= 0 && strconv.Itoa(n) == s
}

// Append adds a change and returns its token.
func (l *Log) Append(resource, id, op string, at time.Time) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	tok := Token(len(l.entries) + 1)
	l.entries = append(l.entries, sources.LogEntry{Token: tok, Resource: resource, ID: id, Op: op, At: at})
	l.moved()
	return tok
}

// moved wakes the waiters; l.mu is held.
func (l *Log) moved() {
	close(l.grew)
	l.grew = make(chan struct{})
}

// Hold stops applying entries: those appended from now on are not
// applied on this replica (WaitApplied waits) until Apply.
func (l *Log) Hold() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.applied < 0 {
		l.applied = len(l.entries)
	}
}

// Apply applies the entries up to position n, and stops holding them
// back once every entry is applied.
func (l *Log) Apply(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.applied = n
	if n >= len(l.entries) {
		l.applied = -1
	}
	l.moved()
}

// Trim drops the entries up to and including position n.
func (l *Log) Trim(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.trimmed = n
}

// Fail makes every Read, Wait and WaitApplied fail with err, wrapped in
// sources.ErrUnavailable when it wraps no error of the log's (nil:
// succeed again), and wakes the waiters: the log is down.
func (l *Log) Fail(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil && !errors.Is(err, sources.ErrInvalid) && !errors.Is(err, sources.ErrExpired) &&
		!errors.Is(err, sources.ErrUnavailable) {
		err = fmt.Errorf("%w: %w", sources.ErrUnavailable, err)
	}
	l.err = err
	l.moved()
}

// Reads returns the resources every Read was given.
func (l *Log) Reads() [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.reads)
}

// AwaitWaiter returns once some Wait is blocked on the log.
func (l *Log) AwaitWaiter(t testing.TB) {
	t.Helper()
	select {
	case <-l.waiting:
	case <-time.After(time.Minute):
		t.Fatal("nobody waited on the change log")
	}
}

// Valid reports whether tok is a token of the log.
func (l *Log) Valid(tok string) bool {
	_, ok := Position(tok)
	return ok
}

// Read reads the log as changes.Log.Read does, and remembers the
// resources it was given (Reads).
func (l *Log) Read(ctx context.Context, since string, resources []string, max int) ([]sources.LogEntry, string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads = append(l.reads, slices.Clone(resources))
	if l.err != nil {
		return nil, "", l.err
	}
	if resources == nil || max < 1 {
		return nil, "", fmt.Errorf("test log: Read(%q, %v, %d): resources nil or max < 1", since, resources, max)
	}
	from, next := l.trimmed, Token(l.trimmed)
	switch since {
	case "":
	case "now":
		return nil, Token(len(l.entries)), nil
	default:
		n, ok := Position(since)
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

// Wait waits as changes.Log.Wait does.
func (l *Log) Wait(ctx context.Context, since string) error {
	return l.await(ctx, func() (bool, error) {
		n, ok := Position(since)
		if !ok {
			n = l.trimmed
		}
		if since == "now" {
			n = len(l.entries)
		}
		return len(l.entries) > n, nil
	})
}

// WaitApplied waits as changes.Log.WaitApplied does: until every entry
// up to tok is applied (Hold, Apply); a position ahead of the log is
// sources.ErrExpired, as after a lost tail.
func (l *Log) WaitApplied(ctx context.Context, tok string) error {
	n, ok := Position(tok)
	if !ok {
		return fmt.Errorf("test log: %q: %w", tok, sources.ErrInvalid)
	}
	return l.await(ctx, func() (bool, error) {
		if n > len(l.entries) {
			return false, fmt.Errorf("test log: %q is ahead of the log: %w", tok, sources.ErrExpired)
		}
		return l.applied < 0 || n <= l.applied, nil
	})
}

// await waits until done, which runs under l.mu, reports true (or
// fails), or the log fails, or ctx ends.
func (l *Log) await(ctx context.Context, done func() (bool, error)) error {
	for {
		l.mu.Lock()
		err, grew := l.err, l.grew
		ok := false
		if err == nil {
			ok, err = done()
		}
		l.mu.Unlock()
		if err != nil {
			return err
		}
		if ok {
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
