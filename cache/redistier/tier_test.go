package redistier

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/test/testkit"
)

func TestGet(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.m.Set("k", "v")
	if got, ok := e.t.Get(ctx, "k"); !ok || string(got) != "v" {
		t.Errorf("Get(k) = %q, %v; want v", got, ok)
	}
	if got, ok := e.t.Get(ctx, "missing"); !ok || got != nil {
		t.Errorf("Get(missing) = %q, %v; want nil, true", got, ok)
	}
	// Another type under the key: a value the caller refuses.
	e.m.Lpush("list", "x")
	if got, ok := e.t.Get(ctx, "list"); !ok || got == nil || len(got) != 0 {
		t.Errorf("Get(list) = %q (nil %v), %v; want an empty value", got, got == nil, ok)
	}
	e.m.Close()
	if _, ok := e.t.Get(ctx, "k"); ok {
		t.Error("Get with Redis down answered")
	}
	if got := e.errors("get"); got != 1 {
		t.Errorf("get errors counted = %d, want 1", got)
	}
}

func TestWrites(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.t.Set(ctx, "a", []byte("1"), time.Minute)
	e.t.Set(ctx, "b", []byte("1"), time.Minute)
	// One key's writes keep their order.
	e.t.Delete(ctx, "b")
	e.t.Set(ctx, "b", []byte("2"), 30*time.Second)
	e.t.Settle()
	if v, _ := e.m.Get("a"); v != "1" {
		t.Errorf("a = %q, want 1", v)
	}
	if v, _ := e.m.Get("b"); v != "2" {
		t.Errorf("b = %q, want 2", v)
	}
	if ttl := e.m.TTL("b"); ttl != 30*time.Second {
		t.Errorf("b's TTL %s, want 30s", ttl)
	}
	e.t.Delete(ctx, "a")
	e.t.Settle()
	if e.m.Exists("a") {
		t.Error("a not deleted")
	}
	// SetAndWait returns once the value is there.
	e.t.SetAndWait(ctx, "c", []byte("3"), time.Minute)
	if v, _ := e.m.Get("c"); v != "3" {
		t.Errorf("c = %q right after SetAndWait, want 3", v)
	}
	h := e.metrics.Histogram("prodapi_cache_redis_duration_seconds", "", nil, "op")
	if h.Count("set") != 4 || h.Count("del") != 2 {
		t.Errorf("timed %d sets and %d dels, want 4 and 2", h.Count("set"), h.Count("del"))
	}
}

// A write that fails with a reply error (out of memory) is counted and
// leaves the breaker closed: Redis is there, and reads go on.
func TestWriteErrorsKeepTheBreakerClosed(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.m.SetError("OOM command not allowed when used memory > 'maxmemory'")
	for range 2 * breakerMinCalls {
		e.t.Set(ctx, "k", []byte("v"), time.Minute)
	}
	e.t.Settle()
	e.m.SetError("")
	if got := e.t.breaker.current(); got != closed {
		t.Errorf("breaker %v, want closed", got)
	}
	if got := e.errors("set"); got != 2*breakerMinCalls {
		t.Errorf("set errors counted = %d, want %d", got, 2*breakerMinCalls)
	}
}

// With the breaker open, writes are dropped before they queue.
func TestWritesDroppedWhileTheBreakerIsOpen(t *testing.T) {
	e := newEnv(t)
	e.m.Close()
	ctx := context.Background()
	for i := 0; e.t.breaker.current() != open; i++ {
		if i == 1000 {
			t.Fatal("the breaker never opened with Redis down")
		}
		e.t.Get(ctx, "k")
		e.t.Settle()
	}
	e.t.Set(ctx, "k", []byte("v"), time.Minute)
	if got := e.metrics.Counter("prodapi_cache_writes_dropped_total", "reason").Value("breaker_open"); got != 1 {
		t.Errorf("writes dropped with the breaker open = %d, want 1", got)
	}
	if got := e.metrics.Gauge("prodapi_cache_redis_breaker_state", "").Value(); got != 1 {
		t.Errorf("breaker gauge %v, want 1", got)
	}
}

