package changes

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prodapi/prodapi/server/httperr"
)

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
	wt := &waiter{kind: waitStream, client: c.Client(), cancel: cancel}
	if err := f.waiters.join(ctx, wt); err != nil {
		return f.refusal(err)
	}
	defer f.waiters.leave(wt)
	// The first read answers in the envelope when it fails (410, 503).
	entries, next, err := f.read(ctx, p.from, p)
	if errors.Is(context.Cause(ctx), errDraining) {
		return f.refusal(errDraining)
	}
	if err != nil {
		return f.logError(err)
	}
	// So does the first page's documents.
	pg, err := f.newPage(ctx, c, p, entries, next)
	if errors.Is(context.Cause(ctx), errDraining) {
		return f.refusal(errDraining)
	}
	if err != nil {
		return f.logError(err)
	}
	// It lives until its token expires or for MaxStreamAge, whichever
	// ends first: then the client reconnects, and its token is checked
	// again.
	life, why := f.opts.MaxStreamAge, errStreamAge
	if left, ok := c.Expires(); ok && left <= life {
		life, why = left, errTokenExpired
	}
	stop := f.opts.AfterFunc(life, func() { cancel(why) })
	defer stop()
	limitSendBuffer(c.Conn())
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

// streamSendBuffer is the kernel send buffer of a stream's connection
// (SO_SNDBUF, which Linux doubles for its bookkeeping): a consumer that
// stops reading blocks the stream's writes once about this much waits
// for it, and WriteTimeout then drops it, rather than after the
// megabytes the kernel's autotuning would queue.
const streamSendBuffer = 64 << 10

// limitSendBuffer caps the send buffer of c, found under the listener's
// wrappers (their NetConn); a connection that has none to set (not
// TCP, or unknown) is left as it is.
func limitSendBuffer(c net.Conn) {
	for c != nil {
		if b, ok := c.(interface{ SetWriteBuffer(int) error }); ok {
			_ = b.SetWriteBuffer(streamSendBuffer) // best effort: WriteTimeout still bounds the stream
			return
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		c = u.NetConn()
	}
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
	st.closeRetry(status, msg, "")
}

// closeRetry writes the last event, with a retry field when retry is not
// empty: how many milliseconds an EventSource waits before it
// reconnects.
func (st *eventStream) closeRetry(status int, msg, retry string) {
	b := st.buf[:0]
	if retry != "" {
		b = append(b, "retry: "...)
		b = append(b, retry...)
		b = append(b, '\n')
	}
	b = append(b, "event: close\ndata: "...)
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

// ended ends a stream whose context ended: the token expired or the
// stream reached MaxStreamAge (a close event says so), the server drains
// (nothing more is written), or the client went away.
func (st *eventStream) ended(ctx context.Context) error {
	cause := context.Cause(ctx)
	switch {
	case errors.Is(cause, errTokenExpired):
		st.f.metrics.dropped.Inc(dropExpired)
		st.close(http.StatusUnauthorized, msgStreamExpired)
	case errors.Is(cause, errStreamAge):
		// Reconnect at once (Retry-After: 0): the new request's token
		// is checked, its scopes read anew.
		st.f.metrics.dropped.Inc(dropMaxAge)
		st.closeRetry(http.StatusServiceUnavailable, msgStreamAge, "0")
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
