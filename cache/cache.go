package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/singleflight"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
)

// A Loader produces the representation of a query: what the cache calls
// on a miss (in prodapi, the renderer). Errors wrapping
// sources.ErrInvalid or sources.ErrNotFound refuse the query; any other
// error lets the cache serve a stale entry instead. A Loader must not
// keep or modify the representations it returns: the cache shares them.
type Loader interface {
	Load(ctx context.Context, q *sources.Query) (*sources.Representation, error)
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

	// Gate, when set, admits each load a request starts (cmd/prodapi's:
	// the fair-share limiter, which charges it to the request's client);
	// nil admits every load.
	Gate Gate

	Metrics *metrics.Metrics // nil: none
	Logger  *slog.Logger     // nil: discard
	Now     func() time.Time // nil: time.Now
	// Tracer, when set, gets a span per lookup (cache.lookup, with the
	// tier that answered) and per load (cache.flight). Nil: no spans,
	// at no cost.
	Tracer trace.TracerProvider
}

// A Gate admits the backend loads requests start. The cache asks it in
// the flight of the request about to load, with that request's context
// (the values the server put in it), after the tiers and the fleet had
// nothing: never for the requests that wait for another's load, for a
// hit or a stale answer, or for a background refresh. It is a type alias
// of its method set, so that a consumer (the server) may declare the
// same interface, and LoadGated, without importing the cache. AdmitLoad
// admits the load, or refuses it with the error the request is answered
// with (the requests that waited for it then start a flight of their
// own); done is called once the load ended.
type Gate = interface {
	AdmitLoad(ctx context.Context) (done func(), err error)
}

// gateKey carries, in a loading request's context, the gate LoadGated was
// given.
type gateKey struct{}

// withGate is ctx carrying gate for admit; ctx as it is without one.
func withGate(ctx context.Context, gate Gate) context.Context {
	if gate == nil {
		return ctx
	}
	return context.WithValue(ctx, gateKey{}, gate)
}

// Defaults of Options.
const (
	DefaultListTTL     = 10 * time.Second
	DefaultDetailTTL   = 60 * time.Second
	DefaultLocalBytes  = 64 << 20
	DefaultLocalTTL    = 2 * time.Second
	DefaultLoadTimeout = 10 * time.Second
)

