package redistier

import (
	"sync"
	"time"

	"github.com/prodapi/prodapi/server/metrics"
)

// Breaker settings. The breaker opens on either of two judgements of
// Redis: breakerConsecutive failed calls in a row, whatever the traffic
// (a replica that makes a call now and then learns as soon as a busy one),
// or the fraction of failed calls over the last breakerWindow (in
// breakerBuckets slices of it): once at least breakerMinCalls were made
// and breakerFailRatio of them failed (failures among successes, as when
// one Cluster master of several is down). Open, the tier stops calling
// Redis for breakerCooldown, then lets one call through as a probe; its
// success closes the breaker, its failure opens it for another cool-down.
//
// A call that the request stopped waiting for (its share of the request's
// budget, at most Timeout) is not a failure by itself: a saturated CPU delays the reply's goroutine as much
// as Redis would. It counts as a failure only when no reply came within
// sickAfter (see Tier.get); a reply that came late, but came, is a
// success. So a replica busy on its CPU keeps its shared tier, and a hung
// or unreachable Redis still opens the breaker within about a second.
const (
	breakerConsecutive = 5
	breakerWindow      = 10 * time.Second
	breakerBuckets     = 10
	breakerMinCalls    = 10
	breakerFailRatio   = 0.5
	breakerCooldown    = 2 * time.Second
)

type breakerState int

const (
	closed breakerState = iota
	open
	halfOpen
)

// A breaker keeps the replica from paying a Redis timeout on every request
// while Redis is down or hung.
type breaker struct {
	now   func() time.Time
	gauge *metrics.Gauge

	mu       sync.Mutex
	state    breakerState
	buckets  [breakerBuckets]bucket
	failing  int // failed calls in a row, while closed
	openedAt time.Time
	probing  bool // half-open, and the probe call is out
}

// A bucket counts the calls of one slice of the window.
type bucket struct {
	slice      int64 // which slice of time (now / bucket width) it counts
	calls, bad int
}

const bucketWidth = breakerWindow / breakerBuckets

// allow reports whether a Redis call may be made now. Every call allowed
// must be followed by one done.
func (b *breaker) allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case closed:
		return true
	case open:
		if b.now().Sub(b.openedAt) < breakerCooldown {
			return false
		}
		b.set(halfOpen)
		b.probing = true
		return true
	default: // half-open: one probe at a time
		if b.probing {
			return false
		}
		b.probing = true
		return true
	}
}

// isOpen reports whether calls are being skipped, without claiming the
// probe: for deciding whether to queue a write at all.
func (b *breaker) isOpen() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == open && b.now().Sub(b.openedAt) < breakerCooldown
}

// undecided ends an allowed call that tells nothing about Redis: one the
// request stopped waiting for at its allotted wait, which on a busy
// process may be the scheduler's delay rather than Redis's. A probe is
// handed back.
// The GETs judge a hung Redis by sickAfter (Tier.get).
func (b *breaker) undecided() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == halfOpen {
		b.probing = false
	}
}

// done records the result of an allowed call: ok is false when Redis
// could not be reached or did not answer within sickAfter.
func (b *breaker) done(ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case halfOpen:
		b.probing = false
		if ok {
			b.reset()
			b.set(closed)
		} else {
			b.openedAt = b.now()
			b.set(open)
		}
		return
	case open:
		// A call allowed before the breaker opened: the window starts
		// again when it closes.
		return
	}
	now := b.now()
	slice := now.UnixNano() / int64(bucketWidth)
	cur := &b.buckets[slice%breakerBuckets]
	if cur.slice != slice {
		*cur = bucket{slice: slice}
	}
	cur.calls++
	if ok {
		b.failing = 0
		return
	}
	cur.bad++
	b.failing++
	calls, bad := 0, 0
	for _, k := range b.buckets {
		if slice-k.slice < breakerBuckets {
			calls, bad = calls+k.calls, bad+k.bad
		}
	}
	if b.failing >= breakerConsecutive || calls >= breakerMinCalls && float64(bad) >= breakerFailRatio*float64(calls) {
		b.openedAt = now
		b.set(open)
	}
}

func (b *breaker) reset() {
	b.buckets = [breakerBuckets]bucket{}
	b.failing = 0
}

func (b *breaker) set(s breakerState) {
	b.state = s
	switch s {
	case closed:
		b.gauge.Set(0)
	case open:
		b.gauge.Set(1)
	case halfOpen:
		b.gauge.Set(0.5)
	}
}

// current returns the state, for tests and logs.
func (b *breaker) current() breakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}
