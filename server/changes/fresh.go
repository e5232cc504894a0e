package changes

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/sources"
)

// Messages of a position not applied in time.
const (
	msgNotApplied = "min_position: this server has not yet applied the changes up to this position; try again shortly"
)

// AtLeast waits until this replica has applied every entry of the log up
// to pos, the min_position of a list or detail request, so that its
// answer reflects them all; the server then answers it from nothing
// older (sources.Query.Fresh). It waits MinPositionWait at most, then
// answers 503 with Retry-After. For a search list (search), whose index
// shows a write about a second after the database, it then also waits
// until SearchLag has passed since the position was handed out (the log
// held every entry up to it by then; SearchLag at most), and returns
// that time: no list loaded before it may answer (zero for the others).
//
// The wait counts against client's cap (Options.ClientMaxWaits; "":
// none), as a long poll does.
//
// Errors are answers: 400 for what is not a position, 410 for one that
// does not open or that the log can no longer continue (resync), 429 at
// the client's cap, 503 for a log that cannot be read, time running out
// or the server draining, and ctx's error when the client leaves.
func (f *Feed) AtLeast(ctx context.Context, client, pos string, search bool) (storedAfter time.Time, err error) {
	tok, issued, err := f.openPosition(pos, "min_position")
	if err != nil {
		if isGone(err) {
			f.metrics.gone.Inc()
		}
		return time.Time{}, err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	wt := &waiter{kind: waitPosition, client: client, cancel: cancel}
	switch err := f.waiters.join(ctx, wt); {
	case errors.Is(err, errDraining):
		// No wait, but what is applied already answers.
		cancel(err)
	case err != nil:
		return time.Time{}, f.refusal(err)
	default:
		defer f.waiters.leave(wt)
	}
	start := f.opts.Now()
	stop := f.opts.AfterFunc(f.opts.MinPositionWait, func() { cancel(errNotApplied) })
	err = f.waitErr(ctx, f.log.WaitApplied(ctx, tok), "min_position", msgNotApplied)
	stop()
	if err != nil || !search {
		return time.Time{}, err
	}
	// The index refreshes within SearchLag of the database's write, which
	// came before the entry, which came before the position. A position
	// handed out by a clock ahead of this one waits SearchLag at most.
	if issued.After(start) {
		issued = start
	}
	storedAfter = issued.Add(f.opts.SearchLag)
	if d := storedAfter.Sub(f.opts.Now()); d > 0 {
		lagged := make(chan struct{})
		stop := f.opts.AfterFunc(d, func() { close(lagged) })
		defer stop()
		select {
		case <-lagged:
		case <-ctx.Done():
			return time.Time{}, f.waitErr(ctx, ctx.Err(), "min_position", msgNotApplied)
		}
	}
	return storedAfter, nil
}

// applied waits, up to MinPositionWait, until this replica has applied
// every entry up to token (include=doc). The log's failures are its
// own (410, 503); the time running out is a 503 saying msg.
func (f *Feed) applied(ctx context.Context, token, msg string) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := f.opts.AfterFunc(f.opts.MinPositionWait, func() { cancel(errNotApplied) })
	defer stop()
	return f.waitErr(ctx, f.log.WaitApplied(ctx, token), "since", msg)
}

// waitErr is the answer to a wait for this replica to apply a position
// that ended with err on ctx: nil, a 503 saying msg when the time ran out
// or the server drains, the log's 410 (for param) and 503, or the
// client's own cancellation.
func (f *Feed) waitErr(ctx context.Context, err error, param, msg string) error {
	cause := context.Cause(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(cause, errNotApplied), errors.Is(cause, errDraining):
		return notApplied(msg, cause)
	}
	if kind, _ := sources.Classify(err); kind == sources.KindExpired {
		f.metrics.gone.Inc()
		return &httperr.Error{Status: http.StatusGone, Msg: param + msgChangesGone[len("since"):], Err: err}
	}
	return f.logError(err)
}

// notApplied is the 503 of a position this replica did not apply in
// time.
func notApplied(msg string, why error) *httperr.Error {
	return &httperr.Error{Status: http.StatusServiceUnavailable, Msg: msg, Err: why,
		Header: http.Header{"Retry-After": {"1"}}}
}
