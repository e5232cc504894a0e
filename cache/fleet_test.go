package cache

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/realserver"
	"github.com/prodapi/prodapi/test/testkit"
)

// coldKeyStorm sends n concurrent requests for q to each replica while the
// backend's first load is held until every replica waits on it, and
// returns the outcomes.
func coldKeyStorm(t *testing.T, e *env, replicas []*Cache, q *sources.Query, n int) map[string]int {
	t.Helper()
	release := make(chan struct{})
	e.be.setHook(func(context.Context, *sources.Query) (*sources.Representation, error) {
		<-release
		return nil, nil
	})
	var wg sync.WaitGroup
	var mu sync.Mutex
	outcomes := map[string]int{}
	for _, c := range replicas {
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rep, err := c.Load(context.Background(), q)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					outcomes["error: "+err.Error()]++
					return
				}
				outcomes[rep.Outcome]++
			}()
		}
	}
	leases := e.metrics.Counter("prodapi_cache_fleet_leases_total", "result")
	testkit.Eventually(t, "one replica to load and the others to wait", func() bool {
		return leases.Value("won") == 1 && leases.Value("waited") == uint64(len(replicas)-1)
	})
	close(release)
	wg.Wait()
	return outcomes
}

func TestOneLoadPerFleet(t *testing.T) {
	e := newEnv(t)
	b, c := e.newCache(), e.newCache()
	defer closeCache(t, b)
	defer closeCache(t, c)
	q := detail(t, "items", "breaking")
	outcomes := coldKeyStorm(t, e, []*Cache{e.c, b, c}, q, 50)
	if got := e.be.count(q); got != 1 {
		t.Errorf("backend loads = %d, want 1 for the fleet", got)
	}
	// A request a busy machine starts after the value is stored is a
	// hit, not collapsed: either way it cost no load.
	if outcomes[OutcomeMiss] != 1 || outcomes[OutcomeMiss]+outcomes[OutcomeCollapsed]+outcomes[OutcomeHit] != 150 {
		t.Errorf("outcomes %v, want one miss and 149 collapsed or hits", outcomes)
	}
	for _, r := range []*Cache{e.c, b, c} {
		settle(r) // a lease is released off the request path
	}
	if e.m.Exists(leaseKey(Key(q))) {
		t.Error("the lease outlived the load")
	}
}

// A holder that dies leaves its lease to lapse; then another replica loads.
func TestFleetLeaseLapses(t *testing.T) {
	e := newEnv(t, withOptions(func(o *Options) { o.LoadTimeout = time.Minute }))
	q := detail(t, "items", "orphan")
	if err := e.rdb.Set(context.Background(), leaseKey(Key(q)), "a dead replica", 30*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	done := make(chan *sources.Representation)
	go func() {
		rep, err := e.c.Load(context.Background(), q)
		if err != nil {
			t.Error(err)
		}
		done <- rep
	}()
	leases := e.metrics.Counter("prodapi_cache_fleet_leases_total", "result")
	testkit.Eventually(t, "the replica to wait", func() bool { return leases.Value("waited") == 1 })
	if e.be.count(q) != 0 {
		t.Fatal("loaded while another replica held the lease")
	}
	e.m.FastForward(31 * time.Second) // the dead holder's lease lapses
	rep := <-done
	if rep.Outcome != OutcomeMiss || e.be.count(q) != 1 || leases.Value("won") != 1 {
		t.Errorf("after the lease lapsed: %s, loads %d, won %d", rep.Outcome, e.be.count(q), leases.Value("won"))
	}
}

// A load that fails gives the lease back at once: a waiting replica loads.
func TestFleetLeaseReleasedOnFailure(t *testing.T) {
	e := newEnv(t)
	b := e.newCache()
	defer closeCache(t, b)
	q := detail(t, "items", "flaky")
	release := make(chan struct{})
	var mu sync.Mutex
	calls := 0
	e.be.setHook(func(context.Context, *sources.Query) (*sources.Representation, error) {
		mu.Lock()
		calls++
		first := calls == 1
		mu.Unlock()
		if first {
			<-release
			return nil, sources.ErrUnavailable
		}
		return nil, nil
	})
	errs := make(chan error, 2)
	for _, c := range []*Cache{e.c, b} {
		go func() {
			_, err := c.Load(context.Background(), q)
			errs <- err
		}()
	}
	leases := e.metrics.Counter("prodapi_cache_fleet_leases_total", "result")
	testkit.Eventually(t, "one to load and one to wait", func() bool { return leases.Value("won") == 1 && leases.Value("waited") == 1 })
	close(release)
	var failed, ok int
	for range 2 {
		if err := <-errs; err != nil {
			failed++
		} else {
			ok++
		}
	}
	if failed != 1 || ok != 1 || e.be.count(q) != 2 {
		t.Errorf("failed %d, ok %d, loads %d; want the waiter to load after the failure", failed, ok, e.be.count(q))
	}
}

// Three replicas on one real redis-server, 200 concurrent requests each on
// one cold key: one backend load.
func TestRealRedisOneLoadPerFleet(t *testing.T) {
	srv := realserver.StartRedis(t, 0)
	e := realEnv(t, srv)
	b, c := e.newCache(), e.newCache()
	defer closeCache(t, b)
	defer closeCache(t, c)
	q := list(t, "items", "q", "storm")
	outcomes := coldKeyStorm(t, e, []*Cache{e.c, b, c}, q, 200)
	if got := e.be.count(q); got != 1 {
		t.Errorf("backend loads = %d, want 1 (outcomes %v)", got, outcomes)
	}
}
