package cache

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// One load per fleet: a replica about to load a key Redis does not hold
// first takes the key's lease, prodapi:v1:lease:<key>, with SET NX PX.
// The replica that wins loads, writes the value to Redis itself (not
// through the write queue, so the value is there before the lease goes)
// and releases the lease. The others poll Redis for the value, 5ms at
// first and then at most every 50ms, and take it (outcome collapsed) once
// it is there and current; when the lease goes without a value (the
// load failed or was not storable, or its holder died and the lease
// lapsed after half the load timeout) one of them takes the lease and
// loads. A replica that cannot ask Redis, or whose own load timeout runs
// out while it waits, loads without a lease.
const (
	leasePollMin = 5 * time.Millisecond
	leasePollMax = 50 * time.Millisecond
)

func leaseKey(key string) string { return keyVersion + "lease:" + key }

// release deletes the lease only while it is still ours.
var release = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// fleet takes key's lease or waits for the replica that holds it. It
// returns the entry another replica loaded, or the token of the lease
// this replica now holds, or neither (load without a lease).
func (c *Cache) fleet(ctx context.Context, key string) (e *entry, token string) {
	if c.rdb == nil {
		return nil, ""
	}
	token = c.id + ":" + newReplicaID()
	ttl := max(c.loadTimeout/2, time.Millisecond)
	poll := leasePollMin
	waited := false
	for {
		if !c.breaker.allow() {
			return nil, ""
		}
		rctx, cancel := context.WithTimeout(ctx, c.redisTimeout)
		start := time.Now()
		sctx, span := c.redisSpan(rctx, "SET")
		won, err := c.rdb.SetNX(sctx, leaseKey(key), token, ttl).Result()
		c.metrics.redisLease.Observe(time.Since(start).Seconds())
		endSpan(span, err)
		c.judgeShort(rctx, err)
		cancel()
		if err != nil {
			c.metrics.redisErrors.Inc("lease")
			return nil, ""
		}
		if won {
			if waited {
				// The holder may have written its value and released the
				// lease between our last look and the SET: look again.
				if got, asked := c.redisGet(ctx, key); asked && got != nil && got.isFresh(c.now()) && c.current(ctx, got) {
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
		got, asked := c.redisGet(ctx, key)
		if !asked {
			return nil, ""
		}
		if got != nil && got.isFresh(c.now()) && c.current(ctx, got) {
			return got, ""
		}
	}
}

// releaseLease gives key's lease up, if it is still ours.
func (c *Cache) releaseLease(key, token string) {
	if token == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.redisTimeout)
	defer cancel()
	if err := release.Run(ctx, c.rdb, []string{leaseKey(key)}, token).Err(); err != nil && !errors.Is(err, redis.Nil) {
		c.metrics.redisErrors.Inc("lease")
	}
}
