package redistier

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// spanOf is the span of ctx when tracing, for a write to go under.
func (t *Tier) spanOf(ctx context.Context) trace.SpanContext {
	if t.tracer == nil {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(ctx)
}

// span starts the span of one Redis call when tracing; endSpan ends it
// with the call's error. Without a tracer both cost nothing.
func (t *Tier) span(ctx context.Context, op string) (context.Context, trace.Span) {
	if t.tracer == nil || !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, nil
	}
	return t.tracer.Start(ctx, "redis "+op, trace.WithSpanKind(trace.SpanKindClient),
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

// healthy reports whether a call's error leaves Redis looking well:
// no error, a missing key, or a reply error (loading, out of memory,
// WRONGTYPE: it came back, so Redis is there), unless it refuses the
// client's credentials (AuthError): then every call fails, each on a
// connection dialled for it, until the configuration changes, and the
// breaker had better stop asking.
func healthy(err error) bool {
	var reply redis.Error
	return err == nil || errors.As(err, &reply) && !AuthError(err)
}

// AuthError reports whether err is Redis refusing the client's
// credentials, the user and password of REDIS_URL: NOAUTH (a password is
// required) or WRONGPASS. A connection refused so is never used: every
// call fails alike until the configuration changes.
func AuthError(err error) bool {
	var reply redis.Error
	return errors.As(err, &reply) && redis.IsAuthError(err)
}

// sickAfter is how long a call may go unanswered before it counts
// against Redis: well past any scheduling delay of a busy process, well
// short of the connection's own read timeout.
func (t *Tier) sickAfter() time.Duration { return max(time.Second, 4*t.timeout) }

// judgeShort tells the breaker how a call made under Timeout went:
// a reply (even an error reply) is Redis being there; a call we stopped
// waiting for is undecided; a failed connection is a failure.
func (t *Tier) judgeShort(ctx context.Context, err error) {
	var op *net.OpError
	var timeout net.Error
	switch {
	case healthy(err): // redis.Nil is a reply too
		t.breaker.done(true)
	case errors.As(err, &op) && op.Op == "dial" && !op.Timeout():
		// Nobody listens there: that is news about Redis, however late.
		t.breaker.done(false)
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &timeout) && timeout.Timeout():
		// Out of time (go-redis reports it as a context or a network
		// timeout): too soon to say Redis is sick.
		t.breaker.undecided()
	default:
		t.breaker.done(false)
	}
}
