package redistier

import "github.com/prodapi/prodapi/server/metrics"

// series are the metrics the tier keeps, under the cache's names (they
// are the cache's Redis series). Every field is nil-safe: a Tier without
// Options.Metrics counts nothing.
type series struct {
	redisErrors   *metrics.Counter // op
	writesDropped *metrics.Counter // reason
	breakerState  *metrics.Gauge

	invalidationsReceived *metrics.Counter
	subscribed            *metrics.Gauge
	resubscribes          *metrics.Counter
	// Redis call durations by op, resolved once: a read observes
	// without a lookup.
	redisGet, redisSet, redisDel metrics.Observer
	redisGens, redisLease        metrics.Observer
	redisRate                    metrics.Observer
}

func newMetrics(m *metrics.Metrics) *series {
	s := &series{}
	var redisTime *metrics.Histogram // nil without m: observes nothing
	if m != nil {
		s = newSeries(m)
		// At 0 from the start, so that rate() over them has data
		// before their first event.
		for _, op := range []string{"get", "set", "del", "lease", "invalidate", "rate", "waiters"} {
			s.redisErrors.Declare(op)
		}
		for _, reason := range []string{"queue_full", "breaker_open", "closed"} {
			s.writesDropped.Declare(reason)
		}
		redisTime = m.Histogram("prodapi_cache_redis_duration_seconds",
			"Time a Redis call took, from sending it to its reply, by operation (get, set, del; gens: the tag generations of an entry read, "+
				"in one pipeline; lease: a fleet load lease taken or looked at; rate: a charge to a client's rate limit); a get given up on is timed to its reply.",
			nil, "op")
	}
	s.redisGet, s.redisSet, s.redisDel = redisTime.Observer("get"), redisTime.Observer("set"), redisTime.Observer("del")
	s.redisGens, s.redisLease = redisTime.Observer("gens"), redisTime.Observer("lease")
	s.redisRate = redisTime.Observer("rate")
	return s
}

func newSeries(m *metrics.Metrics) *series {
	return &series{
		redisErrors: m.Counter("prodapi_cache_redis_errors_total",
			"Redis calls that failed or timed out, by operation (get: a value or the generations of its tags; set, del; lease: a fleet load lease taken or released; invalidate: generations set or an invalidation published; rate: a charge to a client's rate limit; waiters: a client's waiters joined, renewed or left); each became a miss, a skipped write, an invalidation of this replica only, or a limit or waiters counted by this replica alone.",
			"op"),
		writesDropped: m.Counter("prodapi_cache_writes_dropped_total",
			"Redis writes not made, by reason (queue_full, breaker_open, closed).",
			"reason"),
		breakerState: m.Gauge("prodapi_cache_redis_breaker_state",
			"State of the Redis circuit breaker: 0 closed (Redis in use), 0.5 half-open (one probe call), 1 open (Redis skipped)."),
		invalidationsReceived: m.Counter("prodapi_cache_invalidations_received_total",
			"Invalidation messages received on the Redis channel (this replica's own included)."),
		subscribed: m.Gauge("prodapi_cache_invalidation_subscribed",
			"1 while the replica is subscribed to the invalidation channel, 0 while it is not."),
		resubscribes: m.Counter("prodapi_cache_invalidation_subscriptions_total",
			"Subscriptions to the invalidation channel; each one after a failure emptied the in-process tier, because messages may have been missed."),
	}
}