// Close drains the queued writes; writes after it are dropped and
// counted; reads still work.
func TestCloseDrainsWrites(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	tr := e.tier(t)
	for i := range 100 {
		tr.Set(ctx, strings.Repeat("k", i+1), []byte("v"), time.Minute)
	}
	closeTier(t, tr)
	if n := len(e.m.Keys()); n != 100 {
		t.Errorf("%d of 100 writes made before Close returned", n)
	}
	tr.Set(ctx, "late", []byte("v"), time.Minute)
	if got := e.metrics.Counter("prodapi_cache_writes_dropped_total", "reason").Value("closed"); got != 1 {
		t.Errorf("writes dropped after Close = %d, want 1", got)
	}
	if got, ok := tr.Get(ctx, "k"); !ok || string(got) != "v" {
		t.Errorf("Get after Close = %q, %v", got, ok)
	}
}

// Close gives up on writes when its context ends: the writers drop what
// they have not made (on a hung Redis, after the write they are stuck
// in), and a second Close succeeds.
func TestCloseGivesUpWithItsContext(t *testing.T) {
	m := metrics.NewMetrics()
	tr := New(silentClient(t), Options{Metrics: m})
	ctx := context.Background()
	for i := range 20 {
		tr.Set(ctx, strings.Repeat("k", i+1), []byte("v"), time.Minute)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := tr.Close(done); !errors.Is(err, context.Canceled) {
		t.Errorf("Close with a done context = %v, want canceled", err)
	}
	closeTier(t, tr)
	if got := m.Counter("prodapi_cache_writes_dropped_total", "reason").Value("closed"); got == 0 {
		t.Error("no write dropped after Close gave up")
	}
}

func TestGens(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.GenTTL = time.Hour })
	ctx := context.Background()
	tags := []string{"all", "res:items", "doc:items/i1"}
	gens, ok := e.t.Gens(ctx, tags)
	if !ok || !slices.Equal(gens, []uint64{0, 0, 0}) {
		t.Fatalf("Gens of unset tags = %v, %v; want zeros", gens, ok)
	}
	if err := e.t.NewGens(ctx, tags[1:]); err != nil {
		t.Fatal(err)
	}
	gens, _ = e.t.Gens(ctx, tags)
	if gens[0] != 0 || gens[1] == 0 || gens[1] != gens[2] || gens[1] == UnknownGen {
		t.Errorf("after NewGens of two tags: %v", gens)
	}
	before := gens[1]
	if err := e.t.NewGens(ctx, tags[1:2]); err != nil {
		t.Fatal(err)
	}
	if gens, _ = e.t.Gens(ctx, tags); gens[1] == before || gens[2] != before {
		t.Errorf("a second NewGens of one tag: %v, before %d", gens, before)
	}
	if ttl := e.m.TTL(genKey("res:items")); ttl != time.Hour {
		t.Errorf("generation TTL %s, want GenTTL (1h)", ttl)
	}
	e.m.Set(genKey("all"), "garbage")
	if gens, _ = e.t.Gens(ctx, tags); gens[0] != UnknownGen {
		t.Errorf("an unreadable generation = %d, want UnknownGen", gens[0])
	}
	if got := e.metrics.Histogram("prodapi_cache_redis_duration_seconds", "", nil, "op").Count("gens"); got != 4 {
		t.Errorf("gens reads timed = %d, want 4", got)
	}
	e.m.Close()
	if _, ok := e.t.Gens(ctx, tags); ok {
		t.Error("Gens with Redis down answered")
	}
	if err := e.t.NewGens(ctx, tags); err == nil {
		t.Error("NewGens with Redis down succeeded")
	}
	if got := e.errors("invalidate"); got != 1 {
		t.Errorf("invalidate errors counted = %d, want 1", got)
	}
}

// A listener records what a tier hears.
type listener struct {
	mu     sync.Mutex
	events []string
}

func (l *listener) add(ev string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, ev)
}

func (l *listener) Subscribed(missed bool) {
	if missed {
		l.add("subscribed after a loss")
	} else {
		l.add("subscribed")
	}
}
func (l *listener) Unsubscribed()          { l.add("unsubscribed") }
func (l *listener) Message(payload string) { l.add("message " + payload) }

func (l *listener) seen() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.events)
}

