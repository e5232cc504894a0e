package fairshare

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/server/metrics"
)

// A Rate is a limit: Events per Per, and as many at once. The zero Rate
// limits nothing.
type Rate struct {
	Events int
	Per    time.Duration
}

// IsZero reports whether r limits nothing.
func (r Rate) IsZero() bool { return r.Events <= 0 || r.Per <= 0 }

// A Fleet keeps the counts the replicas share (cmd/prodapi's: the
// cache's Redis tier).
type Fleet interface {
	// Charge takes n from the bucket of key, limited to r: with atMost
	// as much of n as the bucket holds (requests already served), else
	// all of n or nothing (a load about to start). ok is false when the
	// fleet could not be asked.
	Charge(ctx context.Context, key string, r Rate, n int, atMost bool) (c Charged, ok bool)
}

// A Charged is what a charge did to the fleet's bucket.
type Charged struct {
	Allowed   int // what was taken
	Remaining int // what the bucket holds after the charge
	// RetryAfter is, when nothing was taken, how long until the charge
	// would be.
	RetryAfter time.Duration
}

// Options configure a Limiter. The zero value limits nothing.
type Options struct {
	// Client is the limit of each client without one of its own
	// (PRODAPI_RATE_LIMIT); zero: those clients are not limited.
	Client Rate
	// Clients are the limits of their own, by client
	// (PRODAPI_RATE_LIMIT_CLIENTS); a zero Rate: that client is not
	// limited. Their names are the values of
	// prodapi_rate_limited_total's client label, beside "other".
	Clients map[string]Rate
	// Address is the limit per client address of the requests
	// authentication refuses (PRODAPI_RATE_LIMIT_ADDR); zero: none.
	Address Rate
	// MissCost is what a request that starts a backend load costs on top
	// of its 1 (PRODAPI_RATE_MISS_COST). Every client limit must hold a
	// load: at least 1 + MissCost events.
	MissCost int
	// MaxLoads caps the backend loads each client has in flight on this
	// replica (PRODAPI_CLIENT_MAX_LOADS); 0: no cap.
	MaxLoads int
	// Fleet shares the counts between replicas; nil: this replica
	// counts alone.
	Fleet Fleet
	// Flush is how often the requests served here are charged to the
	// fleet; 0 means 100ms. Negative: never on its own (tests flush).
	Flush time.Duration
	// Hold is the longest Hold keeps a refused request; 0 means a
	// second. Negative: refusals go out at once.
	Hold time.Duration

	Metrics *metrics.Metrics // nil: none
	Logger  *slog.Logger     // nil: discard
	Now     func() time.Time // nil: time.Now
}

// Defaults of Options: how often what a replica served is charged to
// the fleet, and how long a refused request is held at most.
const (
	DefaultFlush = 100 * time.Millisecond
	DefaultHold  = time.Second
)

// A Limiter is the fair-share limiter; see the package documentation. A
// nil *Limiter limits nothing. It is safe for concurrent use; Close
// stops its flushes.
type Limiter struct {
	client   *policy            // clients without a limit of their own; nil: not limited
	clients  map[string]*policy // those with one; a nil value: not limited
	address  *policy            // the limit per address; nil: none
	missCost int
	maxLoads int64
	fleet    Fleet
	hold     time.Duration // the longest a refusal is held; 0: none
	now      func() time.Time
	log      *slog.Logger

	mu     sync.RWMutex
	shares map[key]*Share
	addrs  int // shares keyed by an address, at most maxAddresses
	// addresses counts the shares of the address limit, so that a
	// request need not look while there is none.
	addresses atomic.Int64

	// alone is set while the fleet cannot be asked: the last charge
	// failed.
	alone       atomic.Bool
	capRefusals metrics.CounterSeries

	stop context.CancelFunc
	done chan struct{}
}

// Memory bounds: shares idle this long with a full bucket are forgotten;
// at most maxAddresses addresses are held; at most maxHolds refusals of
// one share are held at once.
const (
	idleAfter    = time.Minute
	maxAddresses = 1 << 16
	maxHolds     = 64
)

