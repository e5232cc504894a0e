package cache

import (
	"sync"
	"time"

	"github.com/prodapi/prodapi/sources/metrics"
)

// Breaker settings: after breakerThreshold consecutive failed Redis calls
// the cache stops calling Redis for breakerCooldown, then lets one call
// through as a probe; its success closes the breaker, its failure opens it
// for another cool-down.
const (
	breakerThreshold = 5
	breakerCooldown  = 2 * time.Second
)

type breakerState int

const (
	closed breakerState = iota
	open
	halfOpen
)

// A breaker keeps the cache from paying a Redis timeout on every request
// while Redis is down or hung.
type breaker struct {
	now   func() time.Time
	gauge *metrics.Gauge

	mu       sync.Mutex
	state    breakerState
	failures int
	openedAt time.Time
	probing  bool // half-open, and the probe call is out
}

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

// done records the result of an allowed call: ok is false when Redis
// could not be reached or did not answer in time.
func (b *breaker) done(ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		b.failures = 0
		b.probing = false
		if b.state != closed {
			b.set(closed)
		}
		return
	}
	b.failures++
	switch {
	case b.state == halfOpen:
		b.probing = false
		b.openedAt = b.now()
		b.set(open)
	case b.state == closed && b.failures >= breakerThreshold:
		b.openedAt = b.now()
		b.set(open)
	}
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
