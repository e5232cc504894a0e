package cache

import (
	"context"
	"time"
)

// One load per fleet: a replica about to load a key Redis does not hold
// first takes the key's load lease (redistier.TryLoadLease). The replica
// that wins loads, writes the value to Redis itself (through the key's
// write queue, but awaited within its request's Redis budget, so the
// value is there before the lease goes unless Redis is slow) and releases
// the lease. The others poll Redis for the value, 5ms at
// first and then at most every 50ms, and take it (outcome collapsed) once
// it is there and current; when the lease goes without a value (the
// load failed or was not storable, or its holder died and the lease
// lapsed after half the load timeout) one of them takes the lease and
// loads. A replica that cannot ask Redis (its request's Redis budget
// spent included: the polls take from it, the sleeps between them do
// not), or whose own load timeout runs out while it waits, loads without
// a lease.
const (
	leasePollMin = 5 * time.Millisecond
	leasePollMax = 50 * time.Millisecond
)

// fleet takes key's lease or waits for the replica that holds it. It
// returns the entry another replica loaded, or the token of the lease
// this replica now holds, or neither (load without a lease).
func (c *Cache) fleet(ctx context.Context, key string) (e *entry, token string) {
	if c.redis == nil {
		return nil, ""
	}
	ttl := max(c.loadTimeout/2, time.Millisecond)
	poll := leasePollMin
	waited := false
	for {
		token, ok := c.redis.TryLoadLease(ctx, key, ttl)
		if !ok {
			return nil, ""
		}
		if token != "" {
			if waited {
				// The holder may have written its value and released the
				// lease between our last look and the SET: look again.
				if got, _ := c.fleetValue(ctx, key); got != nil {
					c.releaseLease(key, token)
					return got, ""
				}
			}
			c.metrics.leases.Inc("won")
			return nil, token
		}
		if !waited {
			waited = true
			c.metrics.leases.Inc("waited")
		}
		// Another replica is loading: wait for its value, then try the
		// lease again (a lease gone without a value is ours to take).
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			c.metrics.leases.Inc("timeout")
			return nil, ""
		case <-t.C:
		}
		poll = min(2*poll, leasePollMax)
		got, asked := c.fleetValue(ctx, key)
		if !asked {
			return nil, ""
		}
		if got != nil {
			return got, ""
		}
	}
}

// fleetValue is the value another replica stored under key, if it is
// there, fresh and current; asked is false when Redis could not be
// asked.
func (c *Cache) fleetValue(ctx context.Context, key string) (e *entry, asked bool) {
	e, asked = c.redisGet(ctx, key)
	if e != nil && (!e.isFresh(c.now()) || !c.current(ctx, e)) {
		e = nil
	}
	return e, asked
}

// releaseLease gives key's lease up, if it is still ours.
func (c *Cache) releaseLease(key, token string) {
	if token == "" {
		return
	}
	c.redis.ReleaseLoadLease(key, token)
}
