package cache

import (
	"context"
	"slices"
	"sync"
	"time"
)

// maxKnownGens bounds the generations a replica remembers (about 100
// bytes each with the map's overhead: under 2 MB). When it is full the
// memo starts again empty; the cost is one more round trip per tag.
const maxKnownGens = 16384

// knownGens remembers the generations this replica has read from Redis,
// so that a Redis hit checks its entry against them instead of asking
// Redis again: a Redis hit then costs one round trip, the GET, as it did
// before invalidation existed.
//
// A remembered generation is used only while the replica is subscribed
// to the invalidation channel, whose messages remove the tags they name,
// and for at most the in-process tier's LocalTTL after it was read, so
// that a subscription cut that has not shown yet (a silent connection is
// pinged after subscriberPing) leaves a Redis hit no staler than an
// in-process one. Losing the subscription empties it.
type knownGens struct {
	mu   sync.RWMutex
	live bool // subscribed: invalidations reach forget
	m    map[string]knownGen
}

type knownGen struct {
	gen   uint64
	until time.Time
}

// match reports whether every one of tags is known at now with the
// generation gens gives it. Anything else (a tag unknown or expired, a
// generation that differs, the subscription down) is not a verdict: the
// caller asks Redis.
func (k *knownGens) match(tags []string, gens []uint64, now time.Time) bool {
	k.mu.RLock()
	defer k.mu.RUnlock()
	if !k.live || len(tags) != len(gens) {
		return false
	}
	for i, t := range tags {
		g, ok := k.m[t]
		if !ok || g.gen != gens[i] || !now.Before(g.until) {
			return false
		}
	}
	return true
}

// remember notes gens of tags, read from Redis after the in-process
// invalidation sequence stood at seq, unless an invalidation of one of
// them has arrived since: that one would otherwise be forgotten before
// it was remembered, and its old generation kept.
func (k *knownGens) remember(l *invalLog, seq uint64, tags []string, gens []uint64, until time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	// An invalidation notes itself in l before it takes k.mu to forget its
	// tags, so one that since does not see yet will forget them after.
	if !k.live || l.since(seq, tags) {
		return
	}
	if k.m == nil || len(k.m)+len(tags) > maxKnownGens {
		k.m = make(map[string]knownGen, min(maxKnownGens, 2*len(tags)))
	}
	for i, t := range tags {
		if gens[i] != genUnknown {
			k.m[t] = knownGen{gen: gens[i], until: until}
		}
	}
}

// forget drops tags; "all" drops everything.
func (k *knownGens) forget(tags []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if slices.Contains(tags, tagAll) {
		clear(k.m)
		return
	}
	for _, t := range tags {
		delete(k.m, t)
	}
}

// setLive records whether the replica is subscribed; either way what it
// knew is dropped (messages may have been missed before it knew).
func (k *knownGens) setLive(live bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.live = live
	clear(k.m)
}

// current reports whether e, just read from Redis, is still current:
// whether every one of its tags still has the generation it was built
// under. The generations this replica knows answer without a round trip;
// otherwise they are read in one pipelined round trip, and remembered. An
// entry without tags (asset redirects, values from before tagging) is
// current.
func (c *Cache) current(ctx context.Context, e *entry) bool {
	if len(e.tags) == 0 {
		return true
	}
	now := c.now()
	if c.known.match(e.tags, e.gens, now) {
		c.metrics.knownGens.Inc()
		return true
	}
	seq := c.inval.seqNow()
	gens, ok := c.redis.Gens(ctx, e.tags)
	if !ok {
		// Unknown: load rather than risk serving an obsolete entry.
		return false
	}
	c.known.remember(&c.inval, seq, e.tags, gens, now.Add(c.local.ttl))
	return slices.Equal(gens, e.gens)
}
