package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/realserver"
	"github.com/prodapi/prodapi/test/testkit"
)

// clientToken is a token of client_id client with every scope.
func clientToken(t testing.TB, client string) string {
	t.Helper()
	tok, err := server.MintToken([]byte(devSecret), client, sources.AllScopes, time.Hour, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + tok
}

// defaultLimits undoes start's: the fair share as it ships.
var defaultLimits = []string{"PRODAPI_RATE_LIMIT", "", "PRODAPI_RATE_LIMIT_ADDR", "", "PRODAPI_CLIENT_MAX_LOADS", ""}

// As it ships, the fair share is on: every answer says the client's
// policy and what is left, and its series exist at 0.
func TestFairShareByDefault(t *testing.T) {
	in := start(t, defaultLimits...)
	status, h, _ := in.get(t, "/prodapi/v1/items?max_results=1", clientToken(t, "reader"))
	if status != 200 || h.Get("Ratelimit-Policy") != `"client";q=600;w=1` || !strings.HasPrefix(h.Get("Ratelimit"), `"client";r=`) {
		t.Errorf("%d, RateLimit-Policy %q, RateLimit %q", status, h.Get("Ratelimit-Policy"), h.Get("Ratelimit"))
	}
	if status, h, _ := in.get(t, "/prodapi/v1/items", "Bearer forged"); status != 401 || h.Get("Ratelimit-Policy") != `"address";q=50;w=1` {
		t.Errorf("a forged token: %d, RateLimit-Policy %q", status, h.Get("Ratelimit-Policy"))
	}
	_, _, body := in.getOps(t, "/metrics")
	for _, series := range []string{`prodapi_rate_limited_total{client="other"} 0`, `prodapi_cap_refusals_total{cap="client_loads"} 0`} {
		if !strings.Contains(string(body), series) {
			t.Errorf("/metrics lacks %s", series)
		}
	}
}

// While the fleet's counts in Redis cannot be reached, each replica
// limits alone, and /readyz says so.
func TestReadyzSaysLimitsCountAlone(t *testing.T) {
	rs := realserver.StartRedis(t, 0)
	in := start(t, append(slices.Clone(defaultLimits), "REDIS_URL", rs.URL())...)
	auth := clientToken(t, "reader")
	readyz := func() (checks, notes map[string]string) {
		_, _, body := in.getOps(t, "/readyz")
		var r struct {
			Checks map[string]string `json:"checks"`
			Notes  map[string]string `json:"notes"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatalf("/readyz: %v: %s", err, body)
		}
		return r.Checks, r.Notes
	}
	if checks, notes := readyz(); checks["rate_limits"] != "ok" || notes["rate_limits"] != "" {
		t.Fatalf("with Redis: %v %v", checks, notes)
	}
	rs.Kill()
	testkit.Eventually(t, "/readyz to say the limits count alone", func() bool {
		in.get(t, "/prodapi/v1/items?max_results=1", auth) // something to charge the fleet
		checks, notes := readyz()
		return checks["rate_limits"] == "unavailable" && strings.Contains(notes["rate_limits"], "each replica alone")
	})
	// Limits still hold: the requests above were admitted, with the headers.
	if status, h, _ := in.get(t, "/prodapi/v1/items?max_results=1", auth); status != 200 || h.Get("Ratelimit") == "" {
		t.Errorf("counting alone: %d, RateLimit %q", status, h.Get("Ratelimit"))
	}
}

// A flood from one client on two replicas sharing a real redis-server:
// 32 loops of distinct queries, while a second client reads a cached
// detail and a cached list every 50ms. The calm client gets no error;
// the flood gets 429s with the headers, and its backend loads stay
// within what its limit pays for: a limit per hour, so that nothing
// here depends on how long the flood lasts.
func TestFloodLeavesOthersAlone(t *testing.T) {
	rs := realserver.StartRedis(t, 0)
	const floodLimit, missCost = 110, 10 // ten loads an hour, and the requests that carry them
	vars := append(slices.Clone(defaultLimits), "REDIS_URL", rs.URL(), "PRODAPI_CACHE_TTL", "1h", "PRODAPI_SANDBOX_LATENCY", "2ms",
		"PRODAPI_RATE_LIMIT_CLIENTS", fmt.Sprintf("flood=%d/h", floodLimit), "PRODAPI_RATE_MISS_COST", fmt.Sprint(missCost))
	fleet := []*instance{start(t, vars...), start(t, vars...)}
	calm, flood := clientToken(t, "calm"), clientToken(t, "flood")
	detail := firstItemOf(t, fleet[0], calm)
	list := "/prodapi/v1/items?max_results=25"
	for _, in := range fleet { // warm: both replicas hold both answers
		for _, target := range []string{detail, list} {
			if status, _, body := in.get(t, target, calm); status != 200 {
				t.Fatalf("warming %s: %d %s", target, status, body)
			}
		}
	}

	var (
		stop            = make(chan struct{})
		mu              sync.Mutex
		statuses        = map[int]int{}
		loads, refusals int
		badRefusal      string
	)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	floods := floodFleet(fleet, client, flood, stop, func(res *http.Response) {
		mu.Lock()
		defer mu.Unlock()
		statuses[res.StatusCode]++
		switch {
		case res.StatusCode == 200 && strings.Contains(res.Header.Get("Cache-Status"), "fwd=miss"):
			loads++
		case res.StatusCode == 429:
			refusals++
			h := res.Header
			if h.Get("Retry-After") == "" || !strings.HasPrefix(h.Get("Ratelimit"), `"client";r=`) ||
				h.Get("Ratelimit-Policy") != fmt.Sprintf(`"client";q=%d;w=3600`, floodLimit) {
				badRefusal = fmt.Sprint(h)
			}
		}
	})
	// The calm client: a detail and a list on each replica every 50ms,
	// 40 rounds, the flood running all along.
	var calmErrors []string
	tick := time.NewTicker(50 * time.Millisecond)
	for round := range 40 {
		<-tick.C
		in := fleet[round%len(fleet)]
		for _, target := range []string{detail, list} {
			status, _, body, err := tryRequest(http.MethodGet, in.base+target, "Authorization", calm)
			if err != nil || status != 200 {
				calmErrors = append(calmErrors, fmt.Sprintf("round %d, %s: %d %v %.100s", round, target, status, err, body))
			}
		}
	}
	tick.Stop()
	close(stop)
	floods.Wait()

	for _, e := range calmErrors {
		t.Errorf("the calm client: %s", e)
	}
	if refusals == 0 || badRefusal != "" {
		t.Errorf("the flood: %d 429s (statuses %v); a 429 without the headers: %s", refusals, statuses, badRefusal)
	}
	// Each load is charged to Redis before it starts, all of its cost or
	// none: the limit pays for floodLimit/missCost loads, and the
	// requests' own cost of 1 only makes that fewer.
	if most := floodLimit / missCost; loads > most {
		t.Errorf("the flood made %d backend loads, more than its limit of %d/h pays for (%d)", loads, floodLimit, most)
	}
	t.Logf("flood: %v, %d loads; calm: %d rounds without error", statuses, loads, 40)
}

// floodFleet floods the replicas of fleet as the client of tok from 32
// loops, each sending distinct queries (every one a backend load, unless
// refused) to the replicas in turn until stop is closed, and hands each
// answer to seen, its body read. The loops are done when the WaitGroup
// is.
func floodFleet(fleet []*instance, client *http.Client, tok string, stop <-chan struct{}, seen func(*http.Response)) *sync.WaitGroup {
	var nonce atomic.Int64
	var floods sync.WaitGroup
	for i := range 32 {
		floods.Go(func() {
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				req, _ := http.NewRequest(http.MethodGet, fleet[(i+n)%len(fleet)].base+missTarget(nonce.Add(1)), nil)
				req.Header.Set("Authorization", tok)
				res, err := client.Do(req)
				if err != nil {
					continue // the flood's own client out of breath: not an answer
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				seen(res)
			}
		})
	}
	return &floods
}

// firstItemOf is the path of the newsroom's first item.
func firstItemOf(t testing.TB, in *instance, auth string) string {
	t.Helper()
	status, _, body, err := tryRequest(http.MethodGet, in.base+"/prodapi/v1/items?max_results=1", "Authorization", auth)
	var page struct {
		Items []struct {
			ID string `json:"_id"`
		} `json:"_items"`
	}
	if err != nil || status != 200 || json.Unmarshal(body, &page) != nil || len(page.Items) == 0 {
		t.Fatalf("the first item: %d %v %s", status, err, body)
	}
	return "/prodapi/v1/items/" + page.Items[0].ID
}

// BenchmarkCalmUnderFlood measures what a flood from one client costs
// another: two replicas on one redis-server; a calm client reads a
// cached detail and a cached list, a request every 5ms (200 a second,
// well within its limit), b.N times while nothing else runs, then b.N
// times while a second client floods both replicas with distinct queries
// from 32 loops, measured from the flood's 1000th answer. Reported: the
// calm client's p50 and p99 in each phase, the ratio of the p99s (the
// target: within 5×), and the flood's answers by kind. Sub-benchmarks:
// the fair share as it ships (the flood gets a load as often as its
// limit pays, 429s otherwise, held a second once it ignores their
// Retry-After), and off (every flood request a load). Everything, the
// flood's client too, runs in this process, on the same cores.
//
//	go test -run '^$' -bench CalmUnderFlood -benchtime 1000x ./cmd/prodapi
func BenchmarkCalmUnderFlood(b *testing.B) {
	for _, tc := range []struct {
		name   string
		limits []string
	}{
		{"limits", defaultLimits},
		{"no-limits", nil}, // start's: off
	} {
		b.Run(tc.name, func(b *testing.B) { calmUnderFlood(b, tc.limits) })
	}
}

func calmUnderFlood(b *testing.B, limits []string) {
	rs := realserver.StartRedis(b, 0)
	vars := append(slices.Clone(limits), "REDIS_URL", rs.URL(), "PRODAPI_CACHE_TTL", "1h", "PRODAPI_SANDBOX_LATENCY", "2ms",
		"PRODAPI_ACCESS_LOG_HITS", "0")
	fleet := []*instance{start(b, vars...), start(b, vars...)}
	calm, flood := clientToken(b, "calm"), clientToken(b, "flood")
	targets := []string{firstItemOf(b, fleet[0], calm), "/prodapi/v1/items?max_results=25"}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	read := func(i int) time.Duration {
		req, _ := http.NewRequest(http.MethodGet, fleet[i%2].base+targets[(i/2)%2], nil)
		req.Header.Set("Authorization", calm)
		start := time.Now()
		res, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		d := time.Since(start)
		if err != nil || res.StatusCode != 200 {
			b.Fatalf("the calm client: %d %v", res.StatusCode, err)
		}
		return d
	}
	for i := range 8 { // warm: both replicas hold both answers
		read(i)
	}
	phase := func() []time.Duration {
		lat := make([]time.Duration, b.N)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for i := range lat {
			<-tick.C
			lat[i] = read(i)
		}
		slices.Sort(lat)
		return lat
	}
	b.ResetTimer()
	quiet := phase()
	stop := make(chan struct{})
	var answers, loads, refused atomic.Int64
	floods := floodFleet(fleet, client, flood, stop, func(res *http.Response) {
		answers.Add(1)
		switch res.StatusCode {
		case http.StatusOK:
			loads.Add(1)
		case http.StatusTooManyRequests:
			refused.Add(1)
		}
	})
	for answers.Load() < 1000 {
		time.Sleep(time.Millisecond)
	}
	before := answers.Load()
	flooded := phase()
	during := answers.Load() - before
	close(stop)
	floods.Wait()
	b.StopTimer()
	p := func(lat []time.Duration, q float64) float64 {
		return float64(lat[min(len(lat)-1, int(float64(len(lat))*q))].Microseconds()) / 1000
	}
	b.ReportMetric(p(quiet, 0.5), "quiet-p50-ms")
	b.ReportMetric(p(quiet, 0.99), "quiet-p99-ms")
	b.ReportMetric(p(flooded, 0.5), "flood-p50-ms")
	b.ReportMetric(p(flooded, 0.99), "flood-p99-ms")
	b.ReportMetric(p(flooded, 0.99)/p(quiet, 0.99), "p99-ratio")
	b.ReportMetric(float64(during)/float64(b.N), "flood-answers/op")
	b.ReportMetric(float64(loads.Load()), "flood-200s")
	b.ReportMetric(float64(refused.Load()), "flood-429s")
}