// Two replicas: each hears the other's messages, not its own; a lost
// subscription is reported, and so is the one that follows, as one after
// a loss.
func TestPubSub(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.tier(t)
	la, lb := &listener{}, &listener{}
	e.t.Subscribe(la)
	b.Subscribe(lb)
	subs := e.metrics.Counter("prodapi_cache_invalidation_subscriptions_total", "")
	testkit.Eventually(t, "both to subscribe", func() bool { return subs.Value() == 2 })
	if err := e.t.Publish(ctx, "doc:items/a\nlist:items"); err != nil {
		t.Fatal(err)
	}
	received := e.metrics.Counter("prodapi_cache_invalidations_received_total", "")
	testkit.Eventually(t, "both to receive it", func() bool { return received.Value() == 2 })
	if got, want := lb.seen(), []string{"subscribed", "message doc:items/a\nlist:items"}; !slices.Equal(got, want) {
		t.Errorf("b heard %q, want %q", got, want)
	}
	if got, want := la.seen(), []string{"subscribed"}; !slices.Equal(got, want) {
		t.Errorf("the sender heard %q, want %q", got, want)
	}
	// Malformed messages (no sender, no payload) are ignored.
	for _, m := range []string{"no-newline", "\npayload", "sender\n"} {
		e.m.Publish(Channel, m)
	}
	if err := e.t.Publish(ctx, "res:events"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "b to hear the next one", func() bool { return len(lb.seen()) == 3 })
	if got := lb.seen()[2]; got != "message res:events" {
		t.Errorf("b heard %q after the malformed ones", got)
	}

	// Redis goes away and comes back.
	e.m.Close()
	testkit.Eventually(t, "b to lose its subscription", func() bool { return slices.Contains(lb.seen(), "unsubscribed") })
	if got := e.metrics.Gauge("prodapi_cache_invalidation_subscribed", "").Value(); got != 0 {
		t.Errorf("subscribed gauge %v while Redis is down, want 0", got)
	}
	if err := e.m.Restart(); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "b to subscribe again", func() bool { return slices.Contains(lb.seen(), "subscribed after a loss") })
	testkit.Eventually(t, "the gauge to show it", func() bool {
		return e.metrics.Gauge("prodapi_cache_invalidation_subscribed", "").Value() == 1
	})
}

func TestWithoutRedis(t *testing.T) {
	tr := New(nil, Options{})
	defer closeTier(t, tr)
	ctx := context.Background()
	if tr.Enabled() {
		t.Error("a tier without Redis is enabled")
	}
	if _, ok := tr.Get(ctx, "k"); ok {
		t.Error("Get answered without Redis")
	}
	tr.Set(ctx, "k", []byte("v"), time.Minute)
	tr.SetAndWait(ctx, "k", []byte("v"), time.Minute)
	if _, ok := tr.Gens(ctx, []string{"all"}); ok {
		t.Error("Gens answered without Redis")
	}
	if err := tr.NewGens(ctx, []string{"all"}); err != nil {
		t.Errorf("NewGens without Redis: %v", err)
	}
	if err := tr.Publish(ctx, "all"); err != nil {
		t.Errorf("Publish without Redis: %v", err)
	}
	tr.Subscribe(&listener{})
	if token, ok := tr.TryLoadLease(ctx, "k", time.Second); ok || token != "" {
		t.Errorf("TryLoadLease without Redis = %q, %v; want a load without a lease", token, ok)
	}
	// A replica alone holds the feed's lease and keeps its token.
	if held, err := tr.Lease(ctx, "mongo", "me", time.Second); !held || err != nil {
		t.Errorf("Lease alone = %v, %v; want held", held, err)
	}
	if err := tr.SaveToken(ctx, "mongo", []byte("t1")); err != nil {
		t.Fatal(err)
	}
	if got, err := tr.Token(ctx, "mongo"); string(got) != "t1" || err != nil {
		t.Errorf("Token alone = %q, %v; want t1", got, err)
	}
}

