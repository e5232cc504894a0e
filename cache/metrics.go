package cache

import "github.com/prodapi/prodapi/sources/metrics"

// Outcomes of a request to the cache, as Representation.Outcome and the
// outcome label of prodapi_cache_requests_total carry them.
const (
	OutcomeHit       = "hit"       // a fresh entry, from either tier
	OutcomeStale     = "stale"     // an expired entry within the serve-stale window
	OutcomeMiss      = "miss"      // this request's load answered it
	OutcomeCollapsed = "collapsed" // answered by a load another request started
	OutcomeBypass    = "bypass"    // the cache is off for this request
	OutcomeError     = "error"     // the load failed and nothing could be served
)

// series are the metrics the cache keeps. Every field is nil-safe: a
// Cache without Options.Metrics counts nothing.
type series struct {
	requests       *metrics.Counter // resource, outcome
	redisErrors    *metrics.Counter // op
	corrupt        *metrics.Counter
	writesDropped  *metrics.Counter // reason
	refreshes      *metrics.Counter // result
	breakerState   *metrics.Gauge
	localBytes     *metrics.Gauge
	localEntries   *metrics.Gauge
	localEvictions *metrics.Counter

	invalidationsReceived *metrics.Counter
	invalidationsApplied  *metrics.Counter
	fencedFills           *metrics.Counter
	subscribed            *metrics.Gauge
	knownGens             *metrics.Counter
	resubscribes          *metrics.Counter
	changes               *metrics.Counter // op
	changeLag             *metrics.Gauge
	leases                *metrics.Counter // result
	// Redis call durations by op, resolved once: a Redis-tier hit
	// observes without a lookup.
	redisGet, redisSet, redisDel metrics.Observer
	redisGens, redisLease        metrics.Observer
}

func newMetrics(m *metrics.Metrics) *series {
	var s *series
	if m == nil {
		s = &series{}
	} else {
		s = newSeries(m)
	}
	var redisTime *metrics.Histogram // nil without m: observes nothing
	if m != nil {
		redisTime = m.Histogram("prodapi_cache_redis_duration_seconds",
			"Time a Redis call took, from sending it to its reply, by operation (get, set, del; gens: the tag generations of an entry read, "+
				"in one pipeline; lease: a fleet load lease taken or looked at); a get given up on is timed to its reply.",
			nil, "op")
	}
	s.redisGet, s.redisSet, s.redisDel = redisTime.Observer("get"), redisTime.Observer("set"), redisTime.Observer("del")
	s.redisGens, s.redisLease = redisTime.Observer("gens"), redisTime.Observer("lease")
	return s
}

func newSeries(m *metrics.Metrics) *series {
	return &series{
		requests: m.Counter("prodapi_cache_requests_total",
			"Requests to the cache, by resource and outcome (hit, stale, miss, collapsed, bypass, error).",
			"resource", "outcome"),
		redisErrors: m.Counter("prodapi_cache_redis_errors_total",
			"Redis calls that failed or timed out, by operation (get, set, del); each became a miss or a skipped write.",
			"op"),
		corrupt: m.Counter("prodapi_cache_corrupt_values_total",
			"Values found in Redis that did not decode (corrupt, foreign or from another version); each was a miss and was deleted."),
		writesDropped: m.Counter("prodapi_cache_writes_dropped_total",
			"Redis writes not made, by reason (queue_full, breaker_open, closed).",
			"reason"),
		refreshes: m.Counter("prodapi_cache_refreshes_total",
			"Background refreshes of stale entries, by result (ok, error).",
			"result"),
		breakerState: m.Gauge("prodapi_cache_redis_breaker_state",
			"State of the Redis circuit breaker: 0 closed (Redis in use), 0.5 half-open (one probe call), 1 open (Redis skipped)."),
		localBytes: m.Gauge("prodapi_cache_local_bytes",
			"Bytes held by the in-process tier (estimated)."),
		localEntries: m.Gauge("prodapi_cache_local_entries",
			"Entries held by the in-process tier."),
		localEvictions: m.Counter("prodapi_cache_local_evictions_total",
			"Entries evicted from the in-process tier to stay within its byte bound."),
		invalidationsReceived: m.Counter("prodapi_cache_invalidations_received_total",
			"Invalidation messages received on the Redis channel (this replica's own included)."),
		invalidationsApplied: m.Counter("prodapi_cache_invalidations_applied_total",
			"Invalidations applied to this replica's in-process tier (its own and other replicas')."),
		fencedFills: m.Counter("prodapi_cache_fenced_fills_total",
			"Loads not stored because one of their documents was invalidated while they ran."),
		subscribed: m.Gauge("prodapi_cache_invalidation_subscribed",
			"1 while the replica is subscribed to the invalidation channel, 0 while it is not."),
		knownGens: m.Counter("prodapi_cache_known_generation_checks_total",
			"Redis hits checked against the tag generations this replica remembers, without a second round trip."),
		resubscribes: m.Counter("prodapi_cache_invalidation_subscriptions_total",
			"Subscriptions to the invalidation channel; each one after a failure emptied the in-process tier, because messages may have been missed."),
		changes: m.Counter("prodapi_cache_changes_total",
			"Changes a change feed reported and the cache applied, by operation (insert, update, replace, delete, flush).",
			"op"),
		changeLag: m.Gauge("prodapi_cache_change_lag_seconds",
			"Change-feed lag: from the latest applied change's write (its cluster time) to when the cache applied it."),
		leases: m.Counter("prodapi_cache_fleet_leases_total",
			"Fleet load leases on cold keys, by result: won (this replica loaded for the fleet), waited (another replica was loading), timeout (gave up waiting and loaded).",
			"result"),
	}
}
