package cache

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
)

// clientKey carries a test's client in a request's context, as the
// server carries the fair-share limiter's.
type clientKey struct{}

func asClient(ctx context.Context, client string) context.Context {
	return context.WithValue(ctx, clientKey{}, client)
}

// A gate records the loads it admits, by client, and refuses those of
// the clients in refuse; hook, when set, runs first.
type gate struct {
	mu       sync.Mutex
	admitted []string
	ended    int
	refuse   map[string]error
	hook     func(client string)
}

func (g *gate) AdmitLoad(ctx context.Context) (func(), error) {
	client, _ := ctx.Value(clientKey{}).(string)
	if g.hook != nil {
		g.hook(client)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if err := g.refuse[client]; err != nil {
		return nil, err
	}
	g.admitted = append(g.admitted, client)
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.ended++
	}, nil
}

func (g *gate) seen() (admitted []string, ended int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.admitted...), g.ended
}

func gatedBy(g *gate) envOption { return withOptions(func(o *Options) { o.Gate = g }) }

// The gate is asked for the load a request starts, with that request's
// context, and told when it ended; never for a hit in either tier, a
// stale answer or its background refresh; and for every load of a
// resource whose TTL is 0.
func TestGateAdmitsLoadsOnly(t *testing.T) {
	g := &gate{}
	e := newEnv(t, gatedBy(g), withOptions(func(o *Options) {
		o.TTL = func(res string, detail bool) time.Duration {
			if res == "users" {
				return 0
			}
			return 10 * time.Second
		}
	}))
	load := func(client string, q *sources.Query) string {
		rep, err := e.c.Load(asClient(context.Background(), client), q)
		if err != nil {
			t.Fatalf("%s: %v", client, err)
		}
		e.settle()
		return rep.Outcome
	}
	q := list(t, "items")
	var outcomes []string
	outcomes = append(outcomes, load("miss", q), load("local hit", q))
	e.advance(3 * time.Second) // past the in-process lifetime
	outcomes = append(outcomes, load("redis hit", q))
	other := e.newCache() // another replica: a Redis hit
	defer closeCache(t, other)
	if rep, err := other.Load(asClient(context.Background(), "other replica"), q); err != nil || rep.Outcome != OutcomeHit {
		t.Fatalf("another replica: %v %v", rep, err)
	}
	e.advance(10 * time.Second) // stale: served while a refresh loads
	outcomes = append(outcomes, load("stale", q), load("bypass 1", list(t, "users")), load("bypass 2", list(t, "users")))
	if diff := cmp.Diff([]string{OutcomeMiss, OutcomeHit, OutcomeHit, OutcomeStale, OutcomeBypass, OutcomeBypass}, outcomes); diff != "" {
		t.Errorf("outcomes (-want +got):\n%s", diff)
	}
	admitted, ended := g.seen()
	if diff := cmp.Diff([]string{"miss", "bypass 1", "bypass 2"}, admitted); diff != "" || ended != 3 {
		t.Errorf("loads admitted (-want +got):\n%s\n%d ended, want 3", diff, ended)
	}
	if got := e.be.count(q); got != 2 {
		t.Errorf("loads of the list %d, want 2 (the miss and the refresh)", got)
	}
}

// Requests waiting for another's load are not asked: a stampede on one
// cold key asks the gate once, for the request that loads.
func TestGateAskedOncePerLoad(t *testing.T) {
	g := &gate{}
	e := newEnv(t, gatedBy(g))
	release := make(chan struct{})
	e.be.setHook(func(context.Context, *sources.Query) (*sources.Representation, error) {
		<-release
		return nil, nil
	})
	q := detail(t, "items", "cold")
	var started, done sync.WaitGroup
	for range 50 {
		started.Add(1)
		done.Go(func() {
			started.Done()
			if _, err := e.c.Load(asClient(context.Background(), "c"), q); err != nil {
				t.Errorf("Load: %v", err)
			}
		})
	}
	started.Wait()
	close(release)
	done.Wait()
	admitted, ended := g.seen()
	if len(admitted) != 1 || ended != 1 || e.be.count(q) != 1 {
		t.Errorf("50 requests for a cold key: %d loads admitted, %d ended, %d made; want 1 each", len(admitted), ended, e.be.count(q))
	}
}

// A refused load fails its request with the gate's error, stores
// nothing, and counts no cache error; a request that waited for it
// loads for itself, as a miss, asking the gate for its own load.
func TestRefusedLoadLetsWaitersLoad(t *testing.T) {
	errLimit := errors.New("over the limit")
	entered, proceed := make(chan struct{}), make(chan struct{})
	g := &gate{refuse: map[string]error{"flood": errLimit}}
	g.hook = func(client string) {
		if client == "flood" {
			close(entered)
			<-proceed
		}
	}
	e := newEnv(t, gatedBy(g))
	q := detail(t, "items", "x")
	floodErr := make(chan error)
	go func() {
		_, err := e.c.Load(asClient(context.Background(), "flood"), q)
		floodErr <- err
	}()
	<-entered // the flood's request runs the flight, and is at the gate
	calm := &joinCtx{Context: asClient(context.Background(), "calm"), joined: make(chan struct{})}
	type result struct {
		rep *sources.Representation
		err error
	}
	calmRes := make(chan result)
	go func() {
		rep, err := e.c.Load(calm, q)
		calmRes <- result{rep, err}
	}()
	<-calm.joined // the calm request waits on the flood's flight
	close(proceed)
	if err := <-floodErr; !errors.Is(err, errLimit) {
		t.Errorf("the refused request: %v, want the gate's error", err)
	}
	r := <-calmRes
	if r.err != nil || r.rep.Outcome != OutcomeMiss {
		t.Fatalf("the request that waited: %v %v, want a miss of its own", r.rep, r.err)
	}
	admitted, _ := g.seen()
	if diff := cmp.Diff([]string{"calm"}, admitted); diff != "" || e.be.count(q) != 1 {
		t.Errorf("loads admitted (-want +got):\n%s\nloads %d, want 1", diff, e.be.count(q))
	}
	if got := e.metrics.Counter("prodapi_cache_requests_total", "").Value("items", OutcomeError); got != 0 {
		t.Errorf("cache errors %d, want 0: a refusal is no failure of the cache", got)
	}
}
