package fairshare

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/go-redis/redis_rate/v10"
	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/test/realserver"
	"github.com/prodapi/prodapi/test/testkit"
)

var start = time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)

// A redisFleet is the fleet's count on miniredis, through redis_rate as
// the cache's Redis tier charges it; down makes it unreachable.
type redisFleet struct {
	m     *miniredis.Miniredis
	rate  *redis_rate.Limiter
	down  atomic.Bool
	calls atomic.Int64
}

func newRedisFleet(t *testing.T) *redisFleet {
	m := miniredis.RunT(t)
	rdb := realserver.RedisClient(m.Addr())
	t.Cleanup(func() { rdb.Close() })
	return &redisFleet{m: m, rate: redis_rate.NewLimiter(rdb)}
}

func (f *redisFleet) Charge(ctx context.Context, key string, r Rate, n int, atMost bool) (Charged, bool) {
	f.calls.Add(1)
	if f.down.Load() {
		return Charged{}, false
	}
	limit := redis_rate.Limit{Rate: r.Events, Burst: r.Events, Period: r.Per}
	charge := f.rate.AllowN
	if atMost {
		charge = f.rate.AllowAtMost
	}
	res, err := charge(ctx, key, limit, n)
	if err != nil {
		return Charged{}, false
	}
	c := Charged{Allowed: res.Allowed, Remaining: res.Remaining}
	if res.Allowed == 0 {
		c.RetryAfter = max(res.RetryAfter, 0)
	}
	return c, true
}

// A replica is a limiter on a clock the test moves, flushed by the test.
type replica struct {
	*Limiter
	clock   *testkit.Clock
	metrics *metrics.Metrics
}

// newReplica returns a limiter with opts on a clock at start (a fleet's
// replicas share one), and the flushes to the test.
func newReplica(t *testing.T, clock *testkit.Clock, opts Options) *replica {
	t.Helper()
	m := metrics.NewMetrics()
	opts.Metrics, opts.Now, opts.Flush = m, clock.Now, -1
	l, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return &replica{Limiter: l, clock: clock, metrics: m}
}

func (r *replica) limited(client string) uint64 {
	return r.metrics.Counter("prodapi_rate_limited_total", "", "client").Value(client)
}

// admit admits a request of client now, returning its headers.
func (r *replica) admit(client string) (http.Header, error) {
	h := http.Header{}
	_, err := r.request(h, client)
	return h, err
}

// request admits a request of client now, returning its share.
func (r *replica) request(h http.Header, client string) (*Share, error) {
	now := r.clock.Now()
	s := r.Client(client, now)
	return s, r.Admit(h, s, now)
}

// tooMany is err's 429, or fails the test.
func tooMany(t *testing.T, err error) *httperr.Error {
	t.Helper()
	he, ok := errors.AsType[*httperr.Error](err)
	if !ok || he.Status != http.StatusTooManyRequests {
		t.Fatalf("got %v, want a 429", err)
	}
	return he
}

// A client's limit: 20 a second, as many at once; a request costs 1,
// and says what is left; the 21st is refused with the headers, and
// counted; time refills the bucket.
func TestAdmitUpToTheLimit(t *testing.T) {
	r := newReplica(t, testkit.NewClock(start), Options{Client: Rate{20, time.Second}, MissCost: 10})
	for i := range 20 {
		h, err := r.admit("mirror")
		if err != nil {
			t.Fatalf("request %d: %v", i+1, err)
		}
		want := http.Header{"Ratelimit-Policy": {`"client";q=20;w=1`}, "Ratelimit": {`"client";r=` + strconv.Itoa(19-i) + `;t=1`}}
		if diff := cmp.Diff(want, h); diff != "" {
			t.Errorf("request %d's headers (-want +got):\n%s", i+1, diff)
		}
	}
	_, err := r.admit("mirror")
	he := tooMany(t, err)
	want := http.Header{"Retry-After": {"1"}, "Ratelimit-Policy": {`"client";q=20;w=1`}, "Ratelimit": {`"client";r=0;t=1`}}
	if diff := cmp.Diff(want, he.Header); diff != "" {
		t.Errorf("the refusal's headers (-want +got):\n%s", diff)
	}
	if he.Msg != msgClient || !errors.Is(he, errClientLimit) {
		t.Errorf("the refusal says %q (%v)", he.Msg, he.Err)
	}
	if got := r.limited("other"); got != 1 {
		t.Errorf("prodapi_rate_limited_total{client=other} = %d, want 1", got)
	}
	if _, err := r.admit("another"); err != nil {
		t.Errorf("another client: %v; each client has its own bucket", err)
	}
	r.clock.Advance(100 * time.Millisecond) // two more
	for i := range 3 {
		if _, err := r.admit("mirror"); (err == nil) != (i < 2) {
			t.Errorf("100ms later, request %d: %v", i+1, err)
		}
	}
}

