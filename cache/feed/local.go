package feed

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// A Watcher reports the changes it sees until ctx ends or it is closed.
// Every replica runs its own, with no lease: each sees the same changes
// (package sandbox's Live, watching a directory, is one).
type Watcher interface {
	Run(ctx context.Context, report func(context.Context, []sources.Change)) error
}

// LocalOptions configure a Local feed; the zero value works.
type LocalOptions struct {
	// Source is the log's name for where the changes come from (one of
	// package changelog's Source constants); "" means "sandbox".
	Source string
	// Pause is the first wait before a failed append is tried again,
	// doubling up to MaxPause; 0 means 250ms and 5s.
	Pause, MaxPause time.Duration
	// MaxQueue is how many changes may wait behind a failing append
	// before the queue keeps only each document's newest; 0 means
	// DefaultMaxQueue.
	MaxQueue int
	// Derive, when set, adds to each change the changes it derives.
	Derive Deriver
	Logger *slog.Logger // nil: discard
}

// DefaultMaxQueue is how many changes wait behind a failing append
// before the queue is coalesced.
const DefaultMaxQueue = 10000

// A Local feed is one replica's own: it runs a Watcher that every
// replica runs, and needs no lease, since the log keeps one entry per
// document version whichever replica appends it first. Each report is
// applied to the cache at once, then queued for the log, which gets it
// at least once and in order, with what it derives:
//
//   - Queued changes are taken in order: what they derive is queued
//     after them (LocalOptions.Derive), what the cache did not take (an
//     invalidation that did not reach Redis, a derived change) is
//     applied, and only then are they appended.
//   - A step that fails is tried again, with the same changes first,
//     after a pause (Pause, doubling to MaxPause), until it succeeds or
//     ctx ends: nothing reported after it is appended before it, and
//     nothing is appended before the cache took it.
//   - Meanwhile the watcher goes on: its reports are applied to the
//     cache and queued behind the failed one. Past MaxQueue changes the
//     queue keeps only the newest change of each document, in the order
//     of those newest changes (with the document as it was before the
//     first of them, for what they derive), so it holds at most one
//     change per document, however long the outage.
//   - An outage is logged once, when it begins, and once when the log
//     takes appends again; the log counts each failed append
//     (prodapi_changes_append_errors_total).
type Local struct {
	w     Watcher
	apply Applier
	log   Log
	opts  LocalOptions
	l     *slog.Logger

	wake chan struct{} // one pending signal: the queue grew or ended

	mu        sync.Mutex
	queue     []pending
	limit     int  // the queue is coalesced when it grows past this
	coalesced int  // changes the queue dropped for newer ones, this outage
	ended     bool // the watcher returned: Run ends once the queue is empty
}

// A pending change waits in the queue: applied once the cache took it,
// derived once what it derives is queued after it (or when it was
// derived itself).
type pending struct {
	ch      sources.Change
	applied bool
	derived bool
}

// NewLocal returns a feed that runs w, applies its changes to apply and
// appends them to log; Run runs it.
func NewLocal(w Watcher, apply Applier, log Log, opts LocalOptions) *Local {
	if opts.Source == "" {
		opts.Source = "sandbox"
	}
	if opts.Pause <= 0 {
		opts.Pause = 250 * time.Millisecond
	}
	if opts.MaxPause <= 0 {
		opts.MaxPause = 5 * time.Second
	}
	opts.MaxPause = max(opts.MaxPause, opts.Pause)
	if opts.MaxQueue <= 0 {
		opts.MaxQueue = DefaultMaxQueue
	}
	l := &Local{w: w, apply: apply, log: log, opts: opts, l: opts.Logger, wake: make(chan struct{}, 1), limit: opts.MaxQueue}
	if l.l == nil {
		l.l = slog.New(slog.DiscardHandler)
	}
	return l
}

// Run runs the watcher until ctx ends or the watcher returns, and
// returns its error once every change it reported is in the log, or ctx
// has ended.
func (l *Local) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { l.appendQueued(ctx) }) // ends when ctx does, or once the queue is empty after the watcher
	err := l.w.Run(ctx, l.report)
	l.mu.Lock()
	l.ended = true
	l.mu.Unlock()
	l.signal()
	wg.Wait()
	return err
}

// report applies changes to the cache and queues them for the log. It
// never waits for the log: a watcher that reports goes on watching.
func (l *Local) report(ctx context.Context, changes []sources.Change) {
	if len(changes) == 0 {
		return
	}
	err := l.apply.Apply(ctx, changes)
	if err != nil {
		// Applied again before they are appended.
		l.l.Debug("change feed: invalidation incomplete", "changes", len(changes), "error", err)
	}
	l.mu.Lock()
	for _, ch := range changes {
		l.queue = append(l.queue, pending{ch: ch, applied: err == nil, derived: l.opts.Derive == nil})
	}
	l.bound()
	l.mu.Unlock()
	l.signal()
}

