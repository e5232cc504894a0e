package cache

import (
	"context"
	"errors"
	"hash/maphash"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Writes to Redis leave the request path: they are queued, per key on one
// of writers goroutines (so the writes of one key keep their order), and
// dropped and counted when a queue is full.
const (
	writers    = 4
	writeQueue = 256
)

type writeOp struct {
	key    string
	val    []byte // nil: delete the key
	ttl    time.Duration
	parent trace.SpanContext // the request's span, when tracing: the write's span goes under it
	// done, when set, is closed once the write was made or dropped.
	done chan struct{}
}

func (op writeOp) finish() {
	if op.done != nil {
		close(op.done)
	}
}

// spanOf is the span of ctx when tracing, for a write to go under.
func (c *Cache) spanOf(ctx context.Context) trace.SpanContext {
	if c.tracer == nil {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(ctx)
}

// redisSpan starts the span of one Redis call when tracing; end ends it
// with the call's error. Without a tracer both cost nothing.
func (c *Cache) redisSpan(ctx context.Context, op string) (context.Context, trace.Span) {
	if c.tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nil
	}
	return c.tracer.Start(ctx, "redis "+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system.name", "redis"), attribute.String("db.operation.name", op)))
}

func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil && !errors.Is(err, redis.Nil) {
		span.RecordError(err)
		span.SetStatus(codes.Error, "")
	}
	span.End()
}

// redisGet reads key from Redis under the Redis timeout. ok is false when
// Redis could not be asked or did not answer (breaker open, error,
// timeout): the caller then falls back on what it has. A missing key is
// (nil, true); a value that does not decode is counted, queued for
// deletion and reported as missing. get tells the breaker how the call
// went.
func (c *Cache) redisGet(ctx context.Context, key string) (e *entry, ok bool) {
	if c.rdb == nil || !c.breaker.allow() {
		return nil, false
	}
	b, err := c.get(ctx, key)
	switch {
	case err == nil:
	case errors.Is(err, redis.Nil):
		return nil, true
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		// Something else lives under our key: foreign.
		b = nil
	default:
		c.metrics.redisErrors.Inc("get")
		c.log.Debug("cache: redis get failed", "error", err)
		return nil, false
	}
	e, err = decodeTagged(key, b)
	if err != nil {
		c.metrics.corrupt.Inc()
		c.log.Warn("cache: dropping a corrupt or foreign value", "key", key)
		c.enqueue(writeOp{key: key, parent: c.spanOf(ctx)})
		return nil, true
	}
	return e, true
}

// redisHealthy reports whether a call's error leaves Redis looking well:
// no error, a missing key, or a reply error (loading, out of memory,
// WRONGTYPE: it came back, so Redis is there).
func redisHealthy(err error) bool {
	var reply redis.Error
	return err == nil || errors.As(err, &reply)
}

// sickAfter is how long a call may go unanswered before it counts
// against Redis: well past any scheduling delay of a busy process, well
// short of the connection's own read timeout.
func (c *Cache) sickAfter() time.Duration { return max(time.Second, 4*c.redisTimeout) }

// enqueue hands a write to its writer without waiting. It is dropped
// (and counted) when the cache is closed, the breaker is open or the
// queue is full.
func (c *Cache) enqueue(op writeOp) {
	if c.rdb == nil {
		op.finish()
		return
	}
	if c.breaker.isOpen() {
		c.metrics.writesDropped.Inc("breaker_open")
		op.finish()
		return
	}
	c.wmu.RLock()
	defer c.wmu.RUnlock()
	if c.wclosed {
		c.metrics.writesDropped.Inc("closed")
		op.finish()
		return
	}
	q := c.queues[maphash.String(c.seed, op.key)%writers]
	c.pending.Add(1)
	select {
	case q <- op:
	default:
		c.pending.Done()
		c.metrics.writesDropped.Inc("queue_full")
		op.finish()
	}
}

// writer makes the writes of one queue. It ends when Close closes the
// queue and the queue is drained; after Close gives up waiting (abort),
// the rest is dropped.
func (c *Cache) writer(q <-chan writeOp) {
	defer c.writersDone.Done()
	for op := range q {
		select {
		case <-c.abort:
			c.metrics.writesDropped.Inc("closed")
		default:
			c.write(op)
		}
		op.finish()
		c.pending.Done()
	}
}

func (c *Cache) write(op writeOp) {
	if !c.breaker.allow() {
		c.metrics.writesDropped.Inc("breaker_open")
		return
	}
	// Off the request path: a write may take as long as it takes to
	// tell a slow reply from a sick Redis.
	ctx, cancel := context.WithTimeout(context.Background(), c.sickAfter())
	defer cancel()
	var err error
	opName := "set"
	if op.parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, op.parent)
	}
	start := time.Now()
	if op.val == nil {
		opName = "del"
		sctx, span := c.redisSpan(ctx, "DEL")
		err = c.rdb.Del(sctx, op.key).Err()
		c.metrics.redisDel.Observe(time.Since(start).Seconds())
		endSpan(span, err)
	} else {
		sctx, span := c.redisSpan(ctx, "SET")
		err = c.rdb.Set(sctx, op.key, op.val, op.ttl).Err()
		c.metrics.redisSet.Observe(time.Since(start).Seconds())
		endSpan(span, err)
	}
	// A reply error (out of memory, read-only replica) means Redis is
	// there: it counts, but does not trip the breaker, so reads go on.
	c.breaker.done(redisHealthy(err))
	if err != nil {
		c.metrics.redisErrors.Inc(opName)
		c.log.Debug("cache: redis write failed", "op", opName, "error", err)
	}
}

