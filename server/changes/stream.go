package changes

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prodapi/prodapi/server/httperr"
)

// Why a stream's context ended, when the server ended it.
var (
	errTokenExpired = errors.New("changes: the stream's token expired")
	errDraining     = errors.New("changes: the server drains")
	errStreamLimit  = errors.New("changes: too many change streams")
)

// waiters are the /changes requests that wait, event streams (at most
// max) and long polls, so that End can end them at once.
type waiters struct {
	max int

	mu       sync.Mutex
	streams  int
	draining bool
	ends     map[*context.CancelCauseFunc]struct{}
}

func newWaiters(max int) *waiters {
	return &waiters{max: max, ends: map[*context.CancelCauseFunc]struct{}{}}
}

// join registers a waiter, which End ends with cancel(errDraining).
// It fails while the server drains, or for a stream when max are open.
func (ws *waiters) join(cancel context.CancelCauseFunc, stream bool) (leave func(), err error) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	switch {
	case ws.draining:
		return nil, errDraining
	case stream && ws.streams >= ws.max:
		return nil, errStreamLimit
	}
	if stream {
		ws.streams++
	}
	key := &cancel
	ws.ends[key] = struct{}{}
	return func() {
		ws.mu.Lock()
		defer ws.mu.Unlock()
		delete(ws.ends, key)
		if stream {
			ws.streams--
		}
	}, nil
}

func (ws *waiters) drain() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.draining = true
	for end := range ws.ends {
		(*end)(errDraining)
	}
}

// stream answers /changes as Server-Sent Events: the entries after
// since, then each one as it arrives, with a comment after every
// Heartbeat of silence, until the client leaves, its token expires (a
// last "close" event says so), its position leaves the log, the log
// fails, or the server drains. A stream that opens is timed, from then
// to its end, in prodapi_changes_stream_seconds rather than the server's
// request histogram.
func (f *Feed) stream(w http.ResponseWriter, r *http.Request, c Caller, p *changeParams) error {
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	leave, err := f.waiters.join(cancel, true)
	if err != nil {
		return f.refuse(err)
	}
	defer leave()
	// The first read answers in the envelope when it fails (410, 503).
	entries, next, err := f.read(ctx, p.from, p)
	if errors.Is(context.Cause(ctx), errDraining) {
		return f.refuse(errDraining)
	}
	if err != nil {
		return f.logError(err)
	}
	// So does the first page's documents.
	pg, err := f.newPage(ctx, c, p, entries, next)
	if errors.Is(context.Cause(ctx), errDraining) {
		return f.refuse(errDraining)
	}
	if err != nil {
		return f.logError(err)
	}
	if left, ok := c.Expires(); ok {
		stop := f.opts.AfterFunc(left, func() { cancel(errTokenExpired) })
		defer stop()
	}
	c.Waits()
	opened := time.Now()
	defer func() { f.metrics.streamTime.Observe(time.Since(opened).Seconds()) }()
	f.metrics.streams.Inc()
	defer f.metrics.streams.Dec()

	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // a proxy that buffers would hold events back
	st := &eventStream{f: f, w: w, rc: http.NewResponseController(w), c: c, p: p}
	w.WriteHeader(http.StatusOK)
	if err := st.write(nil); err != nil {
		return st.dropped(err)
	}
	// The answer is written: why the server ended it is for the access
	// log alone.
	return st.run(ctx, p.from, pg)
}

// refuse is the 503 of a stream that cannot open: the server holds as
// many as it may (errStreamLimit), or drains (errDraining).
func (f *Feed) refuse(why error) error {
	f.metrics.refused.Inc()
	return &httperr.Error{Status: http.StatusServiceUnavailable, Msg: msgTooManyStreams, Err: why,
		Header: http.Header{"Retry-After": {"5"}}}
}

// An eventStream writes one stream's events.
type eventStream struct {
	f   *Feed
	w   http.ResponseWriter
	rc  *http.ResponseController
	c   Caller
	p   *changeParams
	buf []byte
}

// run follows the log from pos, where a first read made pg, until the
// stream ends. It returns why the server ended it, nil when the client
// did.
func (st *eventStream) run(ctx context.Context, pos string, pg *page) error {
	f := st.f
	beat := f.newBeat(ctx)
	defer func() { beat.stop() }()
	rebeat := func() {
		beat.stop()
		beat = f.newBeat(ctx)
	}
	for {
		if ctx.Err() != nil {
			// Ended (the token expired, the server drains, the client
			// left): not another word but the close event.
			return st.ended(ctx)
		}
		if len(pg.entries) > 0 {
			if err := st.send(pg); err != nil {
				return st.dropped(err)
			}
			rebeat()
		}
		caughtUp := pg.next == pos
		pos = pg.next
		if caughtUp {
			if beat.due() {
				if err := st.keepalive(); err != nil {
					return st.dropped(err)
				}
				rebeat()
			}
			if err := f.log.Wait(beat.ctx, pos); err != nil {
				switch {
				case ctx.Err() != nil:
					return st.ended(ctx)
				case beat.due():
					pg = &page{next: pos}
					continue
				}
				return st.failed(err)
			}
		}
		entries, next, err := f.read(ctx, pos, st.p)
		if err == nil {
			pg, err = f.newPage(ctx, st.c, st.p, entries, next)
		}
		if err != nil {
			if ctx.Err() != nil {
				return st.ended(ctx)
			}
			return st.failed(err)
		}
	}
}

