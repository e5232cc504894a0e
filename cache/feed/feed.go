// Package feed runs a change feed for the fleet: exactly one replica
// watches the database's change stream, under a lease it renews, applies
// every change to the cache (which tells the other replicas) and appends
// it to the fleet's change log (package cache/changelog). The stream's
// resume token is kept with the lease, so whoever watches next, after a
// restart or a takeover, continues where the last one stopped.
//
//   - A replica that holds the lease renews it every third of its TTL
//     (5s by default); one that fails to renew stops watching. When the
//     watcher dies its lease lapses and another replica takes over
//     within the TTL.
//   - Each change is followed by the changes it derives (Options.Derive:
//     the documents whose served form embeds the changed one, package
//     enrich's Deriver), applied to the cache with them, then appended
//     to the log with them, then its resume token saved: a watcher that
//     dies in between leaves a token before the change, and its
//     successor reports the change again, which the log appends once (by
//     the change's Version). A derivation, an application (an
//     invalidation that did not reach Redis) or an append that fails
//     fails the watch, which resumes after a pause from the last token
//     saved: nothing is appended for a change the cache did not take, no
//     change is lost, none skipped. A watch that starts with no token
//     saves its stream's start first (Source), so that this holds for
//     its first change too.
//   - A stream that cannot resume (its history is lost) flushes every
//     resource it covers (in the cache, then in the log; a flush that
//     fails is tried again), drops the token and starts again from now.
//   - A server without change streams (a standalone server, FerretDB)
//     is said once in the log. With a Poller the lease holder then polls
//     each collection for what was written since its watermark, every
//     Options.PollEvery (poll.go): updates and insertions, since a
//     deleted document leaves nothing to find (Status says "polling").
//     With an IDLister it also reconciles each collection's ids every
//     Options.ReconcileEvery against the ids it knew (reconcile.go):
//     each id gone is a deletion. Without a Poller the feed stops, and
//     the TTLs are the only freshness there is.
//   - Other failures are retried after a pause (1s, doubling to 5s).
//
// The holder says in Redis whether it watches or polls, beside its token,
// so the other replicas know too (Mode): they keep entries long while a
// stream watches, since every write obsoletes them, and only for the TTLs
// while a poll runs, which sees deletions only once per reconcile.
//
// A source that every replica watches on its own (a sandbox directory)
// needs no lease: a Local feed (local.go) runs it on each replica, and
// the log keeps the first report of each version. It keeps the same
// promise: each change and what it derives to the cache, then to the
// log, at least once and in order, a failure retried before anything
// after it is appended.
package feed

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
)

// A Source is a change stream (sources/mongo's Store is one). Watch
// calls emit with each change and the resume token after it, from after
// token (nil: from now). Started without a token, it may first emit the
// zero Change (no Collection, no Op) with the token of the stream's start:
// the feed saves that token and applies and appends nothing, so that a
// first change that fails is reported again by the next watch instead of
// lost to one that starts from a later "now".
type Source interface {
	Watch(ctx context.Context, collections []string, token []byte, emit func(sources.Change, []byte) error) error
}

// A Coordinator keeps the fleet's lease and resume token (package
// redistier's Tier is one, on Redis).
type Coordinator interface {
	Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error)
	ReleaseLease(ctx context.Context, name, holder string) error
	Token(ctx context.Context, name string) ([]byte, error)
	SaveToken(ctx context.Context, name string, token []byte) error
}

// An Applier applies changes (package cache's Cache is one).
type Applier interface {
	Apply(ctx context.Context, changes []sources.Change) error
}

// A Log is the fleet's change log (package changelog's Log is one).
type Log interface {
	Append(ctx context.Context, source string, changes []sources.Change) error
}

// A Deriver adds to changes the changes they derive: an update of each
// document whose served form embeds a changed one (package enrich's
// Deriver is one). It returns each change followed by what it derives,
// and fails when it cannot tell: the feed tries again.
type Deriver interface {
	Derive(ctx context.Context, changes []sources.Change) ([]sources.Change, error)
}

