package redistier

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/prodapi/prodapi/server/metrics"
)

// Prefix is the first segment of every key the tier and its callers
// write. It changes whenever the key scheme or a stored format changes
// incompatibly: old keys are then never read again and expire on their
// own.
const Prefix = "prodapi:v1:"

// Options tune a Tier. The zero value is usable.
type Options struct {
	// Timeout is a request's Redis budget: what all the calls made for
	// one request (WithBudget) wait on Redis together, and what any one
	// call waits at most; 0 means 50ms. Control calls (generations set,
	// feed leases, tokens, publishing) wait at least a second.
	Timeout time.Duration
	// GenTTL is how long a tag's generation lives after it was last
	// set; 0 means 24h.
	GenTTL time.Duration

	Metrics *metrics.Metrics // nil: none
	Logger  *slog.Logger     // nil: discard
	Now     func() time.Time // the breaker's clock; nil: time.Now
	// Tracer, when set, gets a span per Redis call made for a traced
	// request. Nil: no spans, at no cost.
	Tracer trace.TracerProvider
}

// Defaults of Options.
const (
	DefaultTimeout = 50 * time.Millisecond
	DefaultGenTTL  = 24 * time.Hour
)

// A Tier is this replica's part of what the fleet shares in Redis. See the
// package documentation. A Tier is safe for concurrent use; Close stops
// its background work.
type Tier struct {
	rdb     redis.UniversalClient // nil: no Redis, a fleet of one
	pipe    *redis.AutoPipeliner  // reads through rdb's auto-pipeliner; nil: plain GETs
	timeout time.Duration
	genTTL  time.Duration
	id      string // this replica, in what it publishes and the leases it takes
	log     *slog.Logger
	tracer  trace.Tracer // nil: no spans
	metrics *series
	breaker breaker
	calls   sync.WaitGroup // reads not yet judged by the breaker, lease releases not yet made (Settle)
	writes  writeQueue
	sub     subscriber
	alone   alone // leases and tokens without Redis

	// base is cancelled by Close: the subscription runs on it.
	base      context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
}

// New returns the tier on rdb. With rdb nil the replica is alone: reads
// find nothing, writes and messages go nowhere, it holds every lease, and
// tokens live in memory. The tier does not close rdb. A client built
// elsewhere than NewClient should set ContextTimeoutEnabled, or calls
// cannot be bounded.
func New(rdb redis.UniversalClient, opts Options) *Tier {
	t := &Tier{
		rdb:     rdb,
		timeout: cmp.Or(opts.Timeout, DefaultTimeout),
		genTTL:  cmp.Or(opts.GenTTL, DefaultGenTTL),
		id:      randomID(),
		log:     opts.Logger,
		metrics: newMetrics(opts.Metrics),
	}
	if t.log == nil {
		t.log = slog.New(slog.DiscardHandler)
	}
	now := opts.Now
	if now == nil {
		now = time.Now
	}
	if opts.Tracer != nil {
		// The cache's scope: the tier is the part of the cache that
		// talks to Redis.
		t.tracer = opts.Tracer.Tracer("github.com/prodapi/prodapi/cache")
	}
	t.breaker = breaker{now: now, gauge: t.metrics.breakerState}
	t.breaker.set(closed)
	t.base, t.cancel = context.WithCancel(context.Background())
	if rdb == nil {
		return t
	}
	if p, ok := rdb.(interface {
		AsyncAutoPipeline() (*redis.AutoPipeliner, error)
	}); ok {
		// Concurrent hits share round trips; the pipeliner belongs to the
		// client, which closes it. Its deferred face lets a request wait
		// for its reply in its own goroutine, bounded by its deadline.
		t.pipe, _ = p.AsyncAutoPipeline() // on error, plain GETs
	}
	t.writes.start(t)
	return t
}

// Enabled reports whether the tier has a Redis: false for a replica
// alone.
func (t *Tier) Enabled() bool { return t.rdb != nil }

// GenTTL is how long a generation lives after it was last set: a value
// that records generations must not live longer, or a generation that
// expired and reads as 0 again could match it.
func (t *Tier) GenTTL() time.Duration { return t.genTTL }

// Close stops the subscription, then waits for the queued writes to reach
// Redis until ctx ends, and drops what is left then. Writes after Close
// are dropped and counted; reads, generations, leases and tokens still
// work. Close does not close the Redis client.
func (t *Tier) Close(ctx context.Context) error {
	t.closeOnce.Do(func() {
		t.cancel()
		t.sub.stop()
	})
	if err := t.writes.close(ctx); err != nil {
		return fmt.Errorf("redistier: close: draining writes: %w", err)
	}
	return nil
}

// Settle waits until every write queued so far is made or dropped, every
// read the breaker has still to judge is judged, and every lease release
// is made: for tests and benchmarks, which look at Redis or the breaker
// next.
func (t *Tier) Settle() {
	t.writes.pending.Wait()
	t.calls.Wait()
}

// controlCtx bounds a control call (generations set, leases, tokens,
// publishing): at least a second, since unlike a read it has no fallback
// worth failing over to sooner.
func (t *Tier) controlCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, max(t.timeout, time.Second))
}

// randomID is 16 random hex digits: a replica's id, a lease's token.
func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}
