package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/elastic/estest"
	"github.com/prodapi/prodapi/test/realserver"
)

// On SIGTERM a replica turns unready before its listener closes, and
// serves meanwhile, so that load balancers stop sending first; with
// PRODAPI_SHUTDOWN_DELAY it stays so that long before draining.
func TestShutdownDrains(t *testing.T) {
	const delay = 300 * time.Millisecond
	in := start(t, "PRODAPI_SHUTDOWN_DELAY", delay.String())
	tok := bearer(t, devSecret, sources.AllScopes...)
	if status, _, body := in.getOps(t, "/readyz"); status != 200 || !strings.HasPrefix(string(body), `{"status":"ready"`) {
		t.Fatalf("/readyz before SIGTERM: %d %s", status, body)
	}
	type answer struct {
		status int
		body   string
		err    error
	}
	var ready, desks answer
	in.onDrain = func() { // on run's goroutine, before the listener closes
		status, _, body, err := tryRequest(http.MethodGet, in.ops+"/readyz")
		ready = answer{status, string(body), err}
		status, _, body, err = tryRequest(http.MethodGet, in.base+"/prodapi/v1/desks", "Authorization", tok)
		desks = answer{status, string(body), err}
	}
	signalled := time.Now()
	if err := in.stop(); err != nil {
		t.Fatal(err)
	}
	if ready.err != nil || ready.status != 503 || !strings.HasPrefix(ready.body, `{"status":"draining","checks":{"sandbox":"ok"}`) {
		t.Errorf("/readyz while draining: %d %s %v; want 503 draining", ready.status, ready.body, ready.err)
	}
	if desks.err != nil || desks.status != 200 {
		t.Errorf("a request while draining: %d %v; want 200", desks.status, desks.err)
	}
	// A lower bound only: the delay is a sleep, which never ends early.
	if took := time.Since(signalled); took < delay {
		t.Errorf("run returned %s after SIGTERM, within PRODAPI_SHUTDOWN_DELAY=%s", took, delay)
	}
	if !strings.Contains(in.stderr.String(), `"msg":"shutting down","delay":"300ms",`) {
		t.Errorf("no shutdown line naming the delay:\n%s", in.stderr)
	}
}

// Every backend fails under load with three replicas sharing a real
// redis-server: all stay ready, the keys they served answer stale, and
// the keys they never served answer the 503 envelope with Retry-After.
// The backends are the test's own fakes (the MongoDB wire fake stopped,
// the Elasticsearch fake answering 503), not a server other tests share.
func TestFleetOutage(t *testing.T) {
	rds := realserver.StartRedis(t, 0)
	mongo, es, env := platformServers(t, sampleDir)
	// Backend timeout 5s: an unreachable MongoDB fails server selection
	// at 2s, as unavailable (503) rather than timed out (504). Entries
	// are fresh for a second, then served stale for 15 minutes.
	env = append(env, "REDIS_URL", rds.URL(), "PRODAPI_BACKEND_TIMEOUT", "5s", "PRODAPI_CACHE_TTL", "1s")
	fleet := []*instance{start(t, env...), start(t, env...), start(t, env...)}
	tok := bearer(t, devSecret, sources.AllScopes...)

	ids := func(target string) []string {
		var out []string
		for _, d := range getListAuth(t, fleet[0], target, tok).Items {
			out = append(out, d["_id"].(string))
		}
		return out
	}
	desks, items := ids("/prodapi/v1/desks"), ids("/prodapi/v1/items")
	warm := []string{"/prodapi/v1/desks", "/prodapi/v1/items", "/prodapi/v1/users", "/prodapi/v1/planning?max_results=3",
		"/prodapi/v1/desks/" + desks[0], "/prodapi/v1/items/" + url.PathEscape(items[0])}
	cold := []string{"/prodapi/v1/desks?max_results=2", "/prodapi/v1/events_history?max_results=4", "/prodapi/v1/items?max_results=7",
		"/prodapi/v1/contacts?max_results=3", "/prodapi/v1/desks/" + desks[1], "/prodapi/v1/items/" + url.PathEscape(items[1])}
	for _, in := range fleet {
		for _, target := range warm {
			if status, _, body := in.get(t, target, tok); status != 200 {
				t.Fatalf("warming %s: %d %s", target, status, body)
			}
		}
	}

	mongo.Stop()
	es.Fail(0, estest.Reply{Status: 503, Body: string(estest.NoShards())})

	// Freshness (a second) passes; then every replica serves its warm
	// keys stale.
	stale := func(h http.Header) bool { return strings.Contains(h.Get("Cache-Status"), "; ttl=-") }
	deadline := time.Now().Add(time.Minute)
	for _, in := range fleet {
		for _, target := range warm {
			for {
				status, h, body := in.get(t, target, tok)
				if status == 200 && stale(h) {
					break
				}
				if status != 200 || time.Now().After(deadline) {
					t.Fatalf("%s with the backends down: %d %q %s", target, status, h.Get("Cache-Status"), body)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}

	// The load: three workers per replica, each asking for warm and cold
	// keys in turn, and for /readyz after each.
	const workers, rounds = 3, 6
	var (
		mu     sync.Mutex
		counts = map[string]int{}
	)
	count := func(what string) {
		mu.Lock()
		counts[what]++
		mu.Unlock()
	}
	var wg sync.WaitGroup
	for r, in := range fleet {
		for w := range workers {
			wg.Go(func() {
				for i := range rounds {
					n := r*workers + w + i
					target, isWarm := cold[n%len(cold)], false
					if n%2 == 0 {
						target, isWarm = warm[n%len(warm)], true
					}
					status, h, body, err := tryRequest(http.MethodGet, in.base+target, "Authorization", tok)
					switch {
					case err != nil:
						t.Errorf("replica %d: %s: %v", r, target, err)
					case isWarm && (status != 200 || !stale(h)):
						t.Errorf("replica %d: warm %s: %d %q %s; want 200, stale", r, target, status, h.Get("Cache-Status"), body)
					case !isWarm && (status != 503 || h.Get("Retry-After") == "" ||
						!strings.HasPrefix(string(body), `{"_status":"ERR","_error":{"code":503,"message":`)):
						t.Errorf("replica %d: cold %s: %d Retry-After %q %s; want the 503 envelope", r, target, status, h.Get("Retry-After"), body)
					case isWarm:
						count("warm stale")
					default:
						count("cold 503")
					}
					if err := degradedButReady(in.ops); err != nil {
						t.Errorf("replica %d under load: %v", r, err)
					} else {
						count("ready")
					}
				}
			})
		}
	}
	wg.Wait()
	t.Logf("with every backend down, over %d replicas: %v", len(fleet), counts)
	if want := len(fleet) * workers * rounds; counts["ready"] != want || counts["warm stale"]+counts["cold 503"] != want {
		t.Errorf("answers %v, want %d of each", counts, want)
	}
}

// degradedButReady asks a replica's /readyz (on its operator listener,
// ops) and reports unless it is 200, degraded, with MongoDB and
// Elasticsearch failing.
func degradedButReady(ops string) error {
	status, _, body, err := tryRequest(http.MethodGet, ops+"/readyz")
	if err != nil {
		return err
	}
	var r struct {
		Status string
		Checks map[string]string
	}
	if err := json.Unmarshal(body, &r); err != nil || status != 200 || r.Status != "degraded" ||
		r.Checks["mongo"] == "ok" || r.Checks["elastic"] == "ok" {
		return fmt.Errorf("/readyz: %d %s; want 200, degraded, mongo and elastic failing", status, body)
	}
	return nil
}
