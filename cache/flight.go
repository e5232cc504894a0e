package cache

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	"github.com/prodapi/prodapi/sources"
)

// kind is how a request was answered.
type kind int

const (
	kindHit        kind = iota // a fresh entry
	kindStale                  // a stale entry, while a refresh runs
	kindStaleError             // a stale entry, because the load failed or was incomplete
	kindLoaded                 // a load, stored
	kindPass                   // a load that may not be stored
	kindBypass                 // a load, the cache being off for the resource
)

// An answer is how one request was answered: what its Cache-Status says,
// and how it is counted.
type answer struct {
	kind      kind
	tier      string   // where the entry came from: local or redis; backend for a load
	status    int      // fwd-status: the load's status, or the failure's
	collapsed bool     // answered by another request's load
	missing   []string // what an incomplete load lacks (Representation.Missing)
}

// A fill is what a flight produced, shared by every request that waited
// for it. Each request builds its own Representation from it.
type fill struct {
	tier   string // where the entry came from: local, redis or backend
	kind   kind
	e      *entry                  // the entry served (nil for kindPass)
	raw    []byte                  // the uncompressed body, after a load
	pass   *sources.Representation // kindPass: the loader's answer
	status int                     // fwd-status: the load's status, or the failure's
	fleet  bool                    // loaded by another replica (one load per fleet)
}

// flight joins the flight of key, where one request at a time fills the
// key (fill), and answers from what it produced. When the gate refused
// the load of the request that ran the flight, the others join a flight
// again: one of them runs it, and asks the gate for its own load.
//
// A query with Freshness (min_position) joins only the flights of others
// that came after the same in-process invalidations: a load begun before
// one of them may hold what it invalidated, and is never its answer.
func (c *Cache) flight(ctx context.Context, q *sources.Query, key string, fresh time.Duration, pre *redisRead) (*sources.Representation, string, error) {
	res := q.Resource.Name
	for {
		leader := false // set inside the flight only when this request runs it
		select {
		case r := <-c.lead(ctx, q, key, fresh, pre, &leader):
			if rf, ok := errors.AsType[*refusal](r.Err); ok {
				if !leader {
					continue
				}
				return nil, "", rf.err
			}
			if r.Err != nil {
				c.metrics.requests.Inc(res, OutcomeError)
				return nil, "", r.Err
			}
			f := r.Val.(*fill)
			collapsed := f.fleet || (!leader && (f.kind == kindLoaded || f.kind == kindPass))
			return c.fromFill(res, f, collapsed), f.tier, nil
		case <-ctx.Done():
			c.metrics.requests.Inc(res, OutcomeError)
			return nil, "", fmt.Errorf("cache: waiting for a load: %w", context.Cause(ctx))
		}
	}
}

// lead joins the flight of key, or starts it: then this request runs it
// (leader is set) and fills the key.
func (c *Cache) lead(ctx context.Context, q *sources.Query, key string, fresh time.Duration, pre *redisRead, leader *bool) <-chan singleflight.Result {
	res := q.Resource.Name
	flightKey := key
	if q.Fresh != nil {
		flightKey = key + "\x00" + strconv.FormatUint(c.inval.seqNow(), 10)
	}
	return c.flights.DoChan(flightKey, func() (v any, err error) {
		*leader = true
		defer func() {
			if p := recover(); p != nil {
				c.log.Error("cache: panic in a fill", "resource", res, "panic", p, "stack", string(debug.Stack()))
				v, err = nil, errPanic
			}
		}()
		// A variable of its own: assigning the captured ctx would move
		// it to the heap for every request that joins a flight.
		fctx := ctx
		if c.tracer != nil {
			var span trace.Span
			fctx, span = c.tracer.Start(ctx, "cache.flight")
			defer span.End()
		}
		return c.fill(fctx, key, q, fresh, pre)
	})
}

// A refusal is the gate's refusal of a flight's load: the request that
// ran the flight is answered with err, and the others join a flight
// again.
type refusal struct{ err error }