func TestLoadLease(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	b := e.tier(t)
	token, ok := e.t.TryLoadLease(ctx, "prodapi:v1:items:detail:id=a", 30*time.Second)
	if !ok || token == "" {
		t.Fatalf("first TryLoadLease = %q, %v; want the lease", token, ok)
	}
	key := loadLeaseKey("prodapi:v1:items:detail:id=a")
	if ttl := e.m.TTL(key); ttl != 30*time.Second {
		t.Errorf("lease TTL %s, want 30s", ttl)
	}
	if other, ok := b.TryLoadLease(ctx, "prodapi:v1:items:detail:id=a", 30*time.Second); !ok || other != "" {
		t.Errorf("second TryLoadLease = %q, %v; want another's lease", other, ok)
	}
	// Only the holder's token releases it.
	b.ReleaseLoadLease("prodapi:v1:items:detail:id=a", "not the token")
	b.Settle() // releases are made off the request path
	if !e.m.Exists(key) {
		t.Error("a stranger's token released the lease")
	}
	e.t.ReleaseLoadLease("prodapi:v1:items:detail:id=a", token)
	e.t.Settle()
	if e.m.Exists(key) {
		t.Error("the holder's release left the lease")
	}
	if got := e.metrics.Histogram("prodapi_cache_redis_duration_seconds", "", nil, "op").Count("lease"); got != 2 {
		t.Errorf("lease calls timed = %d, want 2", got)
	}
	e.m.Close()
	if _, ok := b.TryLoadLease(ctx, "k", time.Second); ok {
		t.Error("TryLoadLease with Redis down answered")
	}
	if got := e.errors("lease"); got != 1 {
		t.Errorf("lease errors counted = %d, want 1", got)
	}
}

func TestFeedLeaseAndToken(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	lease := func(holder string) bool {
		t.Helper()
		held, err := e.t.Lease(ctx, "mongo", holder, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return held
	}
	if !lease("a") {
		t.Fatal("a free lease was refused")
	}
	if lease("b") {
		t.Error("a held lease was given to another")
	}
	e.m.FastForward(3 * time.Second)
	if !lease("a") {
		t.Error("the holder could not renew")
	}
	if ttl := e.m.TTL("prodapi:v1:feed:mongo:lease"); ttl != 5*time.Second {
		t.Errorf("renewed lease TTL %s, want 5s", ttl)
	}
	if err := e.t.ReleaseLease(ctx, "mongo", "b"); err != nil || !e.m.Exists("prodapi:v1:feed:mongo:lease") {
		t.Errorf("a stranger released the lease: %v", err)
	}
	if err := e.t.ReleaseLease(ctx, "mongo", "a"); err != nil || e.m.Exists("prodapi:v1:feed:mongo:lease") {
		t.Errorf("the holder's release left the lease: %v", err)
	}
	if !lease("b") {
		t.Error("a released lease was refused")
	}

	if got, err := e.t.Token(ctx, "mongo"); got != nil || err != nil {
		t.Errorf("Token before any = %q, %v", got, err)
	}
	if err := e.t.SaveToken(ctx, "mongo", []byte("t1")); err != nil {
		t.Fatal(err)
	}
	if got, err := e.t.Token(ctx, "mongo"); string(got) != "t1" || err != nil {
		t.Errorf("Token = %q, %v; want t1", got, err)
	}
	// In the change log's slot, so that a Cluster replicates it with the
	// entries appended before it.
	if ttl := e.m.TTL("prodapi:v1:{changes}:feed:mongo:token"); ttl != tokenTTL {
		t.Errorf("token TTL %s, want %s", ttl, tokenTTL)
	}
	if err := e.t.SaveToken(ctx, "mongo", nil); err != nil {
		t.Fatal(err)
	}
	if got, err := e.t.Token(ctx, "mongo"); got != nil || err != nil {
		t.Errorf("Token after dropping it = %q, %v", got, err)
	}

	// An older version's token, under the old key, is read while there is
	// none under the new one; the first save (or a drop) removes it.
	const legacy = "prodapi:v1:feed:mongo:token"
	for _, save := range [][]byte{[]byte("t2"), nil} {
		e.m.Del("prodapi:v1:{changes}:feed:mongo:token")
		if err := e.m.Set(legacy, "old"); err != nil {
			t.Fatal(err)
		}
		if got, err := e.t.Token(ctx, "mongo"); string(got) != "old" || err != nil {
			t.Errorf("Token with an old version's = %q, %v; want old", got, err)
		}
		if err := e.t.SaveToken(ctx, "mongo", save); err != nil {
			t.Fatal(err)
		}
		if e.m.Exists(legacy) {
			t.Errorf("the old key is still there after SaveToken(%q)", save)
		}
		if got, err := e.t.Token(ctx, "mongo"); string(got) != string(save) || err != nil {
			t.Errorf("Token after SaveToken(%q) = %q, %v", save, got, err)
		}
	}
}
