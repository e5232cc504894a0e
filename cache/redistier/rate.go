package redistier

import (
	"context"
	"time"

	"github.com/go-redis/redis_rate/v10"
)

// The fleet's rate limits: one GCRA bucket per key, shared by every
// replica, through go-redis/redis_rate (a script per charge, on Redis's
// clock, so the replicas' clocks do not matter). The fair-share limiter
// (server/fairshare) charges them: the hits it served in batches, and
// each backend load before it starts.

// rateKey is the key a bucket lives under, before redis_rate puts its
// own "rate:" in front.
func rateKey(key string) string { return Prefix + key }

// A Rate is a GCRA limit: Events per Per, and as many at once.
type Rate struct {
	Events int
	Per    time.Duration
}

// A Charged is what a charge did to its bucket.
type Charged struct {
	Allowed   int // what was taken: all of n, some of it (AtMost), or nothing
	Remaining int // what the bucket holds after the charge
	// RetryAfter is, when nothing was taken, how long until the charge
	// (AtMost: one event) would be.
	RetryAfter time.Duration
}

// Charge takes n events from the bucket of key, limited to r. With
// atMost it takes as many of them as the bucket holds (events already
// served, charged late); without, all of them or none (an event about to
// happen). ok is false when Redis could not be asked (no Redis, budget
// spent, breaker open, error, timeout). The call waits at most Timeout,
// or what is left of ctx's budget.
func (t *Tier) Charge(ctx context.Context, key string, r Rate, n int, atMost bool) (c Charged, ok bool) {
	if t.rdb == nil || r.Events <= 0 || r.Per <= 0 {
		return Charged{}, false
	}
	wait, ok := t.allot(ctx)
	if !ok || !t.breaker.allow() {
		return Charged{}, false
	}
	start := time.Now()
	defer t.spent(ctx, start, wait)
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	sctx, span := t.span(ctx, "EVALSHA")
	limiter := redis_rate.NewLimiter(t.rdb)
	limit := redis_rate.Limit{Rate: r.Events, Burst: r.Events, Period: r.Per}
	var res *redis_rate.Result
	var err error
	if atMost {
		res, err = limiter.AllowAtMost(sctx, rateKey(key), limit, n)
	} else {
		res, err = limiter.AllowN(sctx, rateKey(key), limit, n)
	}
	t.metrics.redisRate.Observe(time.Since(start).Seconds())
	endSpan(span, err)
	t.judgeShort(ctx, err)
	if err != nil {
		t.metrics.redisErrors.Inc("rate")
		return Charged{}, false
	}
	c = Charged{Allowed: res.Allowed, Remaining: res.Remaining}
	if res.Allowed == 0 && res.RetryAfter > 0 {
		c.RetryAfter = res.RetryAfter
	}
	return c, true
}
