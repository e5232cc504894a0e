package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/metrics"
)

// A Loader produces the representation of a query: what the cache calls
// on a miss (in prodapi, the renderer). Errors wrapping
// sources.ErrInvalid or sources.ErrNotFound refuse the query; any other
// error lets the cache serve a stale entry instead. A Loader must not
// keep or modify the representations it returns: the cache shares them.
type Loader interface {
	Load(ctx context.Context, q *sources.Query) (*sources.Representation, error)
}

// LoaderFunc adapts a function to a Loader.
type LoaderFunc func(ctx context.Context, q *sources.Query) (*sources.Representation, error)

// Load calls f.
func (f LoaderFunc) Load(ctx context.Context, q *sources.Query) (*sources.Representation, error) {
	return f(ctx, q)
}

// Options tune a Cache. The zero value is usable.
type Options struct {
	// TTL is the freshness of a resource's list or detail entries; nil
	// means 10s for lists and 60s for details. A resource whose TTL is
	// zero or less is not cached at all (outcome bypass).
	TTL func(resource string, detail bool) time.Duration
	// Stale is the serve-stale window after freshness: within it an
	// expired entry is served at once while one background refresh runs
	// (stale-while-revalidate), and served when the backend fails
	// (stale-if-error). Zero: no stale serving.
	Stale time.Duration
	// NotFoundTTL is the freshness of 404 entries, which have no stale
	// window. Zero: 404s are not cached.
	NotFoundTTL time.Duration
	// LocalBytes bounds the in-process tier; 0 means 64 MiB, a negative
	// value turns the tier off.
	LocalBytes int64
	// LocalTTL is how long the in-process tier serves an entry before
	// asking Redis again, capped by the entry's remaining freshness; 0
	// means 2s. Without Redis the tier serves entries for their whole
	// freshness.
	LocalTTL time.Duration
	// LoadTimeout bounds a load, which runs detached from the requests
	// waiting for it; 0 means 10s.
	LoadTimeout time.Duration

	// SearchLag is how long after a change the lists of a search resource
	// are invalidated a second time (Apply): the search index shows a
	// write about a second after the database does. 0 means 2s; negative:
	// no second invalidation.
	SearchLag time.Duration

	Metrics *metrics.Metrics // nil: none
	Logger  *slog.Logger     // nil: discard
	Now     func() time.Time // nil: time.Now
	// Tracer, when set, gets a span per lookup (cache.lookup, with the
	// tier that answered) and per load (cache.flight). Nil: no spans,
	// at no cost.
	Tracer trace.TracerProvider
}

// Defaults of Options.
const (
	DefaultListTTL     = 10 * time.Second
	DefaultDetailTTL   = 60 * time.Second
	DefaultLocalBytes  = 64 << 20
	DefaultLocalTTL    = 2 * time.Second
	DefaultLoadTimeout = 10 * time.Second
)

// Background refresh policy: after a failed load of a key, no refresh of
// it starts for refreshBackoff, and its stale responses carry the failure
// (fwd=stale; fwd-status=...) for failureMemo. At most maxFailures keys
// are remembered.
const (
	refreshBackoff = time.Second
	failureMemo    = 30 * time.Second
	maxFailures    = 4096
)

// A Cache is a read-through cache in front of a Loader: an in-process
// tier, then Redis when there is one, then one load per key. See the
// package documentation for the policy. A Cache is safe for concurrent
// use; Close stops its background work.
type Cache struct {
	local *local             // the in-process tier
	redis *redistier.Tier    // the Redis tier; nil: in-process only
	reads singleflight.Group // Redis reads, in the requests' own goroutines
	group singleflight.Group // loads
	load  Loader

	ttl         func(resource string, detail bool) time.Duration
	stale       time.Duration
	notFoundTTL time.Duration
	loadTimeout time.Duration
	searchLag   time.Duration
	after       func(time.Duration) <-chan time.Time // tests: the second invalidation's timer; nil: a real one
	log         *slog.Logger
	now         func() time.Time
	metrics     *series
	tracer      trace.Tracer // nil: no spans

	keys  *keyMemo
	gzip  gzipPool
	inval invalLog
	known knownGens // generations read from Redis, kept while subscribed

	// base is cancelled by Close: background refreshes derive from it.
	base       context.Context
	cancelBase context.CancelFunc

	mu         sync.Mutex
	closed     bool
	refreshing map[string]struct{}
	failures   map[string]failure
	refreshes  sync.WaitGroup // background refresh goroutines
}

