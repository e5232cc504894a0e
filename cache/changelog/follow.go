package changelog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/sources"
)

// The follower: one per replica, reading the stream with XREAD BLOCK,
// applying what it reads (Options.Apply) and waking the replica's
// waiters.
const (
	// followBlock is how long one read waits for entries. The read wakes
	// as soon as one is appended; the block bounds how long Close waits
	// for the follower (go-redis cannot cut a blocked read short) and
	// how often a quiet stream is checked. A read with no answer within
	// followBlock and the tier's control timeout fails (redistier).
	followBlock = time.Second
	// followCount bounds the entries one read returns.
	followCount = 1000
	// followBackoff is the pause after a failure, doubling up to
	// followMaxBackoff; the same for an Apply that fails.
	followBackoff    = 50 * time.Millisecond
	followMaxBackoff = 2 * time.Second
)

// follow reads the stream until ctx ends: the newest entries first
// (resync), then whatever is appended after them, checking after each
// read that the stream is the one it was reading (same epoch, nothing
// trimmed past the follower, nothing it had read lost), and reading its
// state again when not. A failed call makes the log unavailable until
// the next resync.
func (l *Log) follow(ctx context.Context) {
	defer close(l.done)
	defer l.start()
	pause := followBackoff
	for ctx.Err() == nil {
		err := l.resync(ctx)
		if err == nil {
			pause = followBackoff
			err = l.follows(ctx)
		}
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errLogFollow) {
			continue
		}
		l.lose(err, pause)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, followMaxBackoff)
	}
}

// lose notes that the follower cannot read the stream: reads and waits
// fail (unavailable) until it has read the stream's state again, and
// the waiters wake to say so.
func (l *Log) lose(err error, retry time.Duration) {
	l.m.following.Set(0)
	l.mu.Lock()
	was := l.down
	l.down, l.downApplying = err, false
	l.moved()
	l.mu.Unlock()
	l.start()
	if was == nil {
		l.log.Warn("changelog: cannot read the stream: /changes is unavailable until the follower reads it again", "error", err)
	} else {
		l.log.Debug("changelog: following the stream", "error", err, "retry_in", retry.String())
	}
}

// resync reads the stream's state and newest entries into the tail,
// after checking that the stream did not lose what the follower had
// read (if it did, the epoch ends), and applies what the follower had
// not: the entries after its position when the newest entries continue
// it, else a flush of every resource and then all of them.
func (l *Log) resync(ctx context.Context) error {
	st, recs, err := l.stream.StreamSnapshot(ctx, l.opts.Tail)
	if err != nil {
		return err
	}
	l.mu.RLock()
	epoch, prev, down := l.epoch, l.t.last, l.down
	known := l.known(epoch)
	l.mu.RUnlock()
	same := epoch != "" && st.Epoch == epoch
	if same {
		if err := l.checkTail(ctx, epoch, prev, known); err != nil {
			return err
		}
	}
	var t tail
	t.from, _ = parsePosition(st.Trimmed)
	for _, r := range recs {
		if e, ok := recordEntry(r); ok && t.from.less(e.pos) {
			t.push(e)
		}
	}
	if len(recs) >= l.opts.Tail && t.len() > 0 {
		// Older entries may be in the stream: the tail answers from its
		// oldest on.
		t.from = t.oldest().pos
	}
	t.last, _ = parsePosition(st.Last)
	apply, flush := t.entries[t.head:], true
	if same && !prev.less(t.from) {
		// The tail continues what was applied: what comes after it.
		apply, flush = apply[t.after(prev)-t.head:], false
	}
	ended := epoch != "" && st.Epoch != epoch
	if err := l.applyEntries(ctx, st.Epoch, ended, flush, t.from, apply); err != nil {
		return err
	}
	l.mu.Lock()
	if epoch != st.Epoch && epoch != "" {
		l.log.Warn("changelog: the stream is in a new epoch (Redis lost it, or entries it had handed out): tokens from before it are expired", "epoch", st.Epoch)
	}
	l.epoch, l.t, l.down, l.downApplying = st.Epoch, t, nil, false
	l.confirmMine()
	l.moved()
	l.mu.Unlock()
	l.start()
	if down != nil {
		l.log.Info("changelog: following the stream again", "epoch", st.Epoch)
	}
	l.m.length.Set(float64(st.Length))
	l.m.following.Set(1)
	return nil
}

// known are the entries this replica knows the stream of epoch held,
// newest first, for the follower to look for: the newest this
// replica appended, when its follower has not read that far, and the
// newest its follower read. Both, not the newer alone: entries appended
// after the stream lost its tail (a feed retrying what failed while
// Redis was down, before its follower read the stream again) are there,
// and say nothing of those the follower read before. l.mu is held.
func (l *Log) known(epoch string) []entry {
	var out []entry
	newest, held := l.t.newest()
	if l.mineEpoch != "" && l.mineEpoch == epoch && (!held || newest.pos.less(l.mine.pos)) {
		out = append(out, l.mine)
	}
	if held {
		out = append(out, newest)
	}
	return out
}

