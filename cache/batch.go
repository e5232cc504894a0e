package cache

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/prodapi/prodapi/sources"
)

// A BatchLoader is a Loader that also loads several details at once (in
// prodapi, the renderer: one lookup by ids per resource on the document
// database, one enrichment for the batch, each document rendered as its
// detail). reps[i] answers qs[i]; a missing document is a 404
// representation, as Load's. The cache's LoadMany uses it for its misses
// when the wrapped Loader is one.
type BatchLoader interface {
	LoadMany(ctx context.Context, qs []*sources.Query) (reps []*sources.Representation, err error)
}

var _ BatchLoader = (*Cache)(nil) // a cache batches too: the server's

// LoadMany answers several details at once, as Load would answer each
// with Freshness (the documents of a page of the change log, include=doc,
// once this replica has applied its entries): from an entry where one is
// fresh and current, never from a stale one; the others loaded together,
// through the wrapped Loader's LoadMany when it is a BatchLoader (a Load
// each otherwise), outside the keys' flights (no load begun before the
// call answers), and stored under their own keys as their loads would
// have been, fenced the same way. reps[i] answers qs[i]. A failed load
// fails the whole call: no stale entry answers instead.
func (c *Cache) LoadMany(ctx context.Context, qs []*sources.Query) ([]*sources.Representation, error) {
	for _, q := range qs {
		if q == nil || q.Resource == nil || !q.IsDetail() {
			return nil, errors.New("cache: LoadMany loads details")
		}
	}
	if c.redis != nil {
		ctx = c.redis.WithBudget(ctx)
	}
	reps := make([]*sources.Representation, len(qs))
	keys := make([]string, len(qs))
	var miss []int
	for i, q := range qs {
		keys[i] = Key(q)
		if c.ttl(q.Resource.Name, true) > 0 {
			reps[i] = c.hit(ctx, q, keys[i])
		}
		if reps[i] == nil {
			miss = append(miss, i)
		}
	}
	if len(miss) == 0 {
		return reps, nil
	}
	load := make([]*sources.Query, len(miss))
	for j, i := range miss {
		load[j] = qs[i]
	}
	fences := c.beginFills(ctx, load)
	lctx, cancel := context.WithTimeout(ctx, c.loadTimeout)
	defer cancel()
	loaded, err := c.callBatchLoader(lctx, load)
	if err != nil {
		for _, q := range load {
			c.metrics.requests.Inc(q.Resource.Name, OutcomeError)
		}
		return nil, err
	}
	for j, i := range miss {
		q, rep := qs[i], loaded[j]
		res := q.Resource.Name
		fresh := c.ttl(res, true)
		if fresh <= 0 {
			out := *rep
			out.CacheStatus, out.Outcome = cacheStatus(answer{kind: kindBypass, missing: rep.Missing}, 0), OutcomeBypass
			c.metrics.requests.Inc(res, OutcomeBypass)
			c.countIncomplete(res, &out)
			reps[i] = &out
			continue
		}
		reps[i] = c.fromFill(res, c.store(ctx, keys[i], fences[j], rep, fresh), false)
	}
	return reps, nil
}

// hit answers q from an entry of key that is fresh and current: in
// process within LocalTTL, else in Redis (or, Redis not asked, in
// process while fresh). Nil when there is none.
func (c *Cache) hit(ctx context.Context, q *sources.Query, key string) *sources.Representation {
	res := q.Resource.Name
	now := c.now()
	r := c.local.get(key, now)
	if r != nil && now.Before(r.localUntil) {
		return c.localHit(res, r, now)
	}
	if c.redis == nil {
		return nil
	}
	rr := c.sharedRead(ctx, key)
	now = c.now()
	if e := rr.e; e != nil && e.isFresh(now) {
		c.keepLocalUnless(key, e, now, rr.seq)
		return c.represent(res, e, nil, now, answer{kind: kindHit, tier: tierRedis})
	}
	if !rr.asked && r != nil && r.e.isFresh(now) {
		// Redis cannot be asked: the in-process copy, which every
		// invalidation this replica applied has spared, is all there is.
		return c.represent(res, r.e, nil, now, answer{kind: kindHit, tier: tierLocal})
	}
	return nil
}

// beginFills is beginFill for several loads at once: one read of the
// generations of all their static tags.
func (c *Cache) beginFills(ctx context.Context, qs []*sources.Query) []fence {
	fences := make([]fence, len(qs))
	seq := c.inval.seqNow()
	var all []string
	for i, q := range qs {
		fences[i] = fence{static: staticTags(q), seq: seq}
		all = append(all, fences[i].static...)
	}
	if c.redis == nil {
		return fences
	}
	gens, ok := c.redis.Gens(ctx, all)
	if !ok {
		return fences
	}
	for i := range fences {
		n := len(fences[i].static)
		fences[i].gens, gens = gens[:n:n], gens[n:]
	}
	return fences
}

// callBatchLoader loads qs through the wrapped loader, at once when it
// is a BatchLoader, turning a panic into an error as callLoader does.
func (c *Cache) callBatchLoader(ctx context.Context, qs []*sources.Query) (reps []*sources.Representation, err error) {
	bl, ok := c.load.(BatchLoader)
	if !ok {
		reps = make([]*sources.Representation, len(qs))
		for i, q := range qs {
			if reps[i], err = c.callLoader(ctx, q); err != nil {
				return nil, err
			}
		}
		return reps, nil
	}
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("cache: panic in a batch load", "resource", qs[0].Resource.Name, "panic", p, "stack", string(debug.Stack()))
			reps, err = nil, errPanic
		}
	}()
	reps, err = bl.LoadMany(ctx, qs)
	if err != nil {
		return nil, err
	}
	if len(reps) != len(qs) {
		return nil, fmt.Errorf("cache: the batch loader returned %d representations for %d queries", len(reps), len(qs))
	}
	for _, rep := range reps {
		if rep == nil {
			return nil, errNoValue
		}
	}
	return reps, nil
}
