package redistier

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// Get reads the value under key. The request waits for it at most Timeout,
// less if ctx's budget has less left or ctx ends sooner; ok is false when
// Redis could not be asked or did not answer in that time (budget spent,
// breaker open, error, timeout): the caller then falls back on what it
// has. A missing key is (nil, true). A key holding something other than a
// string reads as an empty value, which the caller refuses as it refuses
// any value it did not write.
func (t *Tier) Get(ctx context.Context, key string) (val []byte, ok bool) {
	if t.rdb == nil {
		return nil, false
	}
	wait, ok := t.allot(ctx)
	if !ok || !t.breaker.allow() {
		return nil, false
	}
	b, err := t.get(ctx, key, wait)
	switch {
	case err == nil:
	case errors.Is(err, redis.Nil):
		return nil, true
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		// Something else lives under the key: foreign.
		b = nil
	default:
		t.metrics.redisErrors.Inc("get")
		t.log.Debug("redistier: get failed", "error", err)
		return nil, false
	}
	if b == nil {
		b = []byte{}
	}
	return b, true
}

// get reads key, and tells the breaker how the call went: through
// go-redis's auto-pipeliner when the client has one, so that concurrent
// hits share round trips, else with a plain GET.
//
// The request waits for the reply only as long as ctx and its allotted
// wait allow: a hung Redis costs a request its budget, never more. The call
// itself goes on, detached from the request, for up to sickAfter; only
// then is it a failure for the breaker. A reply that came after the
// request gave up (a process short of CPU wakes its goroutines late) is
// a success, and a request cancelled by its client says nothing about
// Redis.
func (t *Tier) get(ctx context.Context, key string, allotted time.Duration) ([]byte, error) {
	if t.pipe == nil {
		return t.getPlain(ctx, key, allotted)
	}
	start := time.Now()
	sick := t.sickAfter()
	wait, cancel := context.WithTimeout(ctx, allotted)
	defer cancel()
	defer t.spent(ctx, start, allotted)
	// The pipeliner runs commands on its own context: a queued command
	// does not see our deadline (its batch is bounded by the
	// connection's timeouts), so the reply is awaited here, in the
	// request's own goroutine, and no goroutine starts on the way.
	_, span := t.span(ctx, "GET")
	cmd := redis.NewStringCmd(ctx, "get", key)
	f := t.pipe.Submit(ctx, cmd)
	err := f.WaitContext(wait)
	if wait.Err() == nil || !errors.Is(err, wait.Err()) {
		t.metrics.redisGet.Observe(time.Since(start).Seconds())
		endSpan(span, err)
		t.breaker.done(healthy(err) && time.Since(start) < sick)
		if err != nil {
			return nil, err
		}
		return cmd.Bytes()
	}
	// The request gives up; the breaker hears how the call ends, within
	// sickAfter of start.
	t.calls.Add(1)
	go func() {
		defer t.calls.Done()
		judge, cancel := context.WithTimeout(context.Background(), sick-time.Since(start))
		defer cancel()
		err := f.WaitContext(judge)
		if judge.Err() != nil && errors.Is(err, judge.Err()) {
			// Look again: the deadline and the reply may have been ready
			// together after a long wait for the CPU (WaitContext looks at
			// the batch before the context).
			if err = f.WaitContext(judge); errors.Is(err, judge.Err()) {
				endSpan(span, err)
				t.breaker.done(false)
				return
			}
		}
		// Timed to its reply, like a get the request waited for.
		t.metrics.redisGet.Observe(time.Since(start).Seconds())
		endSpan(span, err)
		t.breaker.done(healthy(err))
	}()
	return nil, context.Cause(wait)
}

// getPlain is get without a pipeliner: the GET runs in a goroutine of its
// own, so that the request can stop waiting while the call goes on.
func (t *Tier) getPlain(ctx context.Context, key string, allotted time.Duration) ([]byte, error) {
	type reply struct {
		b   []byte
		err error
	}
	start := time.Now()
	sick := t.sickAfter()
	done := make(chan reply, 1)
	t.calls.Add(1)
	// Ends within sickAfter, the GET's deadline.
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sick)
		defer cancel()
		cctx, span := t.span(cctx, "GET")
		b, err := t.rdb.Get(cctx, key).Bytes()
		t.metrics.redisGet.Observe(time.Since(start).Seconds())
		endSpan(span, err)
		done <- reply{b, err}
	}()
	wait, cancel := context.WithTimeout(ctx, allotted)
	defer cancel()
	defer t.spent(ctx, start, allotted)
	select {
	case r := <-done:
		t.breaker.done(healthy(r.err) && time.Since(start) < sick)
		t.calls.Done()
		return r.b, r.err
	case <-wait.Done():
		// Ends within sickAfter of start.
		go func() {
			defer t.calls.Done()
			timer := time.NewTimer(sick - time.Since(start))
			defer timer.Stop()
			select {
			case r := <-done:
				t.breaker.done(healthy(r.err))
			case <-timer.C:
				// Look again: the timer and the reply may have been
				// ready together after a long wait for the CPU.
				select {
				case r := <-done:
					t.breaker.done(healthy(r.err))
				default:
					t.breaker.done(false)
				}
			}
		}()
		return nil, context.Cause(wait)
	}
}
