package redistier

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// What the change feed keeps beside the change log, in its hash slot, so
// that a Cluster replicates it with the stream, in order:
//
//	prodapi:v1:{changes}:refs:<collection>:<id>  what a document linked to at its last change
//	                                             (package enrich's Deriver; bytes of its own)
//	prodapi:v1:{changes}:known:<collection>      the ids the polling fallback knows: a sorted
//	                                             set, each id scored by the last round that saw it
//
// Without Redis they are not kept here: the callers keep them in memory
// (the tier's calls fail with ErrNoRedis).

func refsKey(collection, id string) string { return Prefix + "{changes}:refs:" + collection + ":" + id }
func knownKey(collection string) string    { return Prefix + "{changes}:known:" + collection }

// ErrNoRedis is returned by the feed's state calls on a Tier without
// Redis.
var ErrNoRedis = errors.New("redistier: no Redis")

// Refs returns what SaveRefs kept for a document, nil when nothing.
func (t *Tier) Refs(ctx context.Context, collection, id string) ([]byte, error) {
	if t.rdb == nil {
		return nil, ErrNoRedis
	}
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	b, err := t.rdb.Get(ctx, refsKey(collection, id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	return b, err
}

// SaveRefs keeps refs for a document, for ttl (0: with no expiry); nil
// refs drops what was kept.
func (t *Tier) SaveRefs(ctx context.Context, collection, id string, refs []byte, ttl time.Duration) error {
	if t.rdb == nil {
		return ErrNoRedis
	}
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	if refs == nil {
		return t.rdb.Del(ctx, refsKey(collection, id)).Err()
	}
	return t.rdb.Set(ctx, refsKey(collection, id), refs, ttl).Err()
}

// MarkKnown scores ids of collection with round in its known set; with
// onlyNew, only ids it does not hold yet (the others keep their round).
func (t *Tier) MarkKnown(ctx context.Context, collection string, round int64, ids []string, onlyNew bool) error {
	if t.rdb == nil {
		return ErrNoRedis
	}
	if len(ids) == 0 {
		return nil
	}
	members := make([]redis.Z, len(ids))
	for i, id := range ids {
		members[i] = redis.Z{Score: float64(round), Member: id}
	}
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	if onlyNew {
		return t.rdb.ZAddNX(ctx, knownKey(collection), members...).Err()
	}
	return t.rdb.ZAdd(ctx, knownKey(collection), members...).Err()
}

// Unmarked returns at most limit ids of collection's known set scored
// below round, lowest first.
func (t *Tier) Unmarked(ctx context.Context, collection string, round int64, limit int) ([]string, error) {
	if t.rdb == nil {
		return nil, ErrNoRedis
	}
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	return t.rdb.ZRangeByScore(ctx, knownKey(collection), &redis.ZRangeBy{
		Min: "-inf", Max: "(" + strconv.FormatInt(round, 10), Count: int64(limit),
	}).Result()
}

// ForgetKnown removes ids from collection's known set.
func (t *Tier) ForgetKnown(ctx context.Context, collection string, ids []string) error {
	if t.rdb == nil {
		return ErrNoRedis
	}
	if len(ids) == 0 {
		return nil
	}
	members := make([]any, len(ids))
	for i, id := range ids {
		members[i] = id
	}
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	return t.rdb.ZRem(ctx, knownKey(collection), members...).Err()
}