// derive is changes and what they derive; changes alone without d.
func derive(ctx context.Context, d Deriver, changes []sources.Change) ([]sources.Change, error) {
	if d == nil {
		return changes, nil
	}
	all, err := d.Derive(ctx, changes)
	if err != nil {
		return nil, fmt.Errorf("feed: deriving the changes of what embeds them: %w", err)
	}
	return all, nil
}

// Options configure a Feed. Unsupported and HistoryLost are required.
type Options struct {
	Name        string   // the lease's and token's name; "" means "mongo"
	Collections []string // nil: sources.Collections
	LeaseTTL    time.Duration
	// Unsupported reports an error meaning the server has no change
	// streams; HistoryLost one meaning the stream cannot resume.
	Unsupported, HistoryLost func(error) bool
	// Log, when set, gets every change, after the cache.
	Log Log
	// Derive, when set, adds to each change the changes it derives.
	Derive Deriver
	// Poller, when set, stands in for a server without change streams;
	// PollEvery is how often it polls (PRODAPI_FEED_POLL), 0 meaning
	// DefaultPollEvery.
	Poller    Poller
	PollEvery time.Duration
	// IDs, when set with a Poller, walks each collection's ids every
	// ReconcileEvery (PRODAPI_FEED_RECONCILE; 0 means
	// DefaultReconcileEvery) to find what was deleted, against the ids
	// Known keeps (nil: this process's memory).
	IDs            IDLister
	Known          KnownIDs
	ReconcileEvery time.Duration
	// Now is the clock the poll caps its watermarks with; nil means
	// time.Now.
	Now     func() time.Time
	Metrics *metrics.Metrics // nil: none
	Logger  *slog.Logger     // nil: discard
}

// DefaultLeaseTTL is the lease's lifetime: the longest a dead watcher's
// replacement waits.
const DefaultLeaseTTL = 5 * time.Second

// Statuses a Feed reports.
const (
	StatusStarting    = "starting"
	StatusFollowing   = "following"   // another replica watches or polls (Mode says which)
	StatusWatching    = "watching"    // this replica watches
	StatusPolling     = "polling"     // this replica polls: no change streams
	StatusRetrying    = "retrying"    // the stream or the poll failed; retrying
	StatusUnsupported = "unsupported" // no change streams and no poller: TTLs only
)

// Modes of the fleet's feed, as its holder last said (Mode).
const (
	ModeUnknown = ""       // nobody said yet
	ModeStream  = "stream" // the holder watches a change stream
	ModePoll    = "poll"   // the holder polls: deletions are seen once per reconcile
)

// Sources of the log's entries, as package changelog names them.
const (
	sourceStream = "stream"
	sourcePoll   = "poll"
)

// A Feed is one replica's part in the fleet's change feed.
type Feed struct {
	src    Source
	coord  Coordinator
	apply  Applier
	opts   Options
	holder string
	log    *slog.Logger
	leader *metrics.Gauge
	events *metrics.Counter

	mu     sync.Mutex
	status string
	mode   string
	// noStreams is set once the server turned out to have no change
	// streams: a takeover by this replica polls at once.
	noStreams bool

	// round is the reconcile's last round here (reconcile.go); only the
	// one reconcile running at a time reads it.
	round int64
}

// New returns a feed; Run runs it.
func New(src Source, coord Coordinator, apply Applier, opts Options) *Feed {
	if opts.Name == "" {
		opts.Name = "mongo"
	}
	if opts.Collections == nil {
		opts.Collections = sources.Collections
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	if opts.PollEvery <= 0 {
		opts.PollEvery = DefaultPollEvery
	}
	if opts.ReconcileEvery <= 0 {
		opts.ReconcileEvery = DefaultReconcileEvery
	}
	if opts.Known == nil {
		opts.Known = &memKnown{sets: map[string]map[string]int64{}}
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	f := &Feed{src: src, coord: coord, apply: apply, opts: opts, log: opts.Logger, status: StatusStarting}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	f.holder = hex.EncodeToString(b[:])
	if opts.Metrics != nil {
		f.leader = opts.Metrics.Gauge("prodapi_feed_leader",
			"1 while this replica watches the change stream for the fleet, 0 otherwise.")
		f.events = opts.Metrics.Counter("prodapi_feed_events_total",
			"Change events this replica read from the change stream and applied.")
	}
	return f
}

// Status is the feed's state, for /readyz.
func (f *Feed) Status() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status
}

func (f *Feed) set(status string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status = status
}

// Mode is how the fleet's feed runs, as its holder last said: a change
// stream, a poll, or not known yet.
func (f *Feed) Mode() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mode
}

