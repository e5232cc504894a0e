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
	StreamCheck(ctx context.Context, at string) (redistier.StreamState, *redistier.StreamRecord, bool, error)
	StreamRenew(ctx context.Context, old string) (string, bool, error)
}

// An Applier applies the log's entries to what this replica serves
// (cmd/prodapi: the cache's in-process invalidation, a sandbox
// directory's catch-up). The log calls it in log order, once an entry is
// read and before the entry counts as applied here (WaitApplied, Read);
// an error is retried, and no later entry is applied before. Entries of
// Op sources.OpFlush and no ID, one per resource, come first whenever
// the log cannot show that what it hands over continues what it handed
// over before (the follower's first read, a new epoch, a gap).
type Applier interface {
	ApplyEntries(ctx context.Context, entries []sources.LogEntry) error
}

// An EpochApplier is an Applier that also hears, before the entries of
// a new epoch, that the epoch it followed ended under it: Redis lost the
// stream or entries it had handed out. What the lost entries' appenders
// wrote with them in the same Redis (cmd/prodapi: the cache's shared
// invalidations) may be lost as well, so EpochEnded drops what every
// replica shares, not only this one's. An error is retried, as
// ApplyEntries's.
type EpochApplier interface {
	Applier
	EpochEnded(ctx context.Context) error
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
	// Apply, when set, is called with every entry before it counts as
	// applied on this replica (see Applier).
	Apply Applier

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

	mu sync.RWMutex
	// epoch and t are what the follower has read and applied: every
	// entry of t is applied on this replica. epoch is "" until the
	// follower has read the stream.
	epoch   string
	t       tail
	changed chan struct{} // closed and replaced when the log moves, or the follower loses the stream
	// down is why the follower cannot read the stream, nil while it can:
	// from a failed call to the stream until it has read the stream's
	// state again, or while it cannot apply what it read
	// (downApplying).
	down         error
	downApplying bool
	// mine is the newest entry this replica appended to the stream, of
	// epoch mineEpoch, until its follower has read the stream that far
	// ("": none): the stream must still hold it, unless trimmed. A tail
	// lost before any follower read it (every follower behind, an Apply
	// slow) is found so by the replica that appended it: its follower
	// looks for it after each read, and its next Append first.
	mine      entry
	mineEpoch string

	// started is closed once the follower's first look at the stream has
	// ended, read and applied or failed (the ring: at once): reads wait
	// for it rather than answer from nothing.
	started   chan struct{}
	startOnce sync.Once

	ringMu sync.Mutex // the ring's appends, one at a time: Apply sees them in order
	// reserved is the ring's newest position, applied or being applied
	// (an Append in Apply): a wait for one not yet applied waits, and
	// only a position past it is ahead of the ring.
	reserved position

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
		started: make(chan struct{}), kick: make(chan struct{}, 1), done: make(chan struct{})}
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
		l.start()
		close(l.done)
		return l
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	// Ends when Close cancels ctx (within followBlock and a timeout).
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

// start closes started, once.
func (l *Log) start() { l.startOnce.Do(func() { close(l.started) }) }

// unavailable is the error of op while the log cannot be read.
func unavailable(op string, cause error) error {
	return fmt.Errorf("changelog: %s: the change log cannot be read now: %w: %w", op, sources.ErrUnavailable, cause)
}

// errNotFollowing is the cause of unavailable before the follower has
// read the stream once.
var errNotFollowing = errors.New("changelog: the follower has not read the stream yet")

