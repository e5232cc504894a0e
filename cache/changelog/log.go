package changelog

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
)

// A Stream is the Redis stream the fleet's log lives in (package
// redistier's Tier is one).
type Stream interface {
	StreamAppend(ctx context.Context, changes []redistier.StreamAppend, limits redistier.StreamLimits) (redistier.StreamState, int64, [][]string, error)
	StreamSnapshot(ctx context.Context, n int) (redistier.StreamState, []redistier.StreamRecord, error)
	StreamRange(ctx context.Context, after string, count int) (redistier.StreamState, []redistier.StreamRecord, bool, error)
	StreamRead(ctx context.Context, after string, block time.Duration, count int) ([]redistier.StreamRecord, error)
	StreamMeta(ctx context.Context) (redistier.StreamState, error)
}

// Options tune a Log. The zero value works.
type Options struct {
	// Retain is how long entries are kept (PRODAPI_CHANGES_RETAIN); 0
	// means DefaultRetain.
	Retain time.Duration
	// MaxEntries caps the entries kept, whatever their age; 0 means
	// DefaultMaxEntries.
	MaxEntries int
	// Tail is how many of the newest entries each replica holds in memory
	// in front of Redis, to serve recent positions without a round trip;
	// 0 means DefaultTail.
	Tail int

	Metrics *metrics.Metrics // nil: none
	Logger  *slog.Logger     // nil: discard
	// Now is the clock of the ring's positions and ages, and of the
	// follower's lag; nil means time.Now.
	Now func() time.Time
}

// Defaults of Options.
const (
	DefaultRetain = 24 * time.Hour
	// DefaultMaxEntries bounds the stream at about 70 MB of Redis memory
	// with Superdesk's long item ids (some 140 bytes an entry), 40 MB with
	// ObjectIds (80 bytes): a day of five changes a second fits.
	DefaultMaxEntries = 500_000
	// DefaultTail is some 2 MB per replica.
	DefaultTail = 10_000
)

// seenTTL is how long the stream remembers the version it last appended
// for a document: far longer than a takeover (seconds) or replicas'
// watchers disagreeing on when they saw a file (milliseconds), so that
// only an outage of the whole fleet longer than this appends a change
// twice.
const seenTTL = time.Hour

// scanMax bounds the entries one Read examines when it filters by
// resource: a token that may read few resources of a busy log gets
// fewer entries than it asked for, and the position to go on from.
const scanMax = 1000

// A Log is the fleet's change log, as one replica keeps, follows and
// serves it. See the package documentation.
type Log struct {
	stream Stream // nil: the ring
	opts   Options
	log    *slog.Logger
	now    func() time.Time
	m      *series

	mu      sync.RWMutex
	epoch   string // "" until the follower has read the stream
	t       tail
	changed chan struct{} // closed and replaced when the log moves

	kick   chan struct{} // asks the follower to read the stream's state again
	cancel context.CancelFunc
	done   chan struct{} // closed when the follower returns
}

// New returns the log: on stream (the fleet's, in Redis), or, with stream
// nil, a ring in this process alone. With a stream it starts following it
// at once; Close stops.
func New(stream Stream, opts Options) *Log {
	opts.Retain = cmp.Or(opts.Retain, DefaultRetain)
	opts.MaxEntries = cmp.Or(opts.MaxEntries, DefaultMaxEntries)
	opts.Tail = min(cmp.Or(opts.Tail, DefaultTail), opts.MaxEntries)
	l := &Log{stream: stream, opts: opts, log: opts.Logger, now: opts.Now, changed: make(chan struct{}),
		kick: make(chan struct{}, 1), done: make(chan struct{})}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.now == nil {
		l.now = time.Now
	}
	l.m = newSeries(opts.Metrics)
	if stream == nil {
		l.epoch = redistier.NewEpoch() // a boot id, in the form of the stream's
		l.m.following.Set(1)
		close(l.done)
		return l
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	// Ends when Close cancels ctx (within followBlock).
	go l.follow(ctx)
	return l
}

// Close stops following the stream, waiting for the follower until ctx
// ends. The log still answers from what it holds, and appends.
func (l *Log) Close(ctx context.Context) error {
	if l.cancel == nil {
		return nil
	}
	l.cancel()
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("changelog: close: %w", ctx.Err())
	}
}

// Valid reports whether s is a token of a log like this one: an epoch
// and a position. Whether it is one this log still holds is Read's
// business (410).
func (l *Log) Valid(s string) bool {
	_, ok := parseToken(s)
	return ok
}

// Read returns at most n entries after since whose resource is one of
// resources, and the token to resume from: the position of the last
// entry examined, kept or not (at most scanMax are examined when
// resources leaves some out), or since when there is none. since "" reads
// from the oldest entry kept; "now" returns no entry and the log's
// current end. A token of another life of the log (another epoch), or
// older than the newest entry trimmed, is an error wrapping
// sources.ErrExpired; one that is no token wraps sources.ErrInvalid; any
// other error is the log being unavailable (Redis).
func (l *Log) Read(ctx context.Context, since string, resources []string, n int) ([]sources.LogEntry, string, error) {
	n = max(n, 1)
	keep := maskOf(resources)
	scan := n
	if !keep.all() {
		scan = max(n, scanMax)
	}
	switch since {
	case "now":
		end, err := l.end(ctx)
		return nil, end, err
	case "":
		return l.readOldest(ctx, keep, n, scan)
	}
	tok, ok := parseToken(since)
	if !ok {
		return nil, "", fmt.Errorf("changelog: read: %q is not a token: %w", since, sources.ErrInvalid)
	}
	if entries, next, ok, err := l.readHeld(tok, keep, n, scan); ok || err != nil {
		return entries, next, err
	}
	return l.readStream(ctx, tok, keep, n, scan)
}