// The causes of refusals, for the access log.
var (
	errClientLimit  = errors.New("fairshare: the client's rate limit is spent")
	errLoadLimit    = errors.New("fairshare: the client's rate limit cannot pay for a backend load")
	errAddressLimit = errors.New("fairshare: the address has spent its limit of refused requests")
	errLoadCap      = errors.New("fairshare: the client has as many backend loads in flight as it may")
)

// New returns the limiter of opts, and starts its flushes. It refuses a
// client limit that cannot pay for a single backend load.
func New(opts Options) (*Limiter, error) {
	l := &Limiter{
		clients:  map[string]*policy{},
		missCost: max(opts.MissCost, 0),
		maxLoads: int64(max(opts.MaxLoads, 0)),
		fleet:    opts.Fleet,
		hold:     max(cmp.Or(opts.Hold, DefaultHold), 0),
		now:      opts.Now,
		log:      opts.Logger,
		shares:   map[key]*Share{},
		done:     make(chan struct{}),
	}
	if l.now == nil {
		l.now = time.Now
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	var limited, caps *metrics.Counter // nil without Metrics: they count nothing
	if opts.Metrics != nil {
		limited = opts.Metrics.Counter("prodapi_rate_limited_total",
			"Requests answered 429 at a rate limit, by client: the clients with a limit of their own (PRODAPI_RATE_LIMIT_CLIENTS) by name, every other client, and addresses refused before authentication, as other.",
			"client")
		caps = opts.Metrics.CapRefusals()
	}
	l.capRefusals = caps.Series(metrics.CapClientLoads)
	series := func(label string) metrics.CounterSeries {
		limited.Declare(label)
		return limited.Series(label)
	}
	other := series("other")
	var errs []error
	check := func(what string, r Rate) {
		if !r.IsZero() && r.Events < 1+l.missCost {
			errs = append(errs, fmt.Errorf("fairshare: %s of %d events cannot pay for one backend load (1 + a miss cost of %d)", what, r.Events, l.missCost))
		}
	}
	if !opts.Client.IsZero() {
		check("the client limit", opts.Client)
		l.client = newPolicy(policyClient, opts.Client, other, msgClient)
	}
	for name, r := range opts.Clients {
		l.clients[name] = nil
		if !r.IsZero() {
			check(fmt.Sprintf("the limit of client %q", name), r)
			l.clients[name] = newPolicy(policyClient, r, series(name), msgClient)
		}
	}
	if !opts.Address.IsZero() {
		l.address = newPolicy(policyAddress, opts.Address, other, msgAddress)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	flush := opts.Flush
	if flush == 0 {
		flush = DefaultFlush
	}
	ctx, cancel := context.WithCancel(context.Background())
	l.stop = cancel
	if flush < 0 {
		close(l.done)
		return l, nil
	}
	// Ends when Close cancels ctx.
	go l.run(ctx, flush)
	return l, nil
}

// run flushes every interval until ctx ends.
func (l *Limiter) run(ctx context.Context, every time.Duration) {
	defer close(l.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.flush(ctx)
		}
	}
}

// Close stops the flushes and waits for the one under way, until ctx
// ends. What was served since the last flush is not charged.
func (l *Limiter) Close(ctx context.Context) error {
	if l == nil {
		return nil
	}
	l.stop()
	select {
	case <-l.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("fairshare: close: %w", ctx.Err())
	}
}

// Alone reports whether the replica counts alone because the fleet could
// not be asked at the last charge: each client's limit then holds per
// replica. Without a Fleet it is false: there is no fleet to miss.
func (l *Limiter) Alone() bool { return l != nil && l.fleet != nil && l.alone.Load() }

// policyOf is the policy of the client named name; nil: not limited.
func (l *Limiter) policyOf(name string) *policy {
	if p, ok := l.clients[name]; ok {
		return p
	}
	return l.client
}

// Watching reports whether CheckAddress may refuse anything: whether an
// address has had a request refused lately. Until one has, the caller
// need not work out the request's address.
func (l *Limiter) Watching() bool { return l != nil && l.address != nil && l.addresses.Load() != 0 }

// CheckAddress refuses a request from addr, before authentication, while
// its address has spent its limit of requests authentication refused:
// 429, with the headers. An address that never had one refused, or an
// invalid one, is never refused.
func (l *Limiter) CheckAddress(addr netip.Addr, now time.Time) error {
	if l == nil || l.address == nil || !addr.IsValid() || l.addresses.Load() == 0 {
		return nil
	}
	s := l.lookup(addressKey(addr))
	if s == nil {
		return nil
	}
	if tokens := s.local.Load().TokensAt(now); tokens < 1 {
		return l.refuse(s, tokens, 1, errAddressLimit)
	}
	return nil
}

// Unauthenticated charges a request authentication refused to addr, and
// says what its address has left in h.
func (l *Limiter) Unauthenticated(h http.Header, addr netip.Addr, now time.Time) {
	if l == nil || l.address == nil || !addr.IsValid() {
		return
	}
	if s := l.share(addressKey(addr), l.address, now); s != nil {
		l.force(s, now, 1)
		s.policy.header(h, s.local.Load().TokensAt(now))
	}
}

// Client is the share of the client named client, made on its first
// request; nil when nothing limits it. A caller may keep it for the
// client's next requests while it is not Forgotten.
func (l *Limiter) Client(client string, now time.Time) *Share {
	if l == nil {
		return nil
	}
	p := l.policyOf(client)
	if p == nil && l.maxLoads == 0 {
		return nil
	}
	return l.share(clientKey(client), p, now)
}

// Admit charges a request to s (a client's share: Client), or refuses it:
// 429 once its limit is spent. It says what the client has left in h. A
// nil s is admitted.
func (l *Limiter) Admit(h http.Header, s *Share, now time.Time) error {
	if l == nil || s == nil {
		return nil
	}
	s.touch(now)
	p := s.policy
	if p == nil {
		return nil
	}
	lim := s.local.Load()
	if !lim.AllowN(now, 1) {
		return l.refuse(s, lim.TokensAt(now), 1, errClientLimit)
	}
	l.served(s, 1)
	p.header(h, lim.TokensAt(now))
	return nil
}

// AdmitAddress is Client and Admit for a request without authentication
// (it is off): its address is the client, under the limit of clients
// without one of their own.
func (l *Limiter) AdmitAddress(h http.Header, addr netip.Addr, now time.Time) (*Share, error) {
	if l == nil || !addr.IsValid() || (l.client == nil && l.maxLoads == 0) {
		return nil, nil
	}
	s := l.share(anonymousKey(addr), l.client, now)
	return s, l.Admit(h, s, now)
}

// Charge charges a request to s without a check (a 403: the request was
// refused, and still costs), and says what the client has left in h.
func (l *Limiter) Charge(h http.Header, s *Share, now time.Time) {
	if l == nil || s == nil || s.policy == nil {
		return
	}
	s.touch(now)
	l.force(s, now, 1)
	s.policy.header(h, s.local.Load().TokensAt(now))
}

// refuse counts a refusal of s at its limit and returns the 429, noting
// whether the client came back before the Retry-After of its last
// refusal had passed.
func (l *Limiter) refuse(s *Share, tokens float64, need int, cause error) error {
	s.policy.limited.Inc()
	wait := s.policy.wait(tokens, need)
	now := l.now().UnixNano()
	early := now < s.retryAt.Load()
	s.retryAt.Store(now + retryAfter(wait)*int64(time.Second))
	return &refusal{err: s.policy.refusal(tokens, wait, cause), share: s, early: early}
}

// A refusal is a request refused at a rate limit: the 429 it is answered
// with (an *httperr.Error, which it wraps), and what Hold needs.
type refusal struct {
	err   *httperr.Error
	share *Share
	early bool // sent before the last refusal's Retry-After had passed
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// Hold holds a request refused at a rate limit (CheckAddress, Admit,
// AdmitLoad) whose client did not wait as its last refusal's
// Retry-After said: for Options.Hold (a second) before its 429 goes out,
// or until ctx ends. A client that waits as Retry-After says is never
// held; one that asks again at once, in a loop, gets an answer per
// connection and second, and no more of the replica's CPU than that,
// while the requests its rate still pays for go on being served. At most
// maxHolds requests of one share are held at once on a replica (the rest
// are answered at once), so that a client cannot hold connections
// without bound. It reports whether it held the request.
func (l *Limiter) Hold(ctx context.Context, err error) bool {
	r, ok := errors.AsType[*refusal](err)
	if l == nil || !ok || !r.early || l.hold <= 0 {
		return false
	}
	s := r.share
	if s.holding.Add(1) > maxHolds {
		s.holding.Add(-1)
		return false
	}
	defer s.holding.Add(-1)
	t := time.NewTimer(l.hold)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return true
}

// shareKey is the context key of a request's share.
type shareKey struct{}

// WithShare returns ctx carrying s, the share of the request's client,
// for AdmitLoad. A nil s leaves ctx as it is.
func WithShare(ctx context.Context, s *Share) context.Context {
	if s == nil {
		return ctx
	}
	return context.WithValue(ctx, shareKey{}, s)
}

func shareFrom(ctx context.Context) *Share {
	s, _ := ctx.Value(shareKey{}).(*Share)
	return s
}

// AdmitLoad admits the backend load a request is about to start, for the
// share the request's context carries (WithShare): see Share.AdmitLoad.
// A context without a share (a background refresh, an unlimited client)
// is admitted as it is. It is the cache's Gate.
func (l *Limiter) AdmitLoad(ctx context.Context) (done func(), err error) {
	s := shareFrom(ctx)
	if l == nil || s == nil {
		return func() {}, nil
	}
	return s.AdmitLoad(ctx)
}

// AdmitLoad admits the backend load a request of s's client is about to
// start: the cache asks, in the flight of the request that would start
// it, before the load (the server hands it s as the gate of the
// request's loads). It takes a slot of the client's loads in flight,
// which done gives back when the load ends, and charges the load's cost:
// to the fleet, before the load starts, all of it or nothing. A refusal
// is the 429 the request is answered with.
func (s *Share) AdmitLoad(ctx context.Context) (done func(), err error) {
	l := s.limiter
	if s.loads != nil && !s.loads.TryAcquire(1) {
		l.capRefusals.Inc()
		return nil, loadCapRefusal(s, l.now())
	}
	s.loading.Add(1)
	done = s.release
	if s.policy == nil || l.missCost == 0 {
		return done, nil
	}
	if err := l.chargeLoad(ctx, s); err != nil {
		done()
		return nil, err
	}
	return done, nil
}

// chargeLoad charges a load's cost to s: refused at once when this
// replica's view cannot pay for it; else charged to the fleet, which
// refuses it or tells the view what is left; without the fleet, to the
// view alone.
func (l *Limiter) chargeLoad(ctx context.Context, s *Share) error {
	cost := l.missCost
	now := l.now()
	lim := s.local.Load()
	if tokens := lim.TokensAt(now); tokens < float64(cost) {
		return l.refuse(s, tokens, cost, errLoadLimit)
	}
	if l.fleet != nil {
		c, ok := l.fleet.Charge(ctx, s.fleetKey, s.policy.rate, cost, false)
		l.alone.Store(!ok)
		if ok {
			now = l.now()
			if c.Allowed == 0 {
				// The fleet holds less than the cost: as much less as
				// it takes to earn in RetryAfter.
				held := float64(cost) - c.RetryAfter.Seconds()*float64(s.policy.perSec)
				s.seed(now, int64(held)-s.pending.Load())
				return l.refuse(s, held, cost, errLoadLimit)
			}
			s.seed(now, int64(c.Remaining)-s.pending.Load())
			return nil
		}
	}
	if !lim.AllowN(now, cost) {
		return l.refuse(s, lim.TokensAt(now), cost, errLoadLimit)
	}
	return nil
}
