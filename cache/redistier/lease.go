package redistier

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Two kinds of lease live here. A load lease (TryLoadLease) lets one
// replica of the fleet load a key Redis does not hold while the others
// wait for its value: taken once with SET NX PX, never renewed. A feed
// lease (Lease) lets one replica watch a change feed for the fleet: taken
// or renewed by its holder. A feed's resume token (Token, SaveToken) is
// kept in the change log's hash slot, {changes}, so that whoever watches
// next continues where the last one stopped.
//
// A feed saves its token after appending the changes before it to the
// change log's stream: in the stream's slot, a Cluster replicates the
// token in order with the entries (one master, one replication stream),
// so a failover that loses the newest entries loses the token saves made
// after them too, and the feed that takes over resumes before what was
// lost and reports it again. A token under the old key (before this
// version: prodapi:v1:feed:<name>:token, outside the slot) is read while
// there is none under the new one, and dropped with the first save.

func loadLeaseKey(key string) string  { return Prefix + "lease:" + key }
func feedLeaseKey(name string) string { return Prefix + "feed:" + name + ":lease" }
func feedTokenKey(name string) string { return Prefix + "{changes}:feed:" + name + ":token" }

// legacyTokenKey is where versions before the {changes} slot kept a
// feed's resume token.
func legacyTokenKey(name string) string { return Prefix + "feed:" + name + ":token" }

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

// release deletes the lease only while it is still ours.
var release = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// alone holds what a Tier without Redis keeps for feeds.
type alone struct {
	mu     sync.Mutex
	tokens map[string][]byte
}

// TryLoadLease tries to take the load lease of key, for ttl. It returns
// the lease's token when this replica holds it now, "" when another
// replica does; ok is false when Redis could not be asked (no Redis,
// budget spent, breaker open, error, timeout), and the caller loads
// without a lease. The call waits at most Timeout, or what is left of
// ctx's budget.
func (t *Tier) TryLoadLease(ctx context.Context, key string, ttl time.Duration) (token string, ok bool) {
	if t.rdb == nil {
		return "", false
	}
	wait, ok := t.allot(ctx)
	if !ok || !t.breaker.allow() {
		return "", false
	}
	token = t.id + ":" + randomID()
	start := time.Now()
	defer t.spent(ctx, start, wait)
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	sctx, span := t.span(ctx, "SET")
	won, err := t.rdb.SetNX(sctx, loadLeaseKey(key), token, ttl).Result()
	t.metrics.redisLease.Observe(time.Since(start).Seconds())
	endSpan(span, err)
	t.judgeShort(ctx, err)
	if err != nil {
		t.metrics.redisErrors.Inc("lease")
		return "", false
	}
	if !won {
		return "", true
	}
	return token, true
}

// ReleaseLoadLease gives the load lease of key up, if token still holds
// it. It returns at once: the release is made off the request path,
// within Timeout (Settle waits for it).
func (t *Tier) ReleaseLoadLease(key, token string) {
	if token == "" || t.rdb == nil {
		return
	}
	t.calls.Add(1)
	// Ends within Timeout.
	go func() {
		defer t.calls.Done()
		ctx, cancel := context.WithTimeout(context.Background(), t.timeout)
		defer cancel()
		if err := release.Run(ctx, t.rdb, []string{loadLeaseKey(key)}, token).Err(); err != nil && !errors.Is(err, redis.Nil) {
			t.metrics.redisErrors.Inc("lease")
		}
	}()
}

// Lease takes the named feed lease for holder for ttl, or extends it when
// holder has it; it reports whether holder has it now. Without Redis the
// replica always has it.
func (t *Tier) Lease(ctx context.Context, name, holder string, ttl time.Duration) (bool, error) {
	if t.rdb == nil {
		return true, nil
	}
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	n, err := acquire.Run(ctx, t.rdb, []string{feedLeaseKey(name)}, holder, ttl.Milliseconds()).Int()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// ReleaseLease gives the named feed lease up, if holder has it.
func (t *Tier) ReleaseLease(ctx context.Context, name, holder string) error {
	if t.rdb == nil {
		return nil
	}
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	err := release.Run(ctx, t.rdb, []string{feedLeaseKey(name)}, holder).Err()
	if errors.Is(err, redis.Nil) {
		return nil
	}
	return err
}

// Token returns the named feed's resume token, nil when there is none:
// the one saved under the {changes} slot, or while there is none, one
// an older version saved under the old key.
func (t *Tier) Token(ctx context.Context, name string) ([]byte, error) {
	if t.rdb == nil {
		t.alone.mu.Lock()
		defer t.alone.mu.Unlock()
		return t.alone.tokens[name], nil
	}
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	for _, key := range []string{feedTokenKey(name), legacyTokenKey(name)} {
		b, err := t.rdb.Get(ctx, key).Bytes()
		if !errors.Is(err, redis.Nil) {
			return b, err
		}
	}
	return nil, nil
}

// SaveToken keeps the named feed's resume token, for a week after the
// last save; nil drops it. Either way an old version's token under the
// old key goes (after: a failure leaves the old key to read, never a
// lost token).
func (t *Tier) SaveToken(ctx context.Context, name string, token []byte) error {
	if t.rdb == nil {
		t.alone.mu.Lock()
		defer t.alone.mu.Unlock()
		if t.alone.tokens == nil {
			t.alone.tokens = map[string][]byte{}
		}
		t.alone.tokens[name] = token
		return nil
	}
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	var err error
	if token == nil {
		err = t.rdb.Del(ctx, feedTokenKey(name)).Err()
	} else {
		err = t.rdb.Set(ctx, feedTokenKey(name), token, tokenTTL).Err()
	}
	if err != nil {
		return err
	}
	// Two slots: a command of its own.
	return t.rdb.Del(ctx, legacyTokenKey(name)).Err()
}
