package cache

import (
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
)

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

// outcomes are the values of the outcome label, in the order Declare
// exposes them.
var outcomes = [...]string{OutcomeHit, OutcomeStale, OutcomeMiss, OutcomeCollapsed, OutcomeBypass, OutcomeError}

// Tiers that answer a hit, as the tier label of prodapi_cache_hits_total
// (and the cache.lookup span's prodapi.cache.tier) name them; a load's
// span says backend.
const (
	tierLocal   = "local"
	tierRedis   = "redis"
	tierBackend = "backend"
)

// series are the metrics the cache keeps (the Redis tier keeps its own,
// under the same prefix). Every field is nil-safe: a Cache without
// Options.Metrics counts nothing.
//
// Counters whose label values are all known at start are declared at 0
// (newMetrics), so that rate() over them has data before their first
// event.
type series struct {
	requests       *metrics.Counter // resource, outcome
	hits           *metrics.Counter // resource, tier
	incomplete     *metrics.Counter // resource
	corrupt        *metrics.Counter
	refreshes      *metrics.Counter // result
	localBytes     *metrics.Gauge
	localEntries   *metrics.Gauge
	localEvictions *metrics.Counter

	invalidationsApplied *metrics.Counter
	fencedFills          *metrics.Counter
	knownGens            *metrics.Counter
	changes              *metrics.Counter // op
	changeLag            *metrics.Gauge
	leases               *metrics.Counter // result
}

func newMetrics(m *metrics.Metrics) *series {
	if m == nil {
		return &series{}
	}
	s := newSeries(m)
	resources := []string{assetResource}
	for _, r := range sources.Resources() {
		resources = append(resources, r.Name)
	}
	for _, r := range resources {
		for _, o := range outcomes {
			s.requests.Declare(r, o)
		}
		s.hits.Declare(r, tierLocal)
		s.hits.Declare(r, tierRedis)
	}
	for _, r := range resources[1:] { // an asset redirect is never incomplete
		s.incomplete.Declare(r)
	}
	s.refreshes.Declare("ok")
	s.refreshes.Declare("error")
	for _, op := range []string{sources.OpInsert, sources.OpUpdate, sources.OpReplace, sources.OpDelete, sources.OpFlush} {
		s.changes.Declare(op)
	}
	for _, r := range []string{"won", "waited", "timeout"} {
		s.leases.Declare(r)
	}
	return s
}

func newSeries(m *metrics.Metrics) *series {
	return &series{
		requests: m.Counter("prodapi_cache_requests_total",
			"Requests to the cache, by resource and outcome (hit, stale, miss, collapsed, bypass, error).",
			"resource", "outcome"),
		hits: m.Counter("prodapi_cache_hits_total",
			"Requests answered from a stored entry, fresh or stale (outcomes hit and stale), by resource and the tier that held it (local: the in-process tier, redis).",
			"resource", "tier"),
		incomplete: m.Counter("prodapi_partial_responses_total",
			"Responses that went out incomplete, because an optional lookup (a link, a content type) failed and no complete entry could answer instead, by resource; each was marked (Cache-Control: no-store, a Cache-Status detail) and not stored.",
			"resource"),
		corrupt: m.Counter("prodapi_cache_corrupt_values_total",
			"Values found in Redis that did not decode (corrupt, foreign or from another version); each was a miss and was deleted."),
		refreshes: m.Counter("prodapi_cache_refreshes_total",
			"Background refreshes of stale entries, by result (ok, error).",
			"result"),
		localBytes: m.Gauge("prodapi_cache_local_bytes",
			"Bytes held by the in-process tier (estimated)."),
		localEntries: m.Gauge("prodapi_cache_local_entries",
			"Entries held by the in-process tier."),
		localEvictions: m.Counter("prodapi_cache_local_evictions_total",
			"Entries evicted from the in-process tier to stay within its byte bound."),
		invalidationsApplied: m.Counter("prodapi_cache_invalidations_applied_total",
			"Invalidations applied to this replica's in-process tier (its own and other replicas')."),
		fencedFills: m.Counter("prodapi_cache_fenced_fills_total",
			"Loads not stored because one of their documents was invalidated while they ran."),
		knownGens: m.Counter("prodapi_cache_known_generation_checks_total",
			"Redis hits checked against the tag generations this replica remembers, without a second round trip."),
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