// errHeartbeat ends a beat's context when the stream has been silent
// for the Heartbeat interval.
var errHeartbeat = errors.New("changes: the heartbeat is due")

// A beat is a stream's heartbeat: its context ends once the stream has
// been silent for the Heartbeat interval (or when the stream's does).
type beat struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  func() bool
}

func (f *Feed) newBeat(parent context.Context) *beat {
	ctx, cancel := context.WithCancelCause(parent)
	return &beat{ctx: ctx, cancel: cancel, timer: f.opts.AfterFunc(f.opts.Heartbeat, func() { cancel(errHeartbeat) })}
}

// due reports whether the heartbeat's time came: its own timer, never
// the end of the stream's context.
func (b *beat) due() bool { return errors.Is(context.Cause(b.ctx), errHeartbeat) }

func (b *beat) stop() {
	b.timer()
	b.cancel(nil)
}

// maxWrite is the most a stream buffers before it writes: a burst of
// documents goes out in parts.
const maxWrite = 1 << 20

// send writes the page's entries as events, "id: <position>", "event:
// change", "data: <the entry as JSON>", and flushes them. Each id is the
// entry's token sealed anew: only an entry the token may read moves the
// id a client resumes from.
func (st *eventStream) send(pg *page) error {
	b := st.buf[:0]
	for i, e := range pg.entries {
		id, err := st.f.sealed(e.Token)
		if err != nil {
			return err
		}
		b = append(b, "id: "...)
		b = append(b, id...)
		b = append(b, "\nevent: change\ndata: "...)
		b = append(b, pg.items[i]...)
		b = append(b, "\n\n"...)
		if len(b) >= maxWrite && i < len(pg.entries)-1 {
			if err := st.write(b); err != nil {
				return err
			}
			b = b[:0]
		}
	}
	if err := st.write(b); err != nil {
		return err
	}
	st.buf = b
	if cap(b) > 2*maxWrite {
		st.buf = nil // one huge event must not pin its buffer
	}
	st.f.metrics.deliver(transportSSE, pg.entries, st.f.opts.Now())
	return nil
}

// keepalive writes the heartbeat: a comment, and nothing else, so that
// it says nothing of what the log holds.
func (st *eventStream) keepalive() error {
	return st.write(keepaliveComment)
}

var keepaliveComment = []byte(": keepalive\n\n")

// close writes the last event, "close", whose data is the error envelope
// saying why the stream ends.
func (st *eventStream) close(status int, msg string) {
	b := append(st.buf[:0], "event: close\ndata: "...)
	b = append(b, httperr.Body(status, msg)...)
	b = append(b, "\n\n"...)
	st.write(b) // the stream ends whether this arrives or not
}

// write writes b and flushes it, under its own deadline: the server's
// write timeout, set once per request, would cut the stream.
func (st *eventStream) write(b []byte) error {
	st.rc.SetWriteDeadline(time.Now().Add(st.f.opts.WriteTimeout))
	if _, err := st.w.Write(b); err != nil {
		return err
	}
	return st.flush()
}

// flush sends what is written, under the deadline write set.
func (st *eventStream) flush() error {
	if err := st.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// dropped ends a stream whose write failed: a consumer too slow to take
// it in time is counted; one that went away is not.
func (st *eventStream) dropped(err error) error {
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	st.f.metrics.dropped.Inc(dropSlow)
	return fmt.Errorf("changes: change stream dropped: %w", err)
}

// ended ends a stream whose context ended: the token expired (a close
// event says so), the server drains (nothing more is written), or the
// client went away.
func (st *eventStream) ended(ctx context.Context) error {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errTokenExpired):
		st.f.metrics.dropped.Inc(dropExpired)
		st.close(http.StatusUnauthorized, msgStreamExpired)
	case errors.Is(cause, errDraining):
		st.f.metrics.dropped.Inc(dropShutdown)
	default:
		return nil
	}
	return cause
}

// failed ends a stream whose read of the log failed, with a close event
// in the terms of the answer a new request would get (410, 503).
func (st *eventStream) failed(err error) error {
	he, ok := errors.AsType[*httperr.Error](st.f.logError(err))
	if !ok {
		// A cancellation the log reports while the stream's context
		// lives: the log failed.
		he = unavailable(err)
	}
	reason := dropUnavailable
	if he.Status == http.StatusGone {
		reason = dropGone
	}
	st.f.metrics.dropped.Inc(reason)
	st.close(he.Status, he.Msg)
	return he
}