func (l *Local) signal() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// bound coalesces the queue when it has grown past its limit, which
// then doubles what is left, so that a queue of many documents is not
// coalesced on every report. l.mu is held.
func (l *Local) bound() {
	if len(l.queue) <= l.limit {
		return
	}
	n := len(l.queue)
	l.queue = coalesce(l.queue)
	l.coalesced += n - len(l.queue)
	l.limit = max(l.opts.MaxQueue, 2*len(l.queue))
}

// coalesce keeps the newest change of each document (of each
// collection, for a flush), in the order of those newest changes. One
// that stands for changes not derived yet is derived with the document
// as it was before the first of them.
func coalesce(queue []pending) []pending {
	type doc struct{ collection, id string }
	newest := make(map[doc]int, len(queue))
	before := map[doc]*sources.Doc{} // of the first change not derived yet, by document
	underived := map[doc]bool{}
	for i, p := range queue {
		k := doc{p.ch.Collection, p.ch.ID}
		newest[k] = i
		if !p.derived && !underived[k] {
			underived[k], before[k] = true, p.ch.Before
		}
	}
	out := make([]pending, 0, len(newest))
	for i, p := range queue {
		k := doc{p.ch.Collection, p.ch.ID}
		if newest[k] != i {
			continue
		}
		if underived[k] {
			p.derived, p.ch.Before = false, before[k]
		}
		out = append(out, p)
	}
	return out
}

// take waits for queued changes and takes them all; false once ctx has
// ended, or the watcher has and the queue is empty.
func (l *Local) take(ctx context.Context) ([]pending, bool) {
	for {
		l.mu.Lock()
		batch, ended := l.queue, l.ended
		l.queue, l.limit = nil, l.opts.MaxQueue
		l.mu.Unlock()
		if len(batch) > 0 {
			return batch, true
		}
		if ended {
			return nil, false
		}
		select {
		case <-l.wake:
		case <-ctx.Done():
			return nil, false
		}
	}
}

// putBack returns a batch that failed to the head of the queue, before
// what was reported meanwhile.
func (l *Local) putBack(batch []pending) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.queue = append(batch, l.queue...)
	l.bound()
}

// process derives what batch derives, applies what the cache has not
// taken, then appends it all. On failure it returns the batch as far as
// it got, for the next try, and names the step that failed.
func (l *Local) process(ctx context.Context, batch []pending) (_ []pending, step string, err error) {
	if l.opts.Derive != nil {
		out := make([]pending, 0, len(batch))
		for i, p := range batch {
			if p.derived {
				out = append(out, p)
				continue
			}
			all, err := derive(ctx, l.opts.Derive, []sources.Change{p.ch})
			if err != nil {
				return append(out, batch[i:]...), "deriving what the changes obsolete", err
			}
			p.derived = true
			out = append(out, p)
			for _, d := range all[1:] {
				out = append(out, pending{ch: d, derived: true})
			}
		}
		batch = out
	}
	var todo []sources.Change
	for _, p := range batch {
		if !p.applied {
			todo = append(todo, p.ch)
		}
	}
	if len(todo) > 0 {
		if err := l.apply.Apply(ctx, todo); err != nil {
			return batch, "invalidating the cache", err
		}
		for i := range batch {
			batch[i].applied = true
		}
	}
	changes := make([]sources.Change, len(batch))
	for i, p := range batch {
		changes[i] = p.ch
	}
	if err := l.log.Append(ctx, l.opts.Source, changes); err != nil {
		return batch, "appending to the change log", err
	}
	return batch, "", nil
}

// appendQueued appends what is queued, in order, retrying a failed
// append before anything after it, until ctx ends or the watcher has
// and nothing is left.
func (l *Local) appendQueued(ctx context.Context) {
	pause := l.opts.Pause
	var down time.Time // when the outage began; zero while appends succeed
	retries := 0
	for {
		batch, ok := l.take(ctx)
		if !ok {
			break
		}
		batch, step, err := l.process(ctx, batch)
		if err == nil {
			if !down.IsZero() {
				l.mu.Lock()
				coalesced := l.coalesced
				l.coalesced = 0
				l.mu.Unlock()
				l.l.Info("change feed: the change log takes appends again; the queued changes are in it",
					"source", l.opts.Source, "down", time.Since(down).Round(time.Millisecond).String(), "retries", retries, "coalesced", coalesced)
				down, retries, pause = time.Time{}, 0, l.opts.Pause
			}
			continue
		}
		l.putBack(batch)
		if ctx.Err() != nil {
			break
		}
		if down.IsZero() {
			down = time.Now()
			l.l.Warn("change feed: "+step+" failed; retrying, with later changes queued behind",
				"source", l.opts.Source, "changes", len(batch), "error", err)
		} else {
			l.l.Debug("change feed: "+step+" failed again", "source", l.opts.Source, "error", err)
		}
		retries++
		if !sleep(ctx, pause) {
			break
		}
		pause = min(2*pause, l.opts.MaxPause)
	}
	l.mu.Lock()
	left := len(l.queue)
	l.mu.Unlock()
	if left > 0 {
		l.l.Warn("change feed: stopping with changes not in the change log (the other replicas' watchers may append them)",
			"source", l.opts.Source, "changes", left)
	}
}
