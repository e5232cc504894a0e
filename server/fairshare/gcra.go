package fairshare

import (
	"sync/atomic"
	"time"
)

// A view is a replica's view of a bucket, in GCRA's terms: the
// theoretical arrival time (tat) of the next event, in Unix nanoseconds.
// The bucket is full at tat and after; before, it lacks (tat - now) /
// interval events of full, and holds what is left of its depth, tau.
// Taking n events moves tat n intervals on, from now if it is behind:
// one compare-and-swap, no lock and no floating point, so that a hit
// pays a few nanoseconds for its limit.
type view struct {
	tat atomic.Int64
}

// A gcra is a limit in a view's terms, in nanoseconds: the interval
// between events, and the bucket's depth, tau, Events intervals. The
// interval is rounded up, so that a limit never lets more through than
// it says; slack is what that adds to tau beyond Per (under a
// nanosecond an event), which the time a bucket takes to fill leaves
// out.
type gcra struct {
	interval, tau, slack int64
}

func newGCRA(r Rate) gcra {
	events := int64(r.Events)
	iv := max((r.Per.Nanoseconds()+events-1)/events, 1)
	return gcra{interval: iv, tau: events * iv, slack: max(events*iv-r.Per.Nanoseconds(), 0)}
}

// maxDebt is how far a view may lack of full, in buckets' depths beyond
// empty: what it owes from refused requests charged anyway, at most two
// buckets.
const maxDebt = 2

// take takes n events from v at now, if it holds them. It returns tat
// after the take, or as it stands when v does not hold n.
func (v *view) take(g gcra, now, n int64) (tat int64, ok bool) {
	for {
		old := v.tat.Load()
		tat = max(old, now) + n*g.interval
		if tat-now > g.tau {
			return old, false
		}
		if v.tat.CompareAndSwap(old, tat) {
			return tat, true
		}
	}
}

// force takes n events from v at now whether it holds them or not (a
// request already refused, which still costs), down to maxDebt buckets
// below empty. It returns tat after.
func (v *view) force(g gcra, now, n int64) int64 {
	for {
		old := v.tat.Load()
		tat := min(max(old, now)+n*g.interval, now+(1+maxDebt)*g.tau)
		if v.tat.CompareAndSwap(old, tat) {
			return tat
		}
	}
}

// set makes v hold tokens at now: at most a full bucket, at least
// maxDebt buckets below empty.
func (v *view) set(g gcra, now, tokens int64) {
	events := g.tau / g.interval
	tokens = max(min(tokens, events), -maxDebt*events)
	v.tat.Store(now + (events-tokens)*g.interval)
}

// debt is how long after now the bucket of tat is full again.
func debt(tat, now int64) time.Duration { return time.Duration(max(tat-now, 0)) }

// tokens is what the bucket of tat holds at now: whole events, negative
// when it owes.
func (g gcra) tokens(tat, now int64) int64 {
	held := g.tau - int64(debt(tat, now))
	if held < 0 {
		return -((-held + g.interval - 1) / g.interval) // rounded down
	}
	return held / g.interval
}

// full is how long after now the bucket of tat is full again, in whole
// seconds (rounded up).
func (g gcra) full(tat, now int64) int64 {
	return seconds(max(int64(debt(tat, now))-g.slack, 0))
}

// seconds is d in whole seconds, rounded up.
func seconds(d int64) int64 { return (d + int64(time.Second) - 1) / int64(time.Second) }

// wait is how long after now the bucket of tat holds need events.
func (g gcra) wait(tat, now, need int64) time.Duration {
	return time.Duration(max(int64(debt(tat, now))-g.tau+need*g.interval, 0))
}