// A Cache is a read-through cache in front of a Loader, in groupcache's
// shape: a lookup asks the in-process tier, then the Redis tier when
// there is one, then joins the key's flight, whose one load calls the
// Loader. See the package documentation for the policy. A Cache is safe
// for concurrent use; Close stops its background work.
type Cache struct {
	local   *local             // the in-process tier
	redis   *redistier.Tier    // the Redis tier; nil: in-process only
	reads   singleflight.Group // Redis reads, in the requests' own goroutines
	flights singleflight.Group // loads
	load    Loader
	gate    Gate // nil: every load admitted

	ttl         func(resource string, detail bool) time.Duration
	stale       time.Duration
	notFoundTTL time.Duration
	loadTimeout time.Duration
	searchLag   time.Duration

	gzip  gzipPool
	inval invalLog  // recent invalidations, for the fills under way
	known knownGens // generations read from Redis, kept while subscribed
	bg    background

	log     *slog.Logger
	now     func() time.Time
	metrics *series
	tracer  trace.Tracer // nil: no spans
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
		gate:        opts.Gate,
		ttl:         opts.TTL,
		stale:       max(opts.Stale, 0),
		notFoundTTL: opts.NotFoundTTL,
		loadTimeout: cmp.Or(opts.LoadTimeout, DefaultLoadTimeout),
		searchLag:   cmp.Or(opts.SearchLag, 2*time.Second),
		log:         opts.Logger,
		now:         opts.Now,
		metrics:     newMetrics(opts.Metrics),
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
	if opts.Tracer != nil {
		c.tracer = opts.Tracer.Tracer("github.com/prodapi/prodapi/cache")
	}
	c.local = newLocal(cmp.Or(opts.LocalBytes, DefaultLocalBytes), cmp.Or(opts.LocalTTL, DefaultLocalTTL), c.redis != nil, c.metrics)
	c.bg.start()
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

// Load answers q from the cache, loading it through the wrapped Loader
// when no usable entry exists. Representations it returns share their
// byte slices with the cache, and a hit's may be shared by other hits:
// read them, never modify them. A load or a
// background refresh may read q after Load returns: q must not change.
func (c *Cache) Load(ctx context.Context, q *sources.Query) (*sources.Representation, error) {
	return c.LoadGated(ctx, q, nil)
}

// LoadGated is Load for a request whose loads gate admits, rather than
// Options.Gate (the server's: the share of the request's client, who
// pays for the load the request may start). The gate is asked only if
// the request loads; a hit never pays for carrying it.
func (c *Cache) LoadGated(ctx context.Context, q *sources.Query, gate Gate) (*sources.Representation, error) {
	if c.tracer == nil {
		rep, _, err := c.lookup(ctx, q, gate)
		return rep, err
	}
	ctx, span := c.tracer.Start(ctx, "cache.lookup")
	defer span.End()
	rep, tier, err := c.lookup(ctx, q, gate)
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

// lookup is LoadGated, also reporting the tier that answered: the
// in-process tier, then the Redis tier, then the key's flight, which
// loads.
func (c *Cache) lookup(ctx context.Context, q *sources.Query, gate Gate) (*sources.Representation, string, error) {
	if q == nil || q.Resource == nil {
		return nil, "", errors.New("cache: a query without a resource")
	}
	res := q.Resource.Name
	fresh := c.ttl(res, q.IsDetail())
	if fresh <= 0 {
		rep, err := c.bypass(withGate(ctx, gate), q)
		return rep, "none", err
	}
	// The in-process tier, asked with the key in a buffer on the stack:
	// a hit makes no string of it.
	var buf [256]byte
	kb := appendKey(buf[:0], q)
	now := c.now()
	r := c.local.getBytes(kb, now)
	if r != nil && now.Before(r.localUntil) && serves(q, r.e) {
		return c.localHit(res, r, now), tierLocal, nil
	}
	key := string(kb)
	if r != nil && q.Fresh == nil {
		if refreshing, status := c.bg.staleState(key, now); refreshing && !r.e.isFresh(now) {
			// A refresh is under way here: serve the stale copy without
			// asking Redis again.
			return c.represent(res, r.e, nil, now, answer{kind: kindStale, tier: tierLocal, status: status}), tierLocal, nil
		}
	}
	// The Redis tier, read in the request's own goroutine. From here on
	// the request's Redis calls share one budget: a Redis that died or
	// hangs costs it one Redis timeout, however many calls its miss
	// makes.
	var pre *redisRead
	if c.redis != nil {
		ctx = c.redis.WithBudget(ctx)
		pre = c.sharedRead(ctx, key)
		now = c.now()
		if e := pre.e; e != nil && e.isFresh(now) && serves(q, e) {
			c.keepLocalUnless(key, e, now, pre.seq)
			return c.represent(res, e, nil, now, answer{kind: kindHit, tier: tierRedis}), tierRedis, nil
		}
	}
	// The key's flight, whose one request loads.
	return c.flight(withGate(ctx, gate), q, key, fresh, pre)
}

// serves reports whether e may answer q: any entry that is current
// answers a query without Freshness; one that names a position of the
// change log takes none stored before its StoredAfter. (Current: this
// replica has applied the invalidations up to the position, so what is
// still in its tier, or current in Redis, is at least as new.)
func serves(q *sources.Query, e *entry) bool {
	return q.Fresh == nil || !e.storedAt.Before(q.Fresh.StoredAfter)
}

// Close cancels background refreshes and waits for them until ctx ends.
// Loads on the request path are not cancelled: they end with their
// requests (or LoadTimeout), and Loads after Close still work, without
// refreshes. Close leaves the Redis tier open: its queued writes drain
// when it is closed, after the cache.
func (c *Cache) Close(ctx context.Context) error {
	if err := c.bg.close(ctx); err != nil {
		return fmt.Errorf("cache: close: waiting for refreshes: %w", err)
	}
	return nil
}
