package cache

import (
	"context"
	"runtime/debug"
	"sync"
	"time"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/sources"
)

// Background refresh policy: after a failed load of a key, no refresh of
// it starts for refreshBackoff, and its stale responses carry the failure
// (fwd=stale; fwd-status=...) for failureMemo. At most maxFailures keys
// are remembered.
const (
	refreshBackoff = time.Second
	failureMemo    = 30 * time.Second
	maxFailures    = 4096
)

// background is the cache's work off the request path: refreshes of
// stale keys, second invalidations of search lists, and the recent
// failures of loads that decide whether a refresh may start. Close
// cancels it and waits for it.
type background struct {
	// base is cancelled by Close: the work derives from it.
	base   context.Context
	cancel context.CancelFunc
	after  func(time.Duration) <-chan time.Time // tests: the second invalidation's timer; nil: a real one

	mu         sync.Mutex
	closed     bool
	refreshing map[string]struct{}
	failures   map[string]failure
	running    sync.WaitGroup
}

// A failure is the last failed load of a key.
type failure struct {
	status int // 503, 504 or 500, as fwd-status reports it
	at     time.Time
}

func (b *background) start() {
	b.base, b.cancel = context.WithCancel(context.Background())
	b.refreshing = map[string]struct{}{}
	b.failures = map[string]failure{}
}

// goRun runs f in a goroutine of its own on the base context, unless the
// cache is closed; it reports whether f runs.
func (b *background) goRun(f func(base context.Context)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.running.Add(1)
	// Ends when f returns: each f is bounded, and watches the base
	// context Close cancels.
	go func() {
		defer b.running.Done()
		f(b.base)
	}()
	return true
}

// startRefresh marks a refresh of key as running, unless one is, one
// failed less than refreshBackoff before now, or the cache is closed; it
// reports whether the caller may refresh. endRefresh ends it.
func (b *background) startRefresh(key string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, busy := b.refreshing[key]
	f, failed := b.failures[key]
	if b.closed || busy || (failed && now.Sub(f.at) < refreshBackoff) {
		return false
	}
	b.refreshing[key] = struct{}{}
	return true
}

func (b *background) endRefresh(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.refreshing, key)
}

// staleState reports whether a refresh of key is running, and the
// fwd-status of its last failed load if that was recent (0 if none).
func (b *background) staleState(key string, now time.Time) (refreshing bool, status int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, refreshing = b.refreshing[key]
	if f, ok := b.failures[key]; ok && now.Sub(f.at) < failureMemo {
		status = f.status
	}
	return refreshing, status
}

func (b *background) noteFailure(key string, status int, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.failures[key]; !ok && len(b.failures) >= maxFailures {
		for k, f := range b.failures {
			if now.Sub(f.at) >= failureMemo {
				delete(b.failures, k)
			}
		}
		if len(b.failures) >= maxFailures {
			return
		}
	}
	b.failures[key] = failure{status: status, at: now}
}

func (b *background) clearFailure(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.failures) > 0 {
		delete(b.failures, key)
	}
}

// close stops new work, cancels what runs and waits for it until ctx
// ends.
func (b *background) close(ctx context.Context) error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	b.cancel()
	done := make(chan struct{})
	// Ends when the work does: each piece is bounded (loads by
	// LoadTimeout, and all by the base context).
	go func() {
		b.running.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// refresh starts the background refresh of a stale key, unless one is
// running, one failed less than refreshBackoff ago, or the cache is
// closed.
func (c *Cache) refresh(ctx context.Context, key string, q *sources.Query, fresh time.Duration) {
	if !c.bg.startRefresh(key, c.now()) {
		return
	}
	// Ends when the load returns: within LoadTimeout, sooner when Close
	// cancels the base context.
	started := c.bg.goRun(func(base context.Context) {
		defer c.bg.endRefresh(key)
		defer func() {
			if p := recover(); p != nil {
				c.log.Error("cache: panic in a refresh", "panic", p, "stack", string(debug.Stack()))
			}
		}()
		// The request's Redis budget stays with the request: the
		// refresh's calls wait up to the Redis timeout each.
		ctx, cancel := c.detach(redistier.WithoutBudget(ctx))
		defer cancel()
		defer context.AfterFunc(base, cancel)()
		fence := c.beginFill(ctx, q)
		rep, err := c.callLoader(ctx, q)
		if err != nil {
			c.bg.noteFailure(key, fwdStatus(err), c.now())
			c.metrics.refreshes.Inc("error")
			// Nobody else sees this error; the stale entry stays.
			c.log.Warn("cache: background refresh failed", "resource", q.Resource.Name, "error", err)
			return
		}
		if rep.Missing != nil {
			// Not stored: the complete stale entry stays, and answers
			// until the next refresh after the back-off.
			c.bg.noteFailure(key, rep.Status, c.now())
			c.metrics.refreshes.Inc("error")
			c.log.Warn("cache: background refresh incomplete", "resource", q.Resource.Name, "missing", rep.Missing)
			return
		}
		c.store(ctx, key, fence, rep, fresh)
		c.metrics.refreshes.Inc("ok")
	})
	if !started { // closed meanwhile
		c.bg.endRefresh(key)
	}
}