// get reads key, and tells the breaker how the call went: through
// go-redis's auto-pipeliner when the client has one, so that concurrent
// hits share round trips, else with a plain GET.
//
// The request waits for the reply only as long as ctx and RedisTimeout
// allow: a hung Redis costs a request RedisTimeout, never more. The call
// itself goes on, detached from the request, for up to sickAfter; only
// then is it a failure for the breaker. A reply that came after the
// request gave up (a process short of CPU wakes its goroutines late) is
// a success, and a request cancelled by its client says nothing about
// Redis.
func (c *Cache) get(ctx context.Context, key string) ([]byte, error) {
	if c.pipe == nil {
		return c.getPlain(ctx, key)
	}
	start := time.Now()
	sick := c.sickAfter()
	wait, cancel := context.WithTimeout(ctx, c.redisTimeout)
	defer cancel()
	// The pipeliner runs commands on its own context: a queued command
	// does not see our deadline (its batch is bounded by the
	// connection's timeouts), so the reply is awaited here, in the
	// request's own goroutine, and no goroutine starts on the way.
	_, span := c.redisSpan(ctx, "GET")
	cmd := redis.NewStringCmd(ctx, "get", key)
	f := c.pipe.Submit(ctx, cmd)
	err := f.WaitContext(wait)
	if wait.Err() == nil || !errors.Is(err, wait.Err()) {
		c.metrics.redisGet.Observe(time.Since(start).Seconds())
		endSpan(span, err)
		c.breaker.done(redisHealthy(err) && time.Since(start) < sick)
		if err != nil {
			return nil, err
		}
		return cmd.Bytes()
	}
	// The request gives up; the breaker hears how the call ends, within
	// sickAfter of start.
	c.calls.Add(1)
	go func() {
		defer c.calls.Done()
		judge, cancel := context.WithTimeout(context.Background(), sick-time.Since(start))
		defer cancel()
		err := f.WaitContext(judge)
		if judge.Err() != nil && errors.Is(err, judge.Err()) {
			// Look again: the deadline and the reply may have been ready
			// together after a long wait for the CPU (WaitContext looks at
			// the batch before the context).
			if err = f.WaitContext(judge); errors.Is(err, judge.Err()) {
				endSpan(span, err)
				c.breaker.done(false)
				return
			}
		}
		// Timed to its reply, like a get the request waited for.
		c.metrics.redisGet.Observe(time.Since(start).Seconds())
		endSpan(span, err)
		c.breaker.done(redisHealthy(err))
	}()
	return nil, context.Cause(wait)
}

// getPlain is get without a pipeliner: the GET runs in a goroutine of its
// own, so that the request can stop waiting while the call goes on.
func (c *Cache) getPlain(ctx context.Context, key string) ([]byte, error) {
	type reply struct {
		b   []byte
		err error
	}
	start := time.Now()
	sick := c.sickAfter()
	done := make(chan reply, 1)
	c.calls.Add(1)
	// Ends within sickAfter, the GET's deadline.
	go func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sick)
		defer cancel()
		cctx, span := c.redisSpan(cctx, "GET")
		b, err := c.rdb.Get(cctx, key).Bytes()
		c.metrics.redisGet.Observe(time.Since(start).Seconds())
		endSpan(span, err)
		done <- reply{b, err}
	}()
	wait, cancel := context.WithTimeout(ctx, c.redisTimeout)
	defer cancel()
	select {
	case r := <-done:
		c.breaker.done(redisHealthy(r.err) && time.Since(start) < sick)
		c.calls.Done()
		return r.b, r.err
	case <-wait.Done():
		// Ends within sickAfter of start.
		go func() {
			defer c.calls.Done()
			t := time.NewTimer(sick - time.Since(start))
			defer t.Stop()
			select {
			case r := <-done:
				c.breaker.done(redisHealthy(r.err))
			case <-t.C:
				// Look again: the timer and the reply may have been
				// ready together after a long wait for the CPU.
				select {
				case r := <-done:
					c.breaker.done(redisHealthy(r.err))
				default:
					c.breaker.done(false)
				}
			}
		}()
		return nil, context.Cause(wait)
	}
}

// judgeShort tells the breaker how a call made under RedisTimeout went:
// a reply (even an error reply) is Redis being there; a call we stopped
// waiting for is undecided; a failed connection is a failure.
func (c *Cache) judgeShort(ctx context.Context, err error) {
	var op *net.OpError
	var timeout net.Error
	switch {
	case redisHealthy(err): // redis.Nil is a reply too
		c.breaker.done(true)
	case errors.As(err, &op) && op.Op == "dial" && !op.Timeout():
		// Nobody listens there: that is news about Redis, however late.
		c.breaker.done(false)
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &timeout) && timeout.Timeout():
		// Out of time (go-redis reports it as a context or a network
		// timeout): too soon to say Redis is sick.
		c.breaker.undecided()
	default:
		c.breaker.done(false)
	}
}