// A failure is the last failed load of a key.
type failure struct {
	status int // 503, 504 or 500, as fwd-status reports it
	at     time.Time
}

var _ Loader = (*Cache)(nil) // a cache is a loader too: the server's

// New returns a cache that answers from its tiers and loads through load.
// shared is its Redis tier; with shared nil, or without Redis, the cache
// keeps entries in process only. A tier serves one cache, which
// subscribes to its invalidation channel. The cache does not close
// shared: its owner closes it after the cache.
func New(shared *redistier.Tier, load Loader, opts Options) *Cache {
	c := &Cache{
		load:        load,
		ttl:         opts.TTL,
		stale:       max(opts.Stale, 0),
		notFoundTTL: opts.NotFoundTTL,
		loadTimeout: cmp.Or(opts.LoadTimeout, DefaultLoadTimeout),
		searchLag:   cmp.Or(opts.SearchLag, 2*time.Second),
		log:         opts.Logger,
		now:         opts.Now,
		metrics:     newMetrics(opts.Metrics),
		refreshing:  map[string]struct{}{},
		failures:    map[string]failure{},
	}
	if shared != nil && shared.Enabled() {
		c.redis = shared
	}
	if c.ttl == nil {
		c.ttl = defaultTTL
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.now == nil {
		c.now = time.Now
	}
	c.keys = newKeyMemo()
	if opts.Tracer != nil {
		c.tracer = opts.Tracer.Tracer("github.com/prodapi/prodapi/cache")
	}
	c.local = newLocal(cmp.Or(opts.LocalBytes, DefaultLocalBytes), cmp.Or(opts.LocalTTL, DefaultLocalTTL), c.redis != nil, c.metrics)
	c.base, c.cancelBase = context.WithCancel(context.Background())
	if c.redis != nil {
		c.redis.Subscribe(listener{c})
	}
	return c
}

func defaultTTL(_ string, detail bool) time.Duration {
	if detail {
		return DefaultDetailTTL
	}
	return DefaultListTTL
}

// kind is how a request was answered.
type kind int

const (
	kindHit        kind = iota // a fresh entry
	kindStale                  // a stale entry, while a refresh runs
	kindStaleError             // a stale entry, because the load failed
	kindLoaded                 // a load, stored
	kindPass                   // a load that may not be stored
)

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

// Load answers q from the cache, loading it through the wrapped Loader
// when no usable entry exists. Representations it returns share their
// byte slices with the cache, and a hit's may be shared by other hits:
// read them, never modify them. A load or a
// background refresh may read q after Load returns: q must not change.
func (c *Cache) Load(ctx context.Context, q *sources.Query) (*sources.Representation, error) {
	if c.tracer == nil {
		rep, _, err := c.lookup(ctx, q)
		return rep, err
	}
	ctx, span := c.tracer.Start(ctx, "cache.lookup")
	defer span.End()
	rep, tier, err := c.lookup(ctx, q)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "")
		return rep, err
	}
	span.SetAttributes(attrTier.String(tier), attrOutcome.String(rep.Outcome))
	return rep, nil
}

// Span attributes of cache.lookup.
const (
	attrTier    = attribute.Key("prodapi.cache.tier") // local, redis, backend (loaded), none (bypass)
	attrOutcome = attribute.Key("prodapi.cache.outcome")
)