// confirmMine forgets the newest entry this replica appended once its
// follower has read the stream that far: the follower's own look at the
// newest entry it holds covers it from then on. l.mu is held.
func (l *Log) confirmMine() {
	if l.mineEpoch != "" && l.mineEpoch == l.epoch && !l.t.last.less(l.mine.pos) {
		l.mine, l.mineEpoch = entry{}, ""
	}
}

// checkTail checks, when the follower reads the state of a stream of
// the epoch it followed, that the stream still has what it read: its
// last id no older than the follower's position, and the entries of
// known (the newest the follower holds, and the newest this replica
// appended when newer) still there (unless trimmed). A stream that lost
// them (Redis restarted on persistence lacking its newest writes; a
// failover to a replica lacking them) ends the epoch, and errLogFollow
// has the follower read it again.
func (l *Log) checkTail(ctx context.Context, epoch string, prev position, known []entry) error {
	lk, ok, err := l.look(ctx, known)
	if err != nil {
		return err
	}
	if !ok || lk.st.Epoch != epoch {
		return errLogFollow
	}
	switch {
	case lk.head.less(prev):
		err = l.renew(ctx, epoch, "the stream's last id is older than one the follower read", "last", lk.st.Last, "read", prev.String())
	case lk.gone != nil:
		err = l.renew(ctx, epoch, "an entry this replica read or appended is not in the stream, and was not trimmed", "entry", lk.gone.pos.String(), "last", lk.st.Last)
	default:
		return nil
	}
	if err != nil {
		return err // the follower pauses, then finds the loss again
	}
	return errLogFollow
}

// A view is what the follower sees of the stream: its state, its last id
// and trim mark, and the first entry looked for that is gone (neither
// there nor trimmed), nil when none is.
type view struct {
	st            redistier.StreamState
	head, trimmed position
	gone          *entry
}

// look reads the stream's state and looks for each entry of known (one
// call each, the first with the state), stopping at the first gone; ok
// is false when there is no stream.
func (l *Log) look(ctx context.Context, known []entry) (v view, ok bool, err error) {
	for i, e := range known {
		st, rec, ok, err := l.stream.StreamCheck(ctx, e.pos.String())
		if err != nil || !ok {
			return v, ok, err
		}
		if i == 0 {
			v.st = st
			v.head, _ = parsePosition(st.Last)
			v.trimmed, _ = parsePosition(st.Trimmed)
		} else if st.Epoch != v.st.Epoch {
			return v, true, nil // renewed meanwhile: the caller sees another epoch next time
		}
		if trimmed, _ := parsePosition(st.Trimmed); trimmed.less(e.pos) && !sameEntry(rec, e) {
			v.gone = &known[i]
			return v, true, nil
		}
	}
	if len(known) == 0 {
		st, _, ok, err := l.stream.StreamCheck(ctx, "")
		if err != nil || !ok {
			return v, ok, err
		}
		v.st = st
		v.head, _ = parsePosition(st.Last)
		v.trimmed, _ = parsePosition(st.Trimmed)
	}
	return v, true, nil
}

// sameEntry reports whether rec is e's record.
func sameEntry(rec *redistier.StreamRecord, e entry) bool {
	if rec == nil {
		return false
	}
	got, ok := recordEntry(*rec)
	return ok && got == e
}

// renew ends the epoch old, since the stream lost entries it had handed
// out: every token of it expires (410), and the clients resync. One
// replica renews it; the others that find the same loss find it renewed.
func (l *Log) renew(ctx context.Context, old, why string, attrs ...any) error {
	epoch, renewed, err := l.stream.StreamRenew(ctx, old)
	if err != nil {
		l.log.Warn("changelog: the stream lost entries it had handed out, and ending its epoch failed", append(attrs, "why", why, "error", err)...)
		return err
	}
	if renewed {
		l.m.lost.Inc()
		l.log.Warn("changelog: the stream lost entries it had handed out: its epoch ends, and every client resyncs (410)",
			append(attrs, "why", why, "old_epoch", old, "epoch", epoch)...)
	}
	l.nudge()
	return nil
}

