package cache

import (
	"time"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
)

// The hit memo: a local hit's Representation, built once per record and
// second of Cache-Status ttl instead of once per hit. It is speed only, and
// self-contained: without it, lookup calls represent for a local hit as it
// does for a Redis hit, and record loses its hit field.

// A hitMemo is the Representation of a local hit, shared by every hit on
// the record while its Cache-Status ttl stays the same: a hit then
// allocates no Representation and no Cache-Status, and finds its counter
// without a lookup.
type hitMemo struct {
	ttl   int64
	rep   *sources.Representation
	count metrics.CounterSeries // prodapi_cache_requests_total for the hit, resolved once
	hits  metrics.CounterSeries // prodapi_cache_hits_total for the local tier, resolved once
}

// localHit is represent for a hit on the in-process tier, memoised on
// the record for as long as its Cache-Status stays the same (a second).
func (c *Cache) localHit(res string, r *record, now time.Time) *sources.Representation {
	ttl := r.e.ttl(now)
	if m := r.hit.Load(); m != nil && m.ttl == ttl {
		m.count.Inc()
		m.hits.Inc()
		return m.rep
	}
	rep := c.represent(res, r.e, nil, now, answer{kind: kindHit, tier: tierLocal})
	r.hit.Store(&hitMemo{ttl: ttl, rep: rep, count: c.metrics.requests.Series(res, OutcomeHit),
		hits: c.metrics.hits.Series(res, tierLocal)})
	return rep
}