// lookup is Load, also reporting the tier that answered.
func (c *Cache) lookup(ctx context.Context, q *sources.Query) (*sources.Representation, string, error) {
	if q == nil || q.Resource == nil {
		return nil, "", errors.New("cache: a query without a resource")
	}
	res := q.Resource.Name
	fresh := c.ttl(res, q.IsDetail())
	if fresh <= 0 {
		rep, err := c.bypass(ctx, q)
		return rep, "none", err
	}
	key := c.keys.of(q)
	now := c.now()
	if r := c.local.get(key, now); r != nil {
		if now.Before(r.localUntil) {
			return c.localHit(res, r, now), "local", nil
		}
		if refreshing, status := c.staleState(key, now); refreshing && !r.e.isFresh(now) {
			// A refresh is under way here: serve the stale copy without
			// asking Redis again.
			return c.represent(res, r.e, nil, now, kindStale, status, false), "local", nil
		}
	}

	var pre *redisRead
	if c.redis != nil {
		pre = c.sharedRead(ctx, key)
		now = c.now()
		if e := pre.e; e != nil && e.isFresh(now) {
			c.keepLocalUnless(key, e, now, pre.seq)
			return c.represent(res, e, nil, now, kindHit, 0, false), "redis", nil
		}
	}

	leader := false // set inside the flight only when this request runs it
	ch := c.group.DoChan(key, func() (v any, err error) {
		leader = true
		defer func() {
			if p := recover(); p != nil {
				c.log.Error("cache: panic in a fill", "resource", res, "panic", p, "stack", string(debug.Stack()))
				v, err = nil, errPanic
			}
		}()
		// A variable of its own: assigning the captured ctx would move
		// it to the heap on every Load, hits included.
		fctx := ctx
		if c.tracer != nil {
			var span trace.Span
			fctx, span = c.tracer.Start(ctx, "cache.flight")
			defer span.End()
		}
		return c.fill(fctx, key, q, fresh, pre)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			c.metrics.requests.Inc(res, OutcomeError)
			return nil, "", r.Err
		}
		f := r.Val.(*fill)
		collapsed := f.fleet || (!leader && (f.kind == kindLoaded || f.kind == kindPass))
		if f.kind == kindPass {
			rep := *f.pass
			rep.CacheStatus, rep.Outcome = cacheStatus(kindPass, 0, f.status, collapsed), OutcomeMiss
			if collapsed {
				rep.Outcome = OutcomeCollapsed
			}
			c.metrics.requests.Inc(res, rep.Outcome)
			return &rep, f.tier, nil
		}
		return c.represent(res, f.e, f.raw, c.now(), f.kind, f.status, collapsed), f.tier, nil
	case <-ctx.Done():
		c.metrics.requests.Inc(res, OutcomeError)
		return nil, "", fmt.Errorf("cache: waiting for a load: %w", context.Cause(ctx))
	}
}

// fill runs inside the flight of key: it looks in the in-process tier
// again (an earlier flight may just have filled it), and in Redis unless
// the leading request just did (pre), then loads.
func (c *Cache) fill(ctx context.Context, key string, q *sources.Query, fresh time.Duration, pre *redisRead) (*fill, error) {
	ctx, cancel := c.detach(ctx)
	defer cancel()
	now := c.now()
	r := c.local.get(key, now)
	if r != nil && now.Before(r.localUntil) {
		return &fill{tier: "local", kind: kindHit, e: r.e}, nil
	}
	rr := pre
	if rr == nil {
		rr = c.readRedis(ctx, key)
	}
	e, asked, seq, obsolete := rr.e, rr.asked, rr.seq, rr.obsolete
	tier := "redis"
	if !asked && r != nil {
		// Redis cannot be asked: the in-process copy is all there is.
		e, tier = r.e, "local"
	}
	now = c.now()
	if e != nil {
		switch {
		case e.isFresh(now):
			c.keepLocalUnless(key, e, now, seq)
			return &fill{tier: tier, kind: kindHit, e: e}, nil
		case e.isUsable(now):
			c.keepLocalUnless(key, e, now, seq)
			// The failure a response reports is one from before it.
			_, status := c.staleState(key, now)
			c.refresh(ctx, key, q, fresh)
			return &fill{tier: tier, kind: kindStale, e: e, status: status}, nil
		}
	}
	// Redis had nothing usable. A copy kept here still answers if the
	// load fails.
	var fallback *entry
	fallbackTier := "local"
	if r != nil && r.e.isUsable(now) {
		fallback = r.e
	}
	if obsolete != nil && obsolete.isUsable(now) {
		fallback, fallbackTier = obsolete, "redis"
	}
	other, lease := c.fleet(ctx, key)
	if other != nil {
		c.local.put(key, other, c.now())
		return &fill{tier: "redis", kind: kindLoaded, e: other, status: other.status, fleet: true}, nil
	}
	defer c.releaseLease(key, lease)
	fence := c.beginFill(ctx, q)
	rep, err := c.callLoader(ctx, q)
	if err != nil {
		now = c.now()
		if fallback != nil && fallback.isUsable(now) && staleable(err) {
			status := fwdStatus(err)
			c.noteFailure(key, status, now)
			return &fill{tier: fallbackTier, kind: kindStaleError, e: fallback, status: status}, nil
		}
		return nil, err
	}
	return c.storeWith(ctx, key, fence, rep, fresh, lease != ""), nil
}

