package cache

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Named leases and resume tokens for a change feed (package feed): one
// replica of the fleet watches, under a lease it renews; the position it
// reached is kept in Redis so that whoever watches next continues there.
// Without Redis the replica is alone: it always holds the lease, and the
// token lives in memory.

func feedLeaseKey(name string) string { return keyVersion + "feed:" + name + ":lease" }
func feedTokenKey(name string) string { return keyVersion + "feed:" + name + ":token" }

// controlCtx bounds a control call (leases, tokens, invalidations): at
// least a second, since unlike a read it has no fallback worth failing
// over to sooner.
func (c *Cache) controlCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, max(c.redisTimeout, time.Second))
}

// tokenTTL bounds how long a resume token outlives the last event: far
// beyond any oplog window, so it is only ever dropped as garbage.
const tokenTTL = 7 * 24 * time.Hour

// acquire takes the lease, or extends it when holder has it already.
var acquire = redis.NewScript(`
local v = redis.call("GET", KEYS[1])
if v == ARGV[1] then redis.call("PEXPIRE", KEYS[1], ARGV[2]) return 1 end
if v then return 0 end
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
return 1`)

// alone holds what a Cache without Redis keeps for feeds.
type alone struct {
	mu     sync.Mutex
	tokens map[string][]byte
}

// Lease takes the named lease for holder for ttl, or extends it when
// holder has it; it reports whether holder has it now.
func (c *Cache) Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if c.rdb == nil {
		return true, nil
	}
	ctx, cancel := c.controlCtx(ctx)
	defer cancel()
	n, err := acquire.Run(ctx, c.rdb, []string{feedLeaseKey(name)}, holder, ttl.Milliseconds()).Int()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// ReleaseLease gives the named lease up, if holder has it.
func (c *Cache) ReleaseLease(ctx context.Context, name, holder string) error {
	if c.rdb == nil {
		return nil
	}
	ctx, cancel := c.controlCtx(ctx)
	defer cancel()
	err := release.Run(ctx, c.rdb, []string{feedLeaseKey(name)}, holder).Err()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

// Token returns the named feed's resume token, nil when there is none.
func (c *Cache) Token(ctx context.Context, name string) ([]byte, error) {
	if c.rdb == nil {
		c.alone.mu.Lock()
		defer c.alone.mu.Unlock()
		return c.alone.tokens[name], nil
	}
	ctx, cancel := c.controlCtx(ctx)
	defer cancel()
	b, err := c.rdb.Get(ctx, feedTokenKey(name)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return b, err
}

// SaveToken keeps the named feed's resume token; nil drops it.
func (c *Cache) SaveToken(ctx context.Context, name string, token []byte) error {
	if c.rdb == nil {
		c.alone.mu.Lock()
		defer c.alone.mu.Unlock()
		if c.alone.tokens == nil {
			c.alone.tokens = map[string][]byte{}
		}
		c.alone.tokens[name] = token
		return nil
	}
	ctx, cancel := c.controlCtx(ctx)
	defer cancel()
	if token == nil {
		return c.rdb.Del(ctx, feedTokenKey(name)).Err()
	}
	return c.rdb.Set(ctx, feedTokenKey(name), token, tokenTTL).Err()
}
