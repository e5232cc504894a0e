package redistier

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A generation names the state of a tag: a random 63-bit number, set anew
// by every NewGens of the tag (never a counter, so that a key that expired
// or was evicted reads as 0 and cannot come back to a value an old reader
// recorded), kept GenTTL after it was last set. The caller says what its
// tags mean (package cache: what its entries were built from).

// UnknownGen is the generation of a tag whose key holds something that is
// not a generation. NewGens never sets it, so it matches no generation
// read later; callers use it too for a generation they could not read.
const UnknownGen = ^uint64(0)

// genKey is the key holding a tag's generation.
func genKey(tag string) string { return Prefix + "gen:" + tag }

// Gens reads the current generations of tags in one pipelined round
// trip (one GET per tag, so that a Cluster can route each), waiting at
// most Timeout, or what is left of ctx's budget. A tag never set, or whose
// key expired, is generation 0. ok is false when Redis could not be asked
// or failed.
func (t *Tier) Gens(ctx context.Context, tags []string) (gens []uint64, ok bool) {
	if len(tags) == 0 {
		return nil, true
	}
	if t.rdb == nil {
		return nil, false
	}
	wait, ok := t.allot(ctx)
	if !ok || !t.breaker.allow() {
		return nil, false
	}
	start := time.Now()
	defer t.spent(ctx, start, wait)
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	sctx, span := t.span(ctx, "PIPELINE")
	pipe := t.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(tags))
	for i, tag := range tags {
		cmds[i] = pipe.Get(sctx, genKey(tag))
	}
	_, err := pipe.Exec(sctx)
	t.metrics.redisGens.Observe(time.Since(start).Seconds())
	endSpan(span, err)
	t.judgeShort(ctx, err)
	if err != nil && !errors.Is(err, redis.Nil) {
		t.metrics.redisErrors.Inc("get")
		return nil, false
	}
	gens = make([]uint64, len(tags))
	for i, cmd := range cmds {
		s, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if gens[i], err = strconv.ParseUint(s, 10, 64); err != nil {
			gens[i] = UnknownGen
		}
	}
	return gens, true
}

// NewGens gives every one of tags a new generation (one random value for
// them all), kept GenTTL. Without Redis there is nothing to set.
func (t *Tier) NewGens(ctx context.Context, tags []string) error {
	if t.rdb == nil || len(tags) == 0 {
		return nil
	}
	gen := strconv.FormatUint(rand.Uint64()>>1|1, 10)
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	pipe := t.rdb.Pipeline()
	for _, tag := range tags {
		pipe.Set(ctx, genKey(tag), gen, t.genTTL)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.metrics.redisErrors.Inc("invalidate")
		return err
	}
	return nil
}