// store makes an entry of a loaded representation and puts it in both
// tiers, unless it may not be stored: NoStore (a degraded enrichment),
// or a status other than 200 and 404.
func (c *Cache) store(ctx context.Context, key string, f fence, rep *sources.Representation, fresh time.Duration) *fill {
	return c.storeWith(ctx, key, f, rep, fresh, false)
}

// storeWith is store; direct waits for the value's write to Redis before
// it returns (a lease holder's waiters poll for it).
func (c *Cache) storeWith(ctx context.Context, key string, f fence, rep *sources.Representation, fresh time.Duration, direct bool) *fill {
	stale := c.stale
	switch {
	case rep.NoStore || (rep.Status != 200 && rep.Status != 404):
		return &fill{tier: "backend", kind: kindPass, pass: rep, status: rep.Status}
	case rep.Status == 404:
		fresh, stale = c.notFoundTTL, 0
	}
	if fresh <= 0 {
		return &fill{tier: "backend", kind: kindPass, pass: rep, status: rep.Status}
	}
	now := c.now()
	e := c.newEntry(rep, now, fresh, stale)
	if !c.tag(ctx, f, rep, e) {
		return &fill{tier: "backend", kind: kindPass, pass: rep, status: rep.Status}
	}
	if !c.keepLocalUnless(key, e, now, f.seq) {
		c.metrics.fencedFills.Inc()
		return &fill{tier: "backend", kind: kindPass, pass: rep, status: rep.Status}
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
	c.clearFailure(key)
	return &fill{tier: "backend", kind: kindLoaded, e: e, raw: rep.Body, status: rep.Status}
}

// keepLocalUnless puts e in the in-process tier, unless an invalidation
// of one of its tags arrived since seq; it reports whether the entry is
// current.
func (c *Cache) keepLocalUnless(key string, e *entry, now time.Time, seq uint64) bool {
	return !c.local.putUnless(key, e, now, func() bool {
		return c.inval.since(seq, e.tags)
	})
}

// refresh starts the background refresh of a stale key, unless one is
// running, one failed less than refreshBackoff ago, or the cache is
// closed.
func (c *Cache) refresh(ctx context.Context, key string, q *sources.Query, fresh time.Duration) {
	now := c.now()
	c.mu.Lock()
	_, busy := c.refreshing[key]
	f, failed := c.failures[key]
	if c.closed || busy || (failed && now.Sub(f.at) < refreshBackoff) {
		c.mu.Unlock()
		return
	}
	c.refreshing[key] = struct{}{}
	c.refreshes.Add(1)
	c.mu.Unlock()

	// Ends when the load returns: within LoadTimeout, sooner when Close
	// cancels the base context.
	go func() {
		defer c.refreshes.Done()
		defer func() {
			c.mu.Lock()
			delete(c.refreshing, key)
			c.mu.Unlock()
		}()
		defer func() {
			if p := recover(); p != nil {
				c.log.Error("cache: panic in a refresh", "panic", p, "stack", string(debug.Stack()))
			}
		}()
		ctx, cancel := c.background(ctx)
		defer cancel()
		fence := c.beginFill(ctx, q)
		rep, err := c.callLoader(ctx, q)
		if err != nil {
			c.noteFailure(key, fwdStatus(err), c.now())
			c.metrics.refreshes.Inc("error")
			// Nobody else sees this error; the stale entry stays.
			c.log.Warn("cache: background refresh failed", "resource", q.Resource.Name, "error", err)
			return
		}
		c.store(ctx, key, fence, rep, fresh)
		c.metrics.refreshes.Inc("ok")
	}()
}

// staleState reports whether a refresh of key is running, and the
// fwd-status of its last failed load if that was recent (0 if none).
func (c *Cache) staleState(key string, now time.Time) (refreshing bool, status int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, refreshing = c.refreshing[key]
	if f, ok := c.failures[key]; ok && now.Sub(f.at) < failureMemo {
		status = f.status
	}
	return refreshing, status
}

func (c *Cache) noteFailure(key string, status int, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.failures[key]; !ok && len(c.failures) >= maxFailures {
		for k, f := range c.failures {
			if now.Sub(f.at) >= failureMemo {
				delete(c.failures, k)
			}
		}
		if len(c.failures) >= maxFailures {
			return
		}
	}
	c.failures[key] = failure{status: status, at: now}
}

func (c *Cache) clearFailure(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.failures) > 0 {
		delete(c.failures, key)
	}
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

// background returns the context of a background refresh: detached like
// a load's, and cancelled by Close too.
func (c *Cache) background(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := c.detach(ctx)
	stop := context.AfterFunc(c.base, cancel)
	return ctx, func() {
		stop()
		cancel()
	}
}

// bypass loads without the cache, for a resource whose TTL is zero.
func (c *Cache) bypass(ctx context.Context, q *sources.Query) (*sources.Representation, error) {
	rep, err := c.callLoader(ctx, q)
	if err != nil {
		c.metrics.requests.Inc(q.Resource.Name, OutcomeError)
		return nil, err
	}
	out := *rep
	out.CacheStatus, out.Outcome = "prodapi; fwd=bypass", OutcomeBypass
	c.metrics.requests.Inc(q.Resource.Name, OutcomeBypass)
	return &out, nil
}

// staleable reports whether a load failure may be answered with a stale
// entry: any failure but a refusal of the query itself.
func staleable(err error) bool {
	return !errors.Is(err, sources.ErrInvalid) && !errors.Is(err, sources.ErrNotFound)
}

// fwdStatus is the status a failed load stands for, as Cache-Status
// fwd-status reports it.
func fwdStatus(err error) int {
	switch {
	case errors.Is(err, sources.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return 504
	case errors.Is(err, sources.ErrUnavailable), errors.Is(err, sources.ErrPartial), errors.Is(err, context.Canceled):
		return 503
	default:
		return 500
	}
}

// represent builds the Representation of e for one request, and counts
// the request.
func (c *Cache) represent(res string, e *entry, raw []byte, now time.Time, k kind, status int, collapsed bool) *sources.Representation {
	rep := &sources.Representation{
		Status:       e.status,
		ETag:         e.etag,
		Total:        e.total,
		LastModified: e.lastModified,
		StoredAt:     e.storedAt,
		CacheStatus:  cacheStatus(k, e.ttl(now), status, collapsed),
	}
	if e.gzip {
		rep.Gzip, rep.Body = e.body, raw
	} else {
		rep.Body = e.body
	}
	switch {
	case k == kindHit:
		rep.Outcome = OutcomeHit
	case k == kindStale || k == kindStaleError:
		rep.Outcome = OutcomeStale
	case collapsed:
		rep.Outcome = OutcomeCollapsed
	default:
		rep.Outcome = OutcomeMiss
	}
	c.metrics.requests.Inc(res, rep.Outcome)
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
//	prodapi; fwd=bypass                                caching is off for the resource
//
// The key is never part of it.
func cacheStatus(k kind, ttl int64, status int, collapsed bool) string {
	var buf [80]byte
	b := append(buf[:0], "prodapi; "...)
	switch k {
	case kindHit:
		b = append(b, "hit"...)
	case kindStale, kindStaleError:
		if status == 0 {
			b = append(b, "hit"...)
		} else {
			b = append(b, "fwd=stale; fwd-status="...)
			b = strconv.AppendInt(b, int64(status), 10)
		}
	case kindLoaded, kindPass:
		b = append(b, "fwd=miss; fwd-status="...)
		b = strconv.AppendInt(b, int64(status), 10)
		if collapsed {
			b = append(b, "; collapsed"...)
		}
		if k == kindPass {
			return string(b)
		}
		b = append(b, "; stored"...)
	}
	b = append(b, "; ttl="...)
	b = strconv.AppendInt(b, ttl, 10)
	return string(b)
}

// Close cancels background refreshes and waits for them until ctx ends.
// Loads on the request path are not cancelled: they end with their
// requests (or LoadTimeout), and Loads after Close still work, without
// refreshes. Close leaves the Redis tier open: its queued writes drain
// when it is closed, after the cache.
func (c *Cache) Close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancelBase()
	if err := waitFor(ctx, &c.refreshes); err != nil {
		return fmt.Errorf("cache: close: waiting for refreshes: %w", err)
	}
	return nil
}

// waitFor waits for wg until ctx ends.
func waitFor(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	// Ends when wg does: the work it waits for is bounded (loads by
	// LoadTimeout and the base context).
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
