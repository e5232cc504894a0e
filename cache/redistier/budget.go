package redistier

import (
	"context"
	"sync/atomic"
	"time"
)

// A request's Redis budget is what all the calls made for it may wait on
// Redis together: Options.Timeout. The cache gives a request its budget
// when the in-process tier cannot answer it (WithBudget). Every call that
// carries one waits at most what is left of it (and never more than
// Timeout), and takes from it what it waited; once it is spent, a call is
// not made at all, and answers as when Redis cannot be asked. So a
// request pays one Timeout when Redis hangs or dies, however many calls
// its miss makes (the read, the generations, the load lease, the polls
// for another replica's load, the wait for its own write).
//
// What a request does not wait for keeps its own bounds: queued writes,
// the breaker's judgement of a read the request gave up on (sickAfter),
// a lease's release, background refreshes (WithoutBudget). A call
// without a budget waits at most Timeout.

// budgetKey is the context key of a request's budget.
type budgetKey struct{}

// A budget is the wait a request has left, in nanoseconds. A request's
// calls are made one after the other, but the calls of a load it shares
// run on another goroutine: hence the atomic.
type budget struct{ left atomic.Int64 }

// WithBudget returns ctx carrying a new Redis budget of Timeout, for the
// calls made on one request's behalf.
func (t *Tier) WithBudget(ctx context.Context) context.Context {
	b := &budget{}
	b.left.Store(int64(t.timeout))
	return context.WithValue(ctx, budgetKey{}, b)
}

// WithoutBudget returns ctx without the budget of the request it comes
// from: for work that outlives the request (a background refresh), whose
// calls each wait at most Timeout.
func WithoutBudget(ctx context.Context) context.Context {
	if budgetOf(ctx) == nil {
		return ctx
	}
	return context.WithValue(ctx, budgetKey{}, (*budget)(nil))
}

// Spend takes d from ctx's budget, if it carries one: a wait on Redis
// the tier did not time itself (the cache's requests that share another
// request's read).
func Spend(ctx context.Context, d time.Duration) {
	if b := budgetOf(ctx); b != nil {
		b.spend(d, d)
	}
}

// Left is what ctx's budget has left; Timeout without a budget. For
// tests, and for logs.
func (t *Tier) Left(ctx context.Context) time.Duration {
	if b := budgetOf(ctx); b != nil {
		return max(time.Duration(b.left.Load()), 0)
	}
	return t.timeout
}

func budgetOf(ctx context.Context) *budget {
	b, _ := ctx.Value(budgetKey{}).(*budget)
	return b
}

// allot is how long the next call made with ctx may wait: Timeout, or
// what is left of ctx's budget when that is less. ok is false when the
// budget is spent: the call is not made.
func (t *Tier) allot(ctx context.Context) (wait time.Duration, ok bool) {
	b := budgetOf(ctx)
	if b == nil {
		return t.timeout, true
	}
	left := time.Duration(b.left.Load())
	return min(t.timeout, left), left > 0
}

// spent takes from ctx's budget what a call allotted wait waited since
// start: never more than its allotment, so that a late wake-up on a busy
// process does not spend another call's share.
func (t *Tier) spent(ctx context.Context, start time.Time, wait time.Duration) {
	if b := budgetOf(ctx); b != nil {
		b.spend(time.Since(start), wait)
	}
}

func (b *budget) spend(d, most time.Duration) {
	if d > 0 {
		b.left.Add(-int64(min(d, most)))
	}
}
