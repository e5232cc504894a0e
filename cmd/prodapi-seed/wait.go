package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// A waiter retries a readiness probe until it passes or wait has gone by:
// compose starts the seed once the servers report healthy, but a seed run
// by hand may start with them.
type waiter struct {
	wait   time.Duration
	logger *slog.Logger
	// after is time.After; tests replace it so retries need no real time.
	after func(time.Duration) <-chan time.Time
}

// Retry delays: short at first (a server that is almost up), then every
// two seconds.
const (
	firstRetry = 250 * time.Millisecond
	maxRetry   = 2 * time.Second
)

// until calls probe until it returns nil, each call bounded by a few
// seconds, and gives up with the last error after w.wait.
func (w waiter) until(ctx context.Context, name string, probe func(context.Context) error) error {
	after := w.after
	if after == nil {
		after = time.After
	}
	deadline := time.Now().Add(w.wait)
	delay := firstRetry
	for attempt := 1; ; attempt++ {
		// Each try within what is left of the wait (but long enough to
		// get an answer), and at most a few seconds.
		pctx, cancel := context.WithTimeout(ctx, min(5*time.Second, max(time.Until(deadline), 500*time.Millisecond)))
		err := probe(pctx)
		cancel()
		if err == nil {
			w.logger.Info(name+": ready", "attempts", attempt)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("seed: waiting for %s: %w", name, ctx.Err())
		}
		if time.Now().Add(delay).After(deadline) {
			return fmt.Errorf("seed: %s did not answer within %s: %w", name, w.wait, err)
		}
		if attempt == 1 || attempt%10 == 0 {
			w.logger.Info(name+": waiting", "attempt", attempt, "error", err.Error())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("seed: waiting for %s: %w", name, ctx.Err())
		case <-after(delay):
		}
		delay = min(2*delay, maxRetry)
	}
}