func (r *refusal) Error() string { return "cache: load refused: " + r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// admit asks the request's gate (LoadGated's, else Options.Gate) whether
// the request of ctx may start a load.
func (c *Cache) admit(ctx context.Context) (done func(), err error) {
	if g, ok := ctx.Value(gateKey{}).(Gate); ok {
		return g.AdmitLoad(ctx)
	}
	if c.gate == nil {
		return func() {}, nil
	}
	return c.gate.AdmitLoad(ctx)
}

// fromFill is the Representation of what a fill produced, for one
// request (collapsed: answered by another request's load).
func (c *Cache) fromFill(res string, f *fill, collapsed bool) *sources.Representation {
	a := answer{kind: f.kind, tier: f.tier, status: f.status, collapsed: collapsed}
	if f.kind == kindPass {
		rep := *f.pass
		a.missing = rep.Missing
		rep.CacheStatus, rep.Outcome = cacheStatus(a, 0), OutcomeMiss
		if collapsed {
			rep.Outcome = OutcomeCollapsed
		}
		c.metrics.requests.Inc(res, rep.Outcome)
		c.countIncomplete(res, &rep)
		return &rep
	}
	return c.represent(res, f.e, f.raw, c.now(), a)
}

// fill runs inside the flight of key: it looks in the in-process tier
// again (an earlier flight may just have filled it), and in Redis unless
// the leading request just did (pre), then loads.
func (c *Cache) fill(ctx context.Context, key string, q *sources.Query, fresh time.Duration, pre *redisRead) (*fill, error) {
	ctx, cancel := c.detach(ctx)
	defer cancel()
	now := c.now()
	r := c.local.get(key, now)
	if r != nil && now.Before(r.localUntil) && serves(q, r.e) {
		return &fill{tier: tierLocal, kind: kindHit, e: r.e}, nil
	}
	rr := pre
	if rr == nil {
		rr = c.readRedis(ctx, key)
	}
	e, asked, seq, obsolete := rr.e, rr.asked, rr.seq, rr.obsolete
	tier := tierRedis
	if !asked && r != nil {
		// Redis cannot be asked: the in-process copy is all there is.
		e, tier = r.e, tierLocal
	}
	now = c.now()
	strict := q.Fresh != nil // min_position: no stale entry, not even as a fallback
	if e != nil && serves(q, e) {
		switch {
		case e.isFresh(now):
			c.keepLocalUnless(key, e, now, seq)
			return &fill{tier: tier, kind: kindHit, e: e}, nil
		case e.isUsable(now) && !strict:
			c.keepLocalUnless(key, e, now, seq)
			// The failure a response reports is one from before it.
			_, status := c.bg.staleState(key, now)
			c.refresh(ctx, key, q, fresh)
			return &fill{tier: tier, kind: kindStale, e: e, status: status}, nil
		}
	}
	// Redis had nothing usable. A copy kept here still answers if the
	// load fails.
	var fallback *entry
	fallbackTier := tierLocal
	if r != nil && r.e.isUsable(now) && !strict {
		fallback = r.e
	}
	if obsolete != nil && obsolete.isUsable(now) && !strict {
		fallback, fallbackTier = obsolete, tierRedis
	}
	var other *entry
	var lease string
	if !strict {
		// One load per fleet. Not for Freshness: the lease may be held by
		// a load begun before the request's position, whose value its
		// fence keeps out of Redis: the wait would be for nothing.
		other, lease = c.fleet(ctx, key)
	}
	if other != nil {
		c.local.put(key, other, c.now())
		return &fill{tier: tierRedis, kind: kindLoaded, e: other, status: other.status, fleet: true}, nil
	}
	defer c.releaseLease(key, lease)
	done, err := c.admit(ctx)
	if err != nil {
		return nil, &refusal{err: err}
	}
	defer done()
	fence := c.beginFill(ctx, q)
	rep, err := c.callLoader(ctx, q)
	switch {
	case err != nil && !staleable(err):
		return nil, err
	case err == nil && rep.Missing == nil:
		return c.storeWith(ctx, key, fence, rep, fresh, lease != ""), nil
	}
	// The load failed, or is incomplete: a complete entry within its
	// stale window answers instead.
	now = c.now()
	if fallback != nil && fallback.isUsable(now) {
		status := fwdStatus(err)
		if err == nil {
			status = rep.Status
		}
		c.bg.noteFailure(key, status, now)
		return &fill{tier: fallbackTier, kind: kindStaleError, e: fallback, status: status}, nil
	}
	if err != nil {
		return nil, err
	}
	return c.storeWith(ctx, key, fence, rep, fresh, lease != ""), nil
}

// store makes an entry of a loaded representation and puts it in both
// tiers, unless it may not be stored: an incomplete one (Missing), one
// read before the load began (Early), or a status other than 200 and
// 404.
func (c *Cache) store(ctx context.Context, key string, f fence, rep *sources.Representation, fresh time.Duration) *fill {
	return c.storeWith(ctx, key, f, rep, fresh, false)
}

// storeWith is store; direct waits for the value's write to Redis before
// it returns (a lease holder's waiters poll for it).
func (c *Cache) storeWith(ctx context.Context, key string, f fence, rep *sources.Representation, fresh time.Duration, direct bool) *fill {
	stale := c.stale
	switch {
	case rep.Early:
		// Stored nowhere, but served compressed, as an entry would be.
		if rep.Gzip == nil && len(rep.Body) >= minGzip {
			early := *rep
			early.Gzip = c.gzip.compress(rep.Body)
			rep = &early
		}
		return &fill{tier: tierBackend, kind: kindPass, pass: rep, status: rep.Status}
	case rep.Missing != nil || (rep.Status != 200 && rep.Status != 404):
		return &fill{tier: tierBackend, kind: kindPass, pass: rep, status: rep.Status}
	case rep.Status == 404:
		fresh, stale = c.notFoundTTL, 0
	}
	if fresh <= 0 {
		return &fill{tier: tierBackend, kind: kindPass, pass: rep, status: rep.Status}
	}
	now := c.now()
	e := c.newEntry(rep, now, fresh, stale)
	if !c.tag(ctx, f, rep, e) {
		return &fill{tier: tierBackend, kind: kindPass, pass: rep, status: rep.Status}
	}
	if !c.keepLocalUnless(key, e, now, f.seq) {
		c.metrics.fencedFills.Inc()
		return &fill{tier: tierBackend, kind: kindPass, pass: rep, status: rep.Status}
	}
	if c.redis != nil { // without Redis nothing reads the value
		// Never past the generations it records (redistier.GenTTL).
		val, ttl := encodeTagged(key, e), min(fresh+stale, c.redis.GenTTL())
		if direct {
			c.redis.SetAndWait(ctx, key, val, ttl)
		} else {
			c.redis.Set(ctx, key, val, ttl)
		}
	}
	c.bg.clearFailure(key)
	return &fill{tier: tierBackend, kind: kindLoaded, e: e, raw: rep.Body, status: rep.Status}
}

// keepLocalUnless puts e in the in-process tier, unless an invalidation
// of one of its tags arrived since seq; it reports whether the entry is
// current.
func (c *Cache) keepLocalUnless(key string, e *entry, now time.Time, seq uint64) bool {
	return !c.local.putUnless(key, e, now, func() bool {
		return c.inval.since(seq, e.tags)
	})
}

var (
	errPanic   = errors.New("cache: the load panicked")
	errNoValue = errors.New("cache: the loader returned no representation")
)

// callLoader runs the wrapped loader, turning a panic into an error: a
// panic inside a flight would otherwise crash the process.
func (c *Cache) callLoader(ctx context.Context, q *sources.Query) (rep *sources.Representation, err error) {
	defer func() {
		if p := recover(); p != nil {
			c.log.Error("cache: panic in a load", "resource", q.Resource.Name, "panic", p, "stack", string(debug.Stack()))
			rep, err = nil, errPanic
		}
	}()
	rep, err = c.load.Load(ctx, q)
	if err == nil && rep == nil {
		err = errNoValue
	}
	return rep, err
}

// detach returns a context for a load shared by several requests: it
// keeps ctx's values but not its cancellation, and ends after
// LoadTimeout.
func (c *Cache) detach(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.loadTimeout)
}

