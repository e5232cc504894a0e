package changelog

import (
	"context"
	"errors"
	"time"

	"github.com/prodapi/prodapi/cache/redistier"
)

// The follower: one per replica, reading the stream with XREAD BLOCK and
// waking the replica's waiters.
const (
	// followBlock is how long one read waits for entries. The read wakes
	// as soon as one is appended; the block only bounds how long Close
	// waits for the follower (go-redis cannot cut a blocked read short).
	followBlock = time.Second
	// followCount bounds the entries one read returns.
	followCount = 1000
	// followBackoff is the pause after a failure, doubling up to
	// followMaxBackoff.
	followBackoff    = 50 * time.Millisecond
	followMaxBackoff = 2 * time.Second
)

// follow reads the stream until ctx ends: the newest entries first
// (resync), then whatever is appended after them, checking after each
// batch that the stream is the one it was reading (same epoch, nothing
// trimmed past the follower), and reading its state again when not.
func (l *Log) follow(ctx context.Context) {
	defer close(l.done)
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
		l.m.following.Set(0)
		l.log.Debug("changelog: following the stream", "error", err, "retry_in", pause)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		pause = min(2*pause, followMaxBackoff)
	}
}

// resync reads the stream's state and newest entries into the tail.
func (l *Log) resync(ctx context.Context) error {
	st, recs, err := l.stream.StreamSnapshot(ctx, l.opts.Tail)
	if err != nil {
		return err
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
	l.mu.Lock()
	if l.epoch != st.Epoch && l.epoch != "" {
		l.log.Warn("changelog: the stream is new (Redis lost it, or it was deleted): tokens from before it are expired", "epoch", st.Epoch)
	}
	l.epoch, l.t = st.Epoch, t
	l.moved()
	l.mu.Unlock()
	l.m.length.Set(float64(st.Length))
	l.m.following.Set(1)
	return nil
}

// follows reads what is appended after the tail, until the stream is no
// longer the one the tail continues (errLogFollow), a read fails, or ctx
// ends.
func (l *Log) follows(ctx context.Context) error {
	for {
		select {
		case <-l.kick:
			return errLogFollow
		default:
		}
		l.mu.RLock()
		epoch, last := l.epoch, l.t.last
		l.mu.RUnlock()
		recs, err := l.stream.StreamRead(ctx, last.String(), followBlock, followCount)
		if err != nil {
			return err
		}
		if len(recs) == 0 {
			continue
		}
		st, err := l.stream.StreamMeta(ctx)
		if err != nil {
			return err
		}
		if trimmed, _ := parsePosition(st.Trimmed); st.Epoch != epoch || last.less(trimmed) {
			// Another life of the stream, or entries after ours
			// trimmed before we read them: start again from its state.
			return errLogFollow
		}
		l.extend(recs)
		l.m.length.Set(float64(st.Length))
	}
}

// extend adds what the follower read to the tail, within its bound.
func (l *Log) extend(recs []redistier.StreamRecord) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var newest int64
	for _, r := range recs {
		e, ok := recordEntry(r)
		if !ok || !l.t.last.less(e.pos) {
			continue
		}
		l.t.push(e)
		newest = int64(e.pos.ms)
	}
	for l.t.len() > l.opts.Tail {
		l.t.drop()
	}
	if newest != 0 {
		// Redis's clock against ours: skew shows here too.
		l.m.lag.Set(max(float64(l.now().UnixMilli()-newest)/1000, 0))
	}
	l.moved()
}