// ready waits for the follower's first look at the stream, and fails
// while the follower cannot read it: a client must be able to tell an
// outage from a quiet log, so nothing is served from what this replica
// held before.
func (l *Log) ready(ctx context.Context, op string) error {
	select {
	case <-l.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	l.mu.RLock()
	down, epoch := l.down, l.epoch
	l.mu.RUnlock()
	switch {
	case down != nil:
		return unavailable(op, down)
	case epoch == "":
		return unavailable(op, errNotFollowing)
	}
	return nil
}

// Read returns at most n entries after since whose resource is one of
// resources, and the token to resume from: the position of the last
// entry examined, kept or not (at most scanMax are examined when
// resources leaves some out), or since when there is none. since "" reads
// from the oldest entry kept; "now" returns no entry and the log's
// current end. It hands out only entries applied on this replica (see
// Options.Apply): a token ahead of this replica's follower, from a
// faster one, reads nothing yet.
//
// Errors: a token of another life of the log (another epoch), older than
// the newest entry trimmed, or ahead of the log's head or naming an
// entry the stream lost (see lostAt; the epoch ends) wraps
// sources.ErrExpired;
// one that is no token wraps sources.ErrInvalid; while the log cannot be
// read (the follower cannot read the stream, Redis fails), an error
// wrapping sources.ErrUnavailable.
func (l *Log) Read(ctx context.Context, since string, resources []string, n int) ([]sources.LogEntry, string, error) {
	n = max(n, 1)
	keep := maskOf(resources)
	scan := n
	if !keep.all() {
		scan = max(n, scanMax)
	}
	var tok token
	if since != "now" && since != "" {
		var ok bool
		if tok, ok = parseToken(since); !ok {
			return nil, "", fmt.Errorf("changelog: read: %q is not a token: %w", since, sources.ErrInvalid)
		}
	}
	if err := l.ready(ctx, "read"); err != nil {
		return nil, "", err
	}
	if l.stream == nil {
		return l.readRing(since, tok, keep, n, scan)
	}
	switch since {
	case "now":
		l.mu.RLock()
		defer l.mu.RUnlock()
		return nil, token{epoch: l.epoch, pos: l.t.last}.String(), nil
	case "":
		return l.readOldest(ctx, keep, n, scan)
	}
	return l.readToken(ctx, tok, keep, n, scan)
}

// readRing reads the ring, which answers for itself.
func (l *Log) readRing(since string, tok token, keep mask, n, scan int) ([]sources.LogEntry, string, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	switch since {
	case "now":
		return nil, token{epoch: l.epoch, pos: l.t.last}.String(), nil
	case "":
		tok = token{epoch: l.epoch, pos: l.t.from}
	}
	switch {
	case tok.epoch != l.epoch:
		return nil, "", fmt.Errorf("changelog: read: %s is from another life of the log (the process restarted): %w", tok, sources.ErrExpired)
	case tok.pos.less(l.t.from):
		return nil, "", fmt.Errorf("changelog: read: %s is older than the entries kept: %w", tok, sources.ErrExpired)
	case l.reserved.less(tok.pos): // never less than last
		return nil, "", fmt.Errorf("changelog: read: %s is ahead of the log: %w", tok, sources.ErrExpired)
	case l.t.last.less(tok.pos):
		return nil, tok.String(), nil // being applied: nothing after it yet
	}
	entries, next := l.t.read(l.epoch, tok.pos, keep, n, scan)
	return entries, token{epoch: l.epoch, pos: next}.String(), nil
}

// readToken reads after tok in front of Redis: from what the follower
// holds when that covers tok, from the stream (up to what the follower
// has applied) when tok is older, and nothing yet when tok is ahead of
// the follower but not of the stream.
func (l *Log) readToken(ctx context.Context, tok token, keep mask, n, scan int) ([]sources.LogEntry, string, error) {
	l.mu.RLock()
	epoch, last := l.epoch, l.t.last
	if tok.epoch == epoch && l.t.covers(tok.pos) && l.t.names(tok.pos) {
		entries, next := l.t.read(epoch, tok.pos, keep, n, scan)
		l.mu.RUnlock()
		return entries, token{epoch: epoch, pos: next}.String(), nil
	}
	l.mu.RUnlock()
	if tok.epoch == epoch && !last.less(tok.pos) {
		// Older than the tail, or in it but naming no entry it holds:
		// the stream tells whether the position was lost.
		return l.readStream(ctx, tok, keep, n, scan, last)
	}
	if err := l.behind(ctx, "read", tok); err != nil {
		return nil, "", err
	}
	return nil, tok.String(), nil
}

// readStream reads after tok from the stream itself, entries up to upto
// (what the follower has applied) only. A token newer than the trim mark
// that names no entry of the stream was lost with the entries it names
// (see lostAt): the epoch ends.
func (l *Log) readStream(ctx context.Context, tok token, keep mask, n, scan int, upto position) ([]sources.LogEntry, string, error) {
	// From tok's own entry on, so that the read shows whether it is there.
	st, recs, ok, err := l.stream.StreamRange(ctx, tok.pos.before(), scan+1)
	if err != nil {
		return nil, "", unavailable("read", err)
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
	if lostAt(st, recs, tok.pos) {
		// A failed renewal is logged; the token is expired all the same.
		_ = l.renew(ctx, tok.epoch, "a token names no entry of the stream, and none was trimmed there", "token", tok.String(), "last", st.Last)
		return nil, "", fmt.Errorf("changelog: read: %s names an entry the log lost: %w", tok, sources.ErrExpired)
	}
	entries, next := keepRecords(st.Epoch, recs, tok.pos, upto, keep, n)
	return entries, token{epoch: st.Epoch, pos: next}.String(), nil
}

// lostAt reports whether p, a position of the stream's epoch newer than
// its trim mark, names no entry of the stream: recs are the stream's
// records from p on, read with its state st. Every position the log hands
// out names an entry, or is the trim mark (the creation marker of a new
// stream, the last id of a renewed epoch, the newest entry trimmed), or
// is one the client sent (nothing after it yet); so one that names no
// entry and was not trimmed was lost with the entries it named (a restart
// on persistence lacking the newest writes, a failover), even when the
// follower here never read them. A stream whose trim mark is "0-0" (made
// before its creation marker was recorded, or that lost its meta hash)
// cannot tell a lost position from its creation marker: none is lost.
func lostAt(st redistier.StreamState, recs []redistier.StreamRecord, p position) bool {
	trimmed, _ := parsePosition(st.Trimmed)
	if trimmed == (position{}) || !trimmed.less(p) {
		return false
	}
	return len(recs) == 0 || recs[0].ID != p.String()
}

// keepRecords turns records after p, up to upto, into entries, keeping
// those of keep, at most n; next is the last record examined (p when
// none was).
func keepRecords(epoch string, recs []redistier.StreamRecord, p, upto position, keep mask, n int) ([]sources.LogEntry, position) {
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
		if upto.less(e.pos) {
			break
		}
		next = e.pos
		if keep.has(e.res) {
			out = append(out, e.logEntry(epoch))
		}
	}
	return out, next
}

// readOldest reads from the oldest entry the stream keeps, up to what
// the follower has applied.
func (l *Log) readOldest(ctx context.Context, keep mask, n, scan int) ([]sources.LogEntry, string, error) {
	st, recs, ok, err := l.stream.StreamRange(ctx, "", scan)
	if err != nil {
		return nil, "", unavailable("read", err)
	}
	l.mu.RLock()
	epoch, last := l.epoch, l.t.last
	l.mu.RUnlock()
	trimmed, _ := parsePosition(st.Trimmed)
	switch {
	case !ok:
		// No stream (it was just lost): the follower's end, which
		// expires once it has found the stream's new life.
		l.nudge()
		return nil, token{epoch: epoch, pos: last}.String(), nil
	case st.Epoch != epoch:
		// A life the follower has not read yet: its start, which reads
		// nothing until the follower has.
		l.nudge()
		return nil, token{epoch: st.Epoch, pos: trimmed}.String(), nil
	}
	entries, next := keepRecords(st.Epoch, recs, trimmed, last, keep, n)
	if len(recs) == 0 {
		next = last
	}
	return entries, token{epoch: st.Epoch, pos: next}.String(), nil
}

// behind checks a token that the follower has not reached (of an epoch
// it does not follow, or ahead of its position) against the stream: one
// call to Redis. It returns nil when the stream has the token's
// position, and the follower will get there; an error wrapping
// sources.ErrExpired when the token's epoch is over or the token is
// ahead of the stream's last id (the stream lost entries it had handed
// out: the epoch ends, so that every token of it expires).
func (l *Log) behind(ctx context.Context, op string, tok token) error {
	st, _, ok, err := l.stream.StreamCheck(ctx, "")
	if err != nil {
		return unavailable(op, err)
	}
	if !ok || st.Epoch != tok.epoch {
		return fmt.Errorf("changelog: %s: %s is from another life of the stream: %w", op, tok, sources.ErrExpired)
	}
	if trimmed, _ := parsePosition(st.Trimmed); tok.pos.less(trimmed) {
		return fmt.Errorf("changelog: %s: %s is older than the entries kept: %w", op, tok, sources.ErrExpired)
	}
	if head, _ := parsePosition(st.Last); head.less(tok.pos) {
		// A failed renewal is logged; the token is expired all the same.
		_ = l.renew(ctx, tok.epoch, "a token is ahead of the stream's last id", "token", tok.String(), "last", st.Last)
		return fmt.Errorf("changelog: %s: %s is ahead of the log (it lost entries it had handed out): %w", op, tok, sources.ErrExpired)
	}
	l.mu.RLock()
	following := l.epoch
	l.mu.RUnlock()
	if following != st.Epoch {
		l.nudge()
	}
	return nil
}

// nudge asks the follower to read the stream's state again now rather
// than after its read.
func (l *Log) nudge() {
	select {
	case l.kick <- struct{}{}:
	default:
	}
}

// Wait returns nil once the log holds an entry after since that this
// replica has applied, or when since is no token (Read then says what
// it is); ctx's error when ctx ends first. A token the log cannot
// continue (see Read) is an error wrapping sources.ErrExpired, never a
// wait; while the log cannot be read, or once the follower loses the
// stream, an error wrapping sources.ErrUnavailable. Waiters share the
// follower's news: a wait costs no call to Redis (but one, to check it,
// for a token this replica's follower has not reached).
func (l *Log) Wait(ctx context.Context, since string) error {
	tok, ok := parseToken(since)
	if !ok {
		return nil
	}
	return l.await(ctx, "wait", tok, func(last position) bool { return tok.pos.less(last) })
}

// WaitApplied returns nil once every entry up to token has been applied
// on this replica (see Options.Apply), ctx's error when ctx ends first.
// Errors are Wait's, and one wrapping sources.ErrInvalid for what is no
// token. It costs no call to Redis, as Wait.
func (l *Log) WaitApplied(ctx context.Context, tok string) error {
	t, ok := parseToken(tok)
	if !ok {
		return fmt.Errorf("changelog: wait applied: %q is not a token: %w", tok, sources.ErrInvalid)
	}
	return l.await(ctx, "wait applied", t, func(last position) bool { return !last.less(t.pos) })
}

// await waits until reached holds of the follower's position in tok's
// epoch.
func (l *Log) await(ctx context.Context, op string, tok token, reached func(position) bool) error {
	if err := l.ready(ctx, op); err != nil {
		return err
	}
	checked, checkedIn := false, "" // tok checked against the stream, while the follower was in that epoch
	for {
		l.mu.RLock()
		changed, down, epoch, last, reserved := l.changed, l.down, l.epoch, l.t.last, l.reserved
		l.mu.RUnlock()
		switch {
		case down != nil:
			return unavailable(op, down)
		case tok.epoch == epoch && reached(last):
			return nil
		case tok.epoch == epoch && (!last.less(tok.pos) || l.stream == nil && !reserved.less(tok.pos)):
			// The follower has the token (or the ring is applying it):
			// wait for what comes after.
		case l.stream == nil:
			return fmt.Errorf("changelog: %s: %s is from another life of the log, or ahead of it: %w", op, tok, sources.ErrExpired)
		case !checked || checkedIn != epoch:
			if err := l.behind(ctx, op, tok); err != nil {
				return err
			}
			checked, checkedIn = true, epoch
			continue
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
