package cache

import (
	"context"
	"time"

	"github.com/prodapi/prodapi/cache/redistier"
)

// The cache's side of the Redis tier: what it stores there is an entry,
// encoded with its tags (encodeTagged), and a value read back is served
// only if it decodes, belongs to its key and is current.

// A redisRead is what the leading request's own Redis GET found, so that
// its flight does not ask again.
type redisRead struct {
	e        *entry // current (its tags' generations unchanged), or nil
	asked    bool   // whether Redis could be asked
	obsolete *entry // what Redis held, invalidated since it was stored
	seq      uint64 // the invalidation sequence before the read
}

// sharedRead reads key from Redis in the request's own goroutine: a
// flight, and the goroutine DoChan starts for it, is only for a load.
// Concurrent requests for one key share one GET and its decoded entry
// (reads.Do runs it in the first request's goroutine; the others wait for
// it, within the first one's Redis budget, and take the wait from their
// own). The read is detached from the request's cancellation (bounded by
// its Redis budget alone) so that a client that goes away never counts
// against the breaker.
func (c *Cache) sharedRead(ctx context.Context, key string) *redisRead {
	start := time.Now()
	read := false
	v, _, _ := c.reads.Do(key, func() (any, error) {
		read = true
		return c.readRedis(context.WithoutCancel(ctx), key), nil
	})
	if !read {
		redistier.Spend(ctx, time.Since(start))
	}
	return v.(*redisRead)
}

// readRedis reads key from Redis and checks the entry is still current.
func (c *Cache) readRedis(ctx context.Context, key string) *redisRead {
	r := &redisRead{seq: c.inval.seqNow()}
	r.e, r.asked = c.redisGet(ctx, key)
	if r.e != nil && !c.current(ctx, r.e) {
		// Invalidated since it was stored: not served as fresh or
		// while a refresh runs, only if the load fails.
		r.obsolete, r.e = r.e, nil
	}
	return r
}

// redisGet reads the entry under key. ok is false when Redis could not be
// asked or did not answer (no Redis, breaker open, error, timeout): the
// caller then falls back on what it has. A missing key is (nil, true); a
// value that does not decode (corrupt, foreign, another format version,
// not a string) is counted, queued for deletion and reported as missing.
func (c *Cache) redisGet(ctx context.Context, key string) (e *entry, ok bool) {
	if c.redis == nil {
		return nil, false
	}
	b, ok := c.redis.Get(ctx, key)
	if b == nil {
		return nil, ok
	}
	e, err := decodeTagged(key, b)
	if err != nil {
		c.metrics.corrupt.Inc()
		c.log.Warn("cache: dropping a corrupt or foreign value", "key", key)
		c.redis.Delete(ctx, key)
		return nil, true
	}
	return e, true
}