// Limits of their own: a named client has its limit and its label; one
// set to off is never refused and gets no headers; others are other.
func TestClientsOfTheirOwn(t *testing.T) {
	r := newReplica(t, testkit.NewClock(start), Options{Client: Rate{11, time.Second}, MissCost: 10,
		Clients: map[string]Rate{"big": {50, time.Second}, "internal": {}}})
	admitted := func(client string) int {
		n := 0
		for range 100 {
			if _, err := r.admit(client); err == nil {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		client string
		want   int
	}{{"small", 11}, {"big", 50}, {"internal", 100}} {
		if got := admitted(tc.client); got != tc.want {
			t.Errorf("%s: %d of 100 admitted at once, want %d", tc.client, got, tc.want)
		}
	}
	if got, want := []uint64{r.limited("big"), r.limited("other"), r.limited("internal"), r.limited("small")}, []uint64{50, 89, 0, 0}; !cmp.Equal(got, want) {
		t.Errorf("prodapi_rate_limited_total big, other, internal, small = %d, want %d", got, want)
	}
	if h, _ := r.admit("internal"); len(h) != 0 {
		t.Errorf("an unlimited client got %v", h)
	}
	text := metricsText(t, r.metrics)
	for _, series := range []string{`prodapi_rate_limited_total{client="big"}`, `prodapi_rate_limited_total{client="other"}`, `prodapi_cap_refusals_total{cap="client_loads"} 0`} {
		if !strings.Contains(text, series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}

// Before authentication: an address is refused once it has had its
// limit of refused requests, never before; an IPv6 address counts by
// its /64; the headers name the address policy.
func TestAddressLimit(t *testing.T) {
	r := newReplica(t, testkit.NewClock(start), Options{Address: Rate{3, time.Second}})
	now := r.clock.Now()
	a := netip.MustParseAddr("192.0.2.1")
	if err := r.CheckAddress(a, now); err != nil {
		t.Fatalf("a new address: %v", err)
	}
	for range 3 {
		h := http.Header{}
		r.Unauthenticated(h, a, now)
		if h.Get("Ratelimit-Policy") != `"address";q=3;w=1` {
			t.Errorf("a 401's headers: %v", h)
		}
	}
	he := tooMany(t, r.CheckAddress(a, now))
	if he.Msg != msgAddress || he.Header.Get("Retry-After") != "1" {
		t.Errorf("refusal %q %v", he.Msg, he.Header)
	}
	if err := r.CheckAddress(netip.MustParseAddr("192.0.2.2"), now); err != nil {
		t.Errorf("another address: %v", err)
	}
	v6 := netip.MustParseAddr("2001:db8:1:2::1")
	for range 3 {
		r.Unauthenticated(http.Header{}, v6, now)
	}
	tooMany(t, r.CheckAddress(netip.MustParseAddr("2001:db8:1:2:ffff::9"), now))
	if err := r.CheckAddress(netip.MustParseAddr("2001:db8:1:3::1"), now); err != nil {
		t.Errorf("another /64: %v", err)
	}
	if got := r.limited("other"); got != 2 {
		t.Errorf("prodapi_rate_limited_total{client=other} = %d, want 2", got)
	}
}

// A load costs MissCost more, before it starts: a client that can pay
// for one load but not two is refused the second, and a request without
// a share (a background refresh) is admitted as it is.
func TestLoadsCostMore(t *testing.T) {
	r := newReplica(t, testkit.NewClock(start), Options{Client: Rate{15, time.Second}, MissCost: 10})
	load := func() error {
		s, err := r.request(http.Header{}, "c")
		if err != nil {
			return err
		}
		done, err := r.AdmitLoad(WithShare(context.Background(), s))
		if err == nil {
			done()
		}
		return err
	}
	if err := load(); err != nil {
		t.Fatalf("the first load: %v", err)
	}
	he := tooMany(t, load()) // 11 spent, 1 more for the request: 3 left
	if he.Header.Get("Ratelimit") != `"client";r=3;t=1` || !errors.Is(he, errLoadLimit) {
		t.Errorf("a load refused: %v %v", he.Header, he.Err)
	}
	if done, err := r.AdmitLoad(context.Background()); err != nil {
		t.Errorf("a load without a share: %v", err)
	} else {
		done()
	}
}

// PRODAPI_CLIENT_MAX_LOADS: a client's loads in flight beyond the cap
// are refused, 429 with Retry-After: 1, counted; a load that ends gives
// its slot back; another client has slots of its own.
func TestLoadCap(t *testing.T) {
	r := newReplica(t, testkit.NewClock(start), Options{MaxLoads: 2})
	ctx := func(client string) context.Context {
		s, err := r.request(http.Header{}, client)
		if err != nil || s == nil {
			t.Fatalf("admit %s: %v %v", client, s, err)
		}
		return WithShare(context.Background(), s)
	}
	first, err1 := r.AdmitLoad(ctx("a"))
	_, err2 := r.AdmitLoad(ctx("a"))
	if err1 != nil || err2 != nil {
		t.Fatalf("two loads: %v, %v", err1, err2)
	}
	_, err := r.AdmitLoad(ctx("a"))
	he := tooMany(t, err)
	if he.Header.Get("Retry-After") != "1" || he.Msg != msgLoads {
		t.Errorf("the third load: %q %v", he.Msg, he.Header)
	}
	if _, err := r.AdmitLoad(ctx("b")); err != nil {
		t.Errorf("another client's load: %v", err)
	}
	first()
	if _, err := r.AdmitLoad(ctx("a")); err != nil {
		t.Errorf("a load after one ended: %v", err)
	}
	if got := r.metrics.Counter("prodapi_cap_refusals_total", "", "cap").Value("client_loads"); got != 1 {
		t.Errorf("prodapi_cap_refusals_total{cap=client_loads} = %d, want 1", got)
	}
}

// Two replicas on one fleet: what one served reaches the other's view at
// their flushes, so a client that spent its limit on A is refused on B
// after one batch there; a load is charged to the fleet before it starts,
// so B refuses it at once.
func TestReplicasShareTheCount(t *testing.T) {
	fleet := newRedisFleet(t)
	clock := testkit.NewClock(start)
	fleet.m.SetTime(start)
	opts := Options{Client: Rate{20, time.Second}, MissCost: 10, Fleet: fleet}
	a, b := newReplica(t, clock, opts), newReplica(t, clock, opts)
	for range 20 {
		if _, err := a.admit("c"); err != nil {
			t.Fatal(err)
		}
	}
	a.flush(context.Background())
	s, err := b.request(http.Header{}, "c")
	if err != nil {
		t.Fatalf("B, before it heard from the fleet: %v (one batch may overshoot)", err)
	}
	if _, err := b.AdmitLoad(WithShare(context.Background(), s)); err == nil {
		t.Error("B started a load the fleet could not pay for")
	}
	b.flush(context.Background())
	if _, err := b.admit("c"); err == nil {
		t.Error("B admitted a request after its flush told it the fleet's count is spent")
	}
	if b.Alone() {
		t.Error("B counts alone with the fleet up")
	}
}

// Over a long flood on two replicas, each flushing every 100ms, the
// fleet admits what the limit allows, its burst once, and one batch per
// replica more: never the limit per replica. Each replica serves its
// whole burst at first, before it hears from the fleet; what it served
// beyond what the fleet held is owed, and paid back.
func TestFleetKeepsToTheLimit(t *testing.T) {
	fleet := newRedisFleet(t)
	clock := testkit.NewClock(start)
	opts := Options{Client: Rate{100, time.Second}, MissCost: 10, Fleet: fleet}
	replicas := []*replica{newReplica(t, clock, opts), newReplica(t, clock, opts)}
	admitted := 0
	const seconds, steps = 30, 300 // a flush every 100ms
	for range steps {
		for _, r := range replicas {
			for range 100 { // 1,000 requests a second on each
				if _, err := r.admit("flood"); err == nil {
					admitted++
				}
			}
		}
		clock.Advance(100 * time.Millisecond)
		fleet.m.SetTime(clock.Now())
		for _, r := range replicas {
			r.flush(context.Background())
		}
	}
	limit, burst, batch := 100*seconds, 100, 10
	if most := limit + burst + len(replicas)*batch; admitted > most {
		t.Errorf("admitted %d in %ds at 100/s on 2 replicas, want at most %d", admitted, seconds, most)
	}
	if admitted < limit*9/10 {
		t.Errorf("admitted %d in %ds at 100/s, want about %d", admitted, seconds, limit)
	}
	t.Logf("admitted %d in %ds at 100/s on %d replicas", admitted, seconds, len(replicas))
}

// When the fleet cannot be asked, each replica limits on its own, and
// says so; when it can again, they share the count again.
func TestFleetDown(t *testing.T) {
	fleet := newRedisFleet(t)
	clock := testkit.NewClock(start)
	fleet.m.SetTime(start)
	r := newReplica(t, clock, Options{Client: Rate{20, time.Second}, MissCost: 10, Fleet: fleet})
	fleet.down.Store(true)
	admitted := 0
	for range 30 {
		if _, err := r.admit("c"); err == nil {
			admitted++
		}
	}
	r.flush(context.Background())
	if admitted != 20 || !r.Alone() {
		t.Errorf("fleet down: %d of 30 admitted, alone %v; want 20, true", admitted, r.Alone())
	}
	fleet.down.Store(false)
	clock.Advance(time.Second)
	fleet.m.SetTime(clock.Now())
	if _, err := r.admit("c"); err != nil {
		t.Fatal(err)
	}
	r.flush(context.Background())
	if r.Alone() {
		t.Error("still alone once the fleet answered")
	}
}

// A share idle for a minute with a full bucket is forgotten; one with a
// load in flight, or an empty bucket, is kept.
func TestIdleSharesForgotten(t *testing.T) {
	r := newReplica(t, testkit.NewClock(start), Options{Client: Rate{20, time.Second}, MissCost: 10, MaxLoads: 4})
	for _, c := range []string{"a", "b"} {
		if _, err := r.admit(c); err != nil {
			t.Fatal(err)
		}
	}
	s, _ := r.request(http.Header{}, "loading")
	done, err := r.AdmitLoad(WithShare(context.Background(), s))
	if err != nil {
		t.Fatal(err)
	}
	a := r.lookup(clientKey("a"))
	r.clock.Advance(30 * time.Second)
	r.admit("b")
	r.clock.Advance(32 * time.Second)
	r.flush(context.Background())
	if !a.Forgotten() {
		t.Error("a's share, forgotten, does not say so: whoever kept it would go on counting into nothing")
	}
	held := func() []string {
		var names []string
		for _, name := range []string{"a", "b", "loading"} {
			if r.lookup(clientKey(name)) != nil {
				names = append(names, name)
			}
		}
		return names
	}
	if got := held(); !cmp.Equal(got, []string{"b", "loading"}) {
		t.Errorf("held %v, want b (used 31s ago) and loading (a load in flight)", got)
	}
	if r.Client("a", r.clock.Now()) == a {
		t.Error("a's next request found its forgotten share")
	}
	done()
	r.clock.Advance(2 * time.Minute)
	r.flush(context.Background())
	if got := held(); len(got) != 0 {
		t.Errorf("held %v, want none", got)
	}
}

// A limit that cannot pay for one load is refused at the start.
func TestNewRefusesALimitBelowALoad(t *testing.T) {
	_, err := New(Options{Client: Rate{10, time.Second}, MissCost: 10, Clients: map[string]Rate{"ok": {11, time.Second}, "x": {5, time.Minute}}, Flush: -1})
	if err == nil {
		t.Fatal("New took limits of 10 and 5 events with a miss cost of 10")
	}
	for _, want := range []string{"the client limit of 10", `the limit of client "x" of 5`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v: does not name %s", err, want)
		}
	}
}

// A nil limiter limits nothing.
func TestNilLimiter(t *testing.T) {
	var l *Limiter
	now := time.Now()
	if err := l.CheckAddress(netip.MustParseAddr("192.0.2.1"), now); err != nil {
		t.Error(err)
	}
	if s := l.Client("c", now); s != nil {
		t.Error(s)
	}
	if err := l.Admit(http.Header{}, nil, now); err != nil {
		t.Error(err)
	}
	if done, err := l.AdmitLoad(context.Background()); err != nil {
		t.Error(err)
	} else {
		done()
	}
	if l.Alone() {
		t.Error("a nil limiter is alone")
	}
}

func metricsText(t *testing.T, m *metrics.Metrics) string {
	t.Helper()
	var b testkit.Buffer
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A client that asks again before its 429's Retry-After has passed is
// held before its next 429 goes out; one that waited is not. At most
// maxHolds of one client's requests are held at once; a held request
// ends with its context.
func TestHoldsClientsThatDoNotWait(t *testing.T) {
	clock := testkit.NewClock(start)
	m := metrics.NewMetrics()
	l, err := New(Options{Client: Rate{11, time.Second}, MissCost: 10, Now: clock.Now, Flush: -1, Hold: time.Hour, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	refuse := func() error {
		now := clock.Now()
		err := l.Admit(http.Header{}, l.Client("c", now), now)
		if err == nil {
			t.Fatal("admitted")
		}
		return err
	}
	for range 11 {
		l.Admit(http.Header{}, l.Client("c", clock.Now()), clock.Now())
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if l.Hold(cancelled, refuse()) {
		t.Error("the first 429 was held")
	}
	clock.Advance(50 * time.Millisecond) // within the last one's Retry-After: 1
	early := refuse()
	if !l.Hold(cancelled, early) {
		t.Error("a 429 50ms into the last one's Retry-After was not held")
	}
	clock.Advance(1500 * time.Millisecond) // waited: refilled, spend it again
	for range 11 {
		l.Admit(http.Header{}, l.Client("c", clock.Now()), clock.Now())
	}
	if l.Hold(cancelled, refuse()) {
		t.Error("a 429 after the last one's Retry-After was held")
	}
	// maxHolds at once; the next goes out at once.
	ctx, release := context.WithCancel(context.Background())
	var held sync.WaitGroup
	clock.Advance(50 * time.Millisecond)
	early = refuse()
	for range maxHolds {
		held.Go(func() { l.Hold(ctx, early) })
	}
	s := l.Client("c", clock.Now())
	testkit.Eventually(t, "maxHolds requests held", func() bool { return s.holding.Load() == maxHolds })
	if l.Hold(context.Background(), early) {
		t.Error("a request held beyond maxHolds")
	}
	release()
	held.Wait()
	if s.holding.Load() != 0 {
		t.Errorf("%d still held", s.holding.Load())
	}
	if l.Hold(cancelled, errors.New("another error")) {
		t.Error("held an error that is no refusal")
	}
}