// modeToken names where the holder keeps the mode, beside its token.
func (f *Feed) modeToken() string { return f.opts.Name + "-mode" }

// say records the mode, here and in Redis for the other replicas.
func (f *Feed) say(ctx context.Context, mode string) {
	f.mu.Lock()
	f.mode = mode
	f.mu.Unlock()
	if err := f.coord.SaveToken(ctx, f.modeToken(), []byte(mode)); err != nil {
		f.log.Debug("feed: saving the mode", "error", err)
	}
}

// hear reads the mode the holder said.
func (f *Feed) hear(ctx context.Context) {
	b, err := f.coord.Token(ctx, f.modeToken())
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.mode = string(b)
}

// Run takes part in the feed until ctx ends (its error) or the server
// turns out to have no change streams (nil).
func (f *Feed) Run(ctx context.Context) error {
	pause := time.Second
	for {
		held, err := f.coord.Lease(ctx, f.opts.Name, f.holder, f.opts.LeaseTTL)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil || !held {
			if err != nil {
				f.log.Debug("feed: lease", "error", err)
			}
			if f.Status() != StatusRetrying {
				f.set(StatusFollowing)
			}
			if err == nil {
				f.hear(ctx)
			}
			f.leader.Set(0)
			if !sleep(ctx, f.opts.LeaseTTL/3) {
				return ctx.Err()
			}
			continue
		}
		f.set(StatusWatching)
		f.leader.Set(1)
		began := time.Now()
		err = f.lead(ctx)
		if time.Since(began) > 10*time.Second {
			pause = time.Second // it had been working: not the same outage
		}
		f.leader.Set(0)
		switch {
		case ctx.Err() != nil:
			_ = f.coord.ReleaseLease(context.WithoutCancel(ctx), f.opts.Name, f.holder)
			return ctx.Err()
		case errors.Is(err, errLeaseLost):
			f.log.Warn("feed: lost the lease; another replica may watch now")
			continue
		case f.opts.Unsupported(err):
			// Only without a Poller: lead polls otherwise.
			f.set(StatusUnsupported)
			_ = f.coord.ReleaseLease(ctx, f.opts.Name, f.holder)
			f.log.Warn("feed: the database has no change streams (it is not a replica set, or is FerretDB): entries are refreshed by their TTLs only", "error", err)
			return nil
		case f.opts.HistoryLost(err):
			f.log.Warn("feed: the change stream cannot resume; flushing the resources it covers", "error", err)
			if err = f.flush(ctx); err != nil {
				// The token stays: the next watch finds the history lost
				// again, and flushes again.
				err = fmt.Errorf("feed: flushing: %w", err)
				break
			}
			if err := f.coord.SaveToken(ctx, f.opts.Name, nil); err != nil {
				f.log.Warn("feed: dropping the token", "error", err)
			}
			continue
		}
		f.set(StatusRetrying)
		f.log.Warn("feed: the change stream or the poll failed; retrying", "error", err, "in", pause.String())
		_ = f.coord.ReleaseLease(ctx, f.opts.Name, f.holder)
		if !sleep(ctx, pause) {
			return ctx.Err()
		}
		pause = min(2*pause, 5*time.Second)
	}
}

var errLeaseLost = errors.New("feed: lease lost")