// readHeld reads from what this replica holds, when that covers tok:
// always with the ring, which answers for itself; in front of Redis only
// for positions the follower has.
func (l *Log) readHeld(tok token, keep mask, n, scan int) ([]sources.LogEntry, string, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.stream == nil {
		switch {
		case tok.epoch != l.epoch:
			return nil, "", true, fmt.Errorf("changelog: read: %s is from another life of the log (the process restarted): %w", tok, sources.ErrExpired)
		case tok.pos.less(l.t.from):
			return nil, "", true, fmt.Errorf("changelog: read: %s is older than the entries kept: %w", tok, sources.ErrExpired)
		case l.t.last.less(tok.pos):
			return nil, tok.String(), true, nil // nothing after it yet
		}
	} else if tok.epoch != l.epoch || !l.t.covers(tok.pos) {
		return nil, "", false, nil
	}
	entries, next := l.t.read(l.epoch, tok.pos, keep, n, scan)
	return entries, token{epoch: l.epoch, pos: next}.String(), true, nil
}

// readStream reads after tok from the stream itself.
func (l *Log) readStream(ctx context.Context, tok token, keep mask, n, scan int) ([]sources.LogEntry, string, error) {
	st, recs, ok, err := l.stream.StreamRange(ctx, tok.pos.String(), scan)
	if err != nil {
		return nil, "", fmt.Errorf("changelog: read: %w", err)
	}
	if !ok {
		return nil, "", fmt.Errorf("changelog: read: %s: the stream is gone: %w", tok, sources.ErrExpired)
	}
	if st.Epoch != tok.epoch {
		return nil, "", fmt.Errorf("changelog: read: %s is from another life of the stream: %w", tok, sources.ErrExpired)
	}
	if trimmed, _ := parsePosition(st.Trimmed); tok.pos.less(trimmed) {
		return nil, "", fmt.Errorf("changelog: read: %s is older than the entries kept: %w", tok, sources.ErrExpired)
	}
	l.mu.RLock()
	behind := l.epoch != st.Epoch
	l.mu.RUnlock()
	if behind {
		// The stream is of a life the follower has not seen yet: have it
		// look again now rather than after its read.
		select {
		case l.kick <- struct{}{}:
		default:
		}
	}
	entries, next := keepRecords(st.Epoch, recs, tok.pos, keep, n)
	return entries, token{epoch: st.Epoch, pos: next}.String(), nil
}

// keepRecords turns records after p into entries, keeping those of keep,
// at most n; next is the last record examined (p when none was).
func keepRecords(epoch string, recs []redistier.StreamRecord, p position, keep mask, n int) ([]sources.LogEntry, position) {
	var out []sources.LogEntry
	next := p
	for _, r := range recs {
		if len(out) == n {
			break
		}
		e, ok := recordEntry(r)
		if !ok || !p.less(e.pos) {
			continue
		}
		next = e.pos
		if keep.has(e.res) {
			out = append(out, e.logEntry(epoch))
		}
	}
	return out, next
}

// readOldest reads from the oldest entry kept.
func (l *Log) readOldest(ctx context.Context, keep mask, n, scan int) ([]sources.LogEntry, string, error) {
	if l.stream == nil {
		l.mu.RLock()
		defer l.mu.RUnlock()
		entries, next := l.t.read(l.epoch, l.t.from, keep, n, scan)
		return entries, token{epoch: l.epoch, pos: next}.String(), nil
	}
	st, recs, ok, err := l.stream.StreamRange(ctx, "", scan)
	if err != nil {
		return nil, "", fmt.Errorf("changelog: read: %w", err)
	}
	if !ok {
		end, err := l.end(ctx) // nothing yet: where the log starts
		return nil, end, err
	}
	trimmed, _ := parsePosition(st.Trimmed)
	entries, next := keepRecords(st.Epoch, recs, trimmed, keep, n)
	if len(recs) == 0 {
		next, _ = parsePosition(st.Last)
	}
	return entries, token{epoch: st.Epoch, pos: next}.String(), nil
}

// end is the token of the log's current end: the follower's, once it
// follows (a moment behind the stream at most, which only makes a client
// read again what it has), else the stream's, which is created if need
// be.
func (l *Log) end(ctx context.Context) (string, error) {
	l.mu.RLock()
	epoch, last := l.epoch, l.t.last
	l.mu.RUnlock()
	if epoch != "" {
		return token{epoch: epoch, pos: last}.String(), nil
	}
	st, _, err := l.stream.StreamSnapshot(ctx, 0)
	if err != nil {
		return "", fmt.Errorf("changelog: read: %w", err)
	}
	p, _ := parsePosition(st.Last)
	return token{epoch: st.Epoch, pos: p}.String(), nil
}

// Wait returns nil once the log holds an entry after since, or when since
// is no token of the log as this replica follows it (Read then says what
// it is); ctx's error when ctx ends first. Waiters share the follower's
// news: a wait costs no call to Redis.
func (l *Log) Wait(ctx context.Context, since string) error {
	tok, ok := parseToken(since)
	if !ok {
		return nil
	}
	for {
		l.mu.RLock()
		changed := l.changed
		ready := l.epoch != "" && (tok.epoch != l.epoch || tok.pos.less(l.t.last))
		l.mu.RUnlock()
		if ready {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// moved wakes the waiters; l.mu is held.
func (l *Log) moved() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// errLogFollow is a follower's reason to read the stream's state again.
var errLogFollow = errors.New("changelog: the stream moved under the follower")