// bypass loads without the cache, for a resource whose TTL is zero.
func (c *Cache) bypass(ctx context.Context, q *sources.Query) (*sources.Representation, error) {
	done, err := c.admit(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	rep, err := c.callLoader(ctx, q)
	if err != nil {
		c.metrics.requests.Inc(q.Resource.Name, OutcomeError)
		return nil, err
	}
	out := *rep
	out.CacheStatus, out.Outcome = cacheStatus(answer{kind: kindBypass, missing: rep.Missing}, 0), OutcomeBypass
	c.metrics.requests.Inc(q.Resource.Name, OutcomeBypass)
	c.countIncomplete(q.Resource.Name, &out)
	return &out, nil
}

// countIncomplete counts a response that goes out incomplete.
func (c *Cache) countIncomplete(res string, rep *sources.Representation) {
	if rep.Missing != nil {
		c.metrics.incomplete.Inc(res)
	}
}

// staleable reports whether a load failure may be answered with a stale
// entry: any failure but a refusal of the query itself.
func staleable(err error) bool {
	return !errors.Is(err, sources.ErrInvalid) && !errors.Is(err, sources.ErrNotFound)
}

// fwdStatus is the status a failed load stands for, as Cache-Status
// fwd-status reports it: the status the server answers the failure with
// (sources.Classify), so a cancelled load reads 499, as its request did.
func fwdStatus(err error) int {
	_, status := sources.Classify(err)
	return status
}

// represent builds the Representation of e for one request answered as
// a says, and counts the request (and, for a hit or a stale entry, the
// tier that held it).
func (c *Cache) represent(res string, e *entry, raw []byte, now time.Time, a answer) *sources.Representation {
	rep := &sources.Representation{
		Status:       e.status,
		ETag:         e.etag,
		Total:        e.total,
		LastModified: e.lastModified,
		StoredAt:     e.storedAt,
		CacheStatus:  cacheStatus(a, e.ttl(now)),
	}
	if e.gzip {
		rep.Gzip, rep.Body = e.body, raw
	} else {
		rep.Body = e.body
	}
	switch {
	case a.kind == kindHit:
		rep.Outcome = OutcomeHit
	case a.kind == kindStale || a.kind == kindStaleError:
		rep.Outcome = OutcomeStale
	case a.collapsed:
		rep.Outcome = OutcomeCollapsed
	default:
		rep.Outcome = OutcomeMiss
	}
	c.metrics.requests.Inc(res, rep.Outcome)
	if rep.Outcome == OutcomeHit || rep.Outcome == OutcomeStale {
		c.metrics.hits.Inc(res, a.tier)
	}
	return rep
}

// cacheStatus is the RFC 9211 Cache-Status of a response:
//
//	prodapi; hit; ttl=42                               fresh entry
//	prodapi; hit; ttl=-3                               stale entry, refresh running (stale-while-revalidate)
//	prodapi; fwd=stale; fwd-status=503; ttl=-3         stale entry, the backend failed (stale-if-error)
//	prodapi; fwd=miss; fwd-status=200; stored; ttl=60  loaded and stored
//	prodapi; fwd=miss; fwd-status=200; collapsed; ...  answered by another request's load
//	prodapi; fwd=miss; fwd-status=200                  loaded, not storable
//	prodapi; fwd=miss; fwd-status=200; detail="incomplete: planning, assignment links"
//	                                                   loaded, incomplete: the optional lookups named failed
//	prodapi; fwd=bypass                                caching is off for the resource
//
// The key is never part of it.
func cacheStatus(a answer, ttl int64) string {
	var buf [80]byte
	b := append(buf[:0], "prodapi; "...)
	switch a.kind {
	case kindBypass:
		b = append(b, "fwd=bypass"...)
		return string(appendMissing(b, a.missing))
	case kindHit:
		b = append(b, "hit"...)
	case kindStale, kindStaleError:
		if a.status == 0 {
			b = append(b, "hit"...)
		} else {
			b = append(b, "fwd=stale; fwd-status="...)
			b = strconv.AppendInt(b, int64(a.status), 10)
		}
	case kindLoaded, kindPass:
		b = append(b, "fwd=miss; fwd-status="...)
		b = strconv.AppendInt(b, int64(a.status), 10)
		if a.collapsed {
			b = append(b, "; collapsed"...)
		}
		if a.kind == kindPass {
			return string(appendMissing(b, a.missing))
		}
		b = append(b, "; stored"...)
	}
	b = append(b, "; ttl="...)
	b = strconv.AppendInt(b, ttl, 10)
	return string(b)
}

// appendMissing appends to a Cache-Status the detail of an incomplete
// response: what it lacks, as an RFC 8941 string (the step names are
// prodapi's own, printable ASCII with no quote or backslash).
func appendMissing(b []byte, missing []string) []byte {
	if missing == nil {
		return b
	}
	b = append(b, `; detail="incomplete: `...)
	for i, m := range missing {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, m...)
	}
	return append(b, '"')
}