// lead watches, or polls where the server has no change streams, while
// it holds the lease, renewing it.
func (f *Feed) lead(ctx context.Context) error {
	lctx, cancel := context.WithCancelCause(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		// Ends with lctx: when the watch returns, or the lease is lost.
		last := time.Now()
		for sleep(lctx, f.opts.LeaseTTL/3) {
			held, err := f.coord.Lease(lctx, f.opts.Name, f.holder, f.opts.LeaseTTL)
			switch {
			case err == nil && held:
				last = time.Now()
			case err == nil && !held, time.Since(last) > f.opts.LeaseTTL*2/3:
				cancel(errLeaseLost)
				return
			}
		}
	})
	defer wg.Wait()
	defer cancel(nil) // before the Wait: it ends the renewals
	err := f.leadOnce(lctx)
	if errors.Is(context.Cause(lctx), errLeaseLost) {
		return errLeaseLost
	}
	return err
}

// leadOnce watches the change stream, or polls when the server has
// none and there is a Poller.
func (f *Feed) leadOnce(ctx context.Context) error {
	f.mu.Lock()
	noStreams := f.noStreams
	f.mu.Unlock()
	if !noStreams {
		err := f.watch(ctx)
		if !f.opts.Unsupported(err) || f.opts.Poller == nil {
			return err
		}
		f.mu.Lock()
		f.noStreams = true
		f.mu.Unlock()
		f.log.Warn("feed: the database has no change streams (it is not a replica set, or is FerretDB): polling _updated instead; "+
			"deletions are seen when the ids are reconciled", "every", f.opts.PollEvery.String(), "reconcile", f.reconcileEvery().String(), "error", err)
	}
	f.set(StatusPolling)
	f.say(ctx, ModePoll)
	return f.poll(ctx)
}

// watch follows the change stream from the saved token: each change
// with what it derives to the cache, then to the log, then its token
// saved.
func (f *Feed) watch(ctx context.Context) error {
	token, err := f.coord.Token(ctx, f.opts.Name)
	if err != nil {
		return err
	}
	said := false
	return f.src.Watch(ctx, f.opts.Collections, token, func(ch sources.Change, tok []byte) error {
		if ch.Collection != "" || ch.Op != "" {
			if err := f.report(ctx, sourceStream, []sources.Change{ch}); err != nil {
				return err // the token stays before the change: it comes again
			}
		} // else the stream's start: only its token, to resume from
		if !said {
			said = true
			f.say(ctx, ModeStream)
		}
		return f.coord.SaveToken(ctx, f.opts.Name, tok)
	})
}

// report applies changes and what they derive to the cache, then
// appends them to the log. A failure of either fails it, and nothing
// was appended when the cache failed: the caller reports them again.
func (f *Feed) report(ctx context.Context, source string, changes []sources.Change) error {
	all, err := derive(ctx, f.opts.Derive, changes)
	if err != nil {
		return err
	}
	if err := f.applyAndAppend(ctx, source, all); err != nil {
		return err
	}
	f.events.Add(uint64(len(changes)))
	return nil
}

// applyAndAppend applies changes to the cache and, once that succeeded,
// appends them to the log, if there is one.
func (f *Feed) applyAndAppend(ctx context.Context, source string, changes []sources.Change) error {
	if err := f.apply.Apply(ctx, changes); err != nil {
		return fmt.Errorf("feed: applying %d changes to the cache: %w", len(changes), err)
	}
	if f.opts.Log == nil {
		return nil
	}
	if err := f.opts.Log.Append(ctx, source, changes); err != nil {
		return fmt.Errorf("feed: appending %d changes to the log: %w", len(changes), err)
	}
	return nil
}

// flush reports every covered collection as changed wholesale (which
// derives nothing more).
func (f *Feed) flush(ctx context.Context) error {
	changes := make([]sources.Change, len(f.opts.Collections))
	for i, c := range f.opts.Collections {
		changes[i] = sources.Change{Collection: c, Op: sources.OpFlush}
	}
	return f.applyAndAppend(ctx, sourceStream, changes)
}

// sleep waits d; false when ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
