package cache

import (
	"context"
	"errors"
	"hash/maphash"
	"time"

	"github.com/redis/go-redis/v9"
)

// Writes to Redis leave the request path: they are queued, per key on one
// of writers goroutines (so the writes of one key keep their order), and
// dropped and counted when a queue is full.
const (
	writers    = 4
	writeQueue = 256
)

type writeOp struct {
	key string
	val []byte // nil: delete the key
	ttl time.Duration
}

// redisGet reads key from Redis under the Redis timeout. ok is false when
// Redis could not be asked or did not answer (breaker open, error,
// timeout): the caller then falls back on what it has. A missing key is
// (nil, true); a value that does not decode is counted, queued for
// deletion and reported as missing.
func (c *Cache) redisGet(ctx context.Context, key string) (e *entry, ok bool) {
	if c.rdb == nil || !c.breaker.allow() {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, c.redisTimeout)
	b, err := c.get(ctx, key)
	cancel()
	switch {
	case err == nil:
		c.breaker.done(true)
	case errors.Is(err, redis.Nil):
		c.breaker.done(true)
		return nil, true
	case redis.HasErrorPrefix(err, "WRONGTYPE"):
		// Something else lives under our key: foreign.
		c.breaker.done(true)
		b = nil
	default:
		// A reply error (loading, out of memory) came back fast: Redis
		// is there, so it does not count towards the breaker.
		var reply redis.Error
		c.breaker.done(errors.As(err, &reply))
		c.metrics.redisErrors.Inc("get")
		c.log.Debug("cache: redis get failed", "error", err)
		return nil, false
	}
	e, err = decode(key, b)
	if err != nil {
		c.metrics.corrupt.Inc()
		c.log.Warn("cache: dropping a corrupt or foreign value", "key", key)
		c.enqueue(writeOp{key: key})
		return nil, true
	}
	return e, true
}

// enqueue hands a write to its writer without waiting. It is dropped
// (and counted) when the cache is closed, the breaker is open or the
// queue is full.
func (c *Cache) enqueue(op writeOp) {
	if c.rdb == nil {
		return
	}
	if c.breaker.isOpen() {
		c.metrics.writesDropped.Inc("breaker_open")
		return
	}
	c.wmu.RLock()
	defer c.wmu.RUnlock()
	if c.wclosed {
		c.metrics.writesDropped.Inc("closed")
		return
	}
	q := c.queues[maphash.String(c.seed, op.key)%writers]
	c.pending.Add(1)
	select {
	case q <- op:
	default:
		c.pending.Done()
		c.metrics.writesDropped.Inc("queue_full")
	}
}

// writer makes the writes of one queue. It ends when Close closes the
// queue and the queue is drained; after Close gives up waiting (abort),
// the rest is dropped.
func (c *Cache) writer(q <-chan writeOp) {
	defer c.writersDone.Done()
	for op := range q {
		select {
		case <-c.abort:
			c.metrics.writesDropped.Inc("closed")
		default:
			c.write(op)
		}
		c.pending.Done()
	}
}

func (c *Cache) write(op writeOp) {
	if !c.breaker.allow() {
		c.metrics.writesDropped.Inc("breaker_open")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.redisTimeout)
	defer cancel()
	var err error
	opName := "set"
	if op.val == nil {
		opName = "del"
		err = c.rdb.Del(ctx, op.key).Err()
	} else {
		err = c.rdb.Set(ctx, op.key, op.val, op.ttl).Err()
	}
	// A reply error (out of memory, read-only replica) means Redis is
	// there: it counts, but does not trip the breaker, so reads go on.
	var reply redis.Error
	c.breaker.done(err == nil || errors.As(err, &reply))
	if err != nil {
		c.metrics.redisErrors.Inc(opName)
		c.log.Debug("cache: redis write failed", "op", opName, "error", err)
	}
}

// get reads key: through go-redis's auto-pipeliner when the client has
// one, so that concurrent hits share round trips, else with a plain GET.
// The pipeliner runs commands on its own context (a queued command does
// not see our deadline; its batch is bounded by the connection's
// read/write timeouts), so the reply is awaited, in the request's own
// goroutine, only as long as ctx allows: a hung Redis costs a request
// RedisTimeout, never more. An abandoned GET still completes in its
// batch; nobody reads it.
func (c *Cache) get(ctx context.Context, key string) ([]byte, error) {
	if c.pipe == nil {
		return c.rdb.Get(ctx, key).Bytes()
	}
	cmd := redis.NewStringCmd(ctx, "get", key)
	if err := c.pipe.Submit(ctx, cmd).WaitContext(ctx); err != nil {
		return nil, err
	}
	return cmd.Bytes()
}