// follows reads what is appended after the tail, applies it and adds it
// to the tail, until the stream is no longer the one the tail continues
// (errLogFollow), a call fails, or ctx ends.
func (l *Log) follows(ctx context.Context) error {
	for {
		select {
		case <-l.kick:
			return errLogFollow
		default:
		}
		l.mu.RLock()
		epoch, last := l.epoch, l.t.last
		known := l.known(epoch)
		l.mu.RUnlock()
		recs, err := l.stream.StreamRead(ctx, last.String(), followBlock, followCount)
		if err != nil {
			return err
		}
		// After every read, a quiet one too: a stream that lost its tail
		// and was appended to since looks like one that goes on.
		lk, ok, err := l.look(ctx, known)
		if err != nil {
			return err
		}
		if !ok || lk.st.Epoch != epoch || last.less(lk.trimmed) || lk.head.less(last) || lk.gone != nil {
			// Another life of the stream, entries after ours trimmed
			// before we read them, or entries we read lost: start again
			// from its state (resync tells which).
			return errLogFollow
		}
		l.m.length.Set(float64(lk.st.Length))
		var read []entry
		for _, r := range recs {
			if e, ok := recordEntry(r); ok && last.less(e.pos) && (len(read) == 0 || read[len(read)-1].pos.less(e.pos)) {
				read = append(read, e)
			}
		}
		if len(read) == 0 {
			continue
		}
		if err := l.applyEntries(ctx, epoch, false, false, position{}, read); err != nil {
			return err
		}
		l.extend(read)
	}
}

// extend adds entries the follower read and applied to the tail, within
// its bound.
func (l *Log) extend(read []entry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, e := range read {
		l.t.push(e)
	}
	for l.t.len() > l.opts.Tail {
		l.t.drop()
	}
	l.confirmMine()
	// Redis's clock against ours: skew shows here too.
	l.m.lag.Set(max(float64(l.now().UnixMilli()-int64(read[len(read)-1].pos.ms))/1000, 0))
	l.moved()
}

// applyEntries hands entries of epoch to Options.Apply, after a flush of
// every resource (at position from) when flush is set, and retries
// until it succeeds or ctx ends: the log never counts an entry applied
// that was not.
func (l *Log) applyEntries(ctx context.Context, epoch string, ended, flush bool, from position, entries []entry) error {
	if l.opts.Apply == nil {
		return nil
	}
	if ea, ok := l.opts.Apply.(EpochApplier); ok && ended {
		if err := l.retryApply(ctx, 1, ea.EpochEnded); err != nil {
			return err
		}
	}
	var batch []sources.LogEntry
	if flush {
		tok := token{epoch: epoch, pos: from}.String()
		for _, r := range sources.Resources() {
			batch = append(batch, sources.LogEntry{Token: tok, Resource: r.Name, Op: sources.OpFlush})
		}
	}
	for i := range entries {
		if e := &entries[i]; e.res != noResource {
			batch = append(batch, e.logEntry(epoch))
		}
	}
	if len(batch) == 0 {
		return nil
	}
	return l.retryApply(ctx, len(batch), func(ctx context.Context) error { return l.opts.Apply.ApplyEntries(ctx, batch) })
}

// retryApply calls apply (of n entries) until it succeeds or ctx ends,
// each call bounded by applyTimeout, after a growing pause; failing for
// applyGrace makes this replica unavailable until it succeeds.
func (l *Log) retryApply(ctx context.Context, n int, apply func(context.Context) error) error {
	pause := followBackoff
	var since time.Time // of the first failure
	for failures := 0; ; failures++ {
		actx, cancel := context.WithTimeout(ctx, applyTimeout)
		err := apply(actx)
		cancel()
		if err == nil {
			if failures > 0 {
				l.log.Info("changelog: applied the entries after failures", "entries", n, "failures", failures)
				l.applying(nil)
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		l.m.applyErrors.Inc()
		if failures == 0 {
			since = l.now()
			l.log.Warn("changelog: applying entries on this replica failed; retrying, and no later entry counts as applied before", "entries", n, "error", err)
		} else {
			l.log.Debug("changelog: applying entries failed again", "error", err)
		}
		if l.now().Sub(since) >= applyGrace {
			l.applying(err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, followMaxBackoff)
	}
}

const (
	// applyTimeout bounds one call of Options.Apply: one that hangs
	// fails, and is retried, rather than hold the follower for ever
	// unseen.
	applyTimeout = 10 * time.Second
	// applyGrace is how long Options.Apply may go on failing (a sandbox
	// file read half-written fails a reload or two) before this replica
	// counts as unable to follow the log.
	applyGrace = 5 * time.Second
)

// applying notes, in front of Redis, that the follower has not been able
// to apply what it read for applyGrace (err), or can again (nil): this
// replica is then as unavailable as when it cannot read the stream,
// since it cannot hand out what comes next. The ring's appends fail
// instead, and their callers retry.
func (l *Log) applying(err error) {
	if l.stream == nil {
		return
	}
	l.mu.Lock()
	switch {
	case err != nil:
		l.down, l.downApplying = fmt.Errorf("applying the entries read: %w", err), true
		l.m.following.Set(0)
	case l.downApplying:
		l.down, l.downApplying = nil, false
		l.m.following.Set(1)
	}
	l.moved()
	l.mu.Unlock()
	// The first failure lets the reads that wait for the follower's
	// first look go on (unavailable).
	l.start()
}
