package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// lists are the dozen list queries of the Zipf mix: the resources'
// first pages and the searches a newsroom's site would run.
var lists = []string{
	"/prodapi/v1/items",
	"/prodapi/v1/items?max_results=10",
	"/prodapi/v1/items?page=2",
	"/prodapi/v1/items?q=marathon",
	"/prodapi/v1/items?source=" + url.QueryEscape(`{"query":{"term":{"type":"picture"}},"size":10}`),
	"/prodapi/v1/items?source=" + url.QueryEscape(`{"query":{"bool":{"filter":[{"term":{"state":"published"}}]}},"sort":[{"versioncreated":"desc"}],"size":20}`),
	"/prodapi/v1/desks",
	"/prodapi/v1/users",
	"/prodapi/v1/planning",
	"/prodapi/v1/events",
	"/prodapi/v1/contacts",
	"/prodapi/v1/assignments",
}

// missTarget is a list of ten items nobody asked for before: a must_not
// clause on an id nothing has. Every such list holds the same items;
// only the nonce in its links differs.
func missTarget(run, nonce string) string {
	source := `{"query":{"bool":{"must_not":[{"term":{"_id":"bench-` + run + `-` + nonce + `"}}]}}}`
	return "/prodapi/v1/items?max_results=10&source=" + url.QueryEscape(source)
}

// A result is one throughput scenario: prodapi and the bare server,
// each over the same rounds.
type result struct {
	name       string
	what       string
	prod, bare *slice
	ratios     []float64      // per round
	queries    float64        // backend queries per prodapi request
	outcomes   map[string]int // prodapi's cache outcomes (its /metrics)
	redisGets  float64        // per prodapi request; -1 when not measured
}

func (r *result) ratio() float64 {
	if r.bare.rps() == 0 {
		return 0
	}
	return r.prod.rps() / r.bare.rps()
}

// compare warms both servers, then runs rounds slices on each,
// alternating which goes first, and reads prodapi's backend queries (and
// Redis's GETs) over the whole measured time.
func (h *harness) compare(ctx context.Context, name, what string, p *prodapiProc, bare *bareProc, t targets) (*result, error) {
	prod := &load{base: p.base, client: newClient(h.o.conns), token: h.token, conns: h.o.conns, rate: h.o.rate, seed: 1}
	bl := &load{base: bare.base, client: newClient(h.o.conns), token: h.token, conns: h.o.conns, rate: h.o.rate, seed: 1}
	warm := min(h.o.slice, time.Second)
	prod.run(ctx, warm, t)
	bl.run(ctx, warm/2, t)

	r := &result{name: name, what: what, prod: &slice{}, bare: &slice{}, redisGets: -1}
	c0, err := p.counters(ctx)
	if err != nil {
		return nil, err
	}
	var g0 float64
	if r.name == "hit-redis" {
		if g0, err = h.redis.gets(ctx); err != nil {
			return nil, err
		}
	}
	for i := range h.o.rounds {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var ps, bs *slice
		if i%2 == 0 {
			ps = prod.run(ctx, h.o.slice, t)
			bs = bl.run(ctx, h.o.slice, t)
		} else {
			bs = bl.run(ctx, h.o.slice, t)
			ps = prod.run(ctx, h.o.slice, t)
		}
		r.prod.add(ps)
		r.bare.add(bs)
		if bs.rps() > 0 {
			r.ratios = append(r.ratios, ps.rps()/bs.rps())
		}
	}
	c1, err := p.counters(ctx)
	if err != nil {
		return nil, err
	}
	if r.prod.requests > 0 {
		r.queries = (c1.queries - c0.queries) / float64(r.prod.requests)
	}
	r.outcomes = map[string]int{}
	for o, v := range c1.outcomes {
		if d := int(v - c0.outcomes[o]); d > 0 {
			r.outcomes[o] = d
		}
	}
	if r.name == "hit-redis" {
		g1, err := h.redis.gets(ctx)
		if err != nil {
			return nil, err
		}
		r.redisGets = (g1 - g0) / float64(r.prod.requests)
	}
	h.progress("%s: prodapi %.0f req/s, bare %.0f req/s, ratio %.2f, %d failed", name, r.prod.rps(), r.bare.rps(), r.ratio(), r.prod.failed()+r.bare.failed())
	return r, nil
}

// capture requests target from prodapi as the load does and keeps the
// response for the bare server.
func (h *harness) capture(ctx context.Context, p *prodapiProc, target string) (*captured, error) {
	req := newRequest(p.base+target, h.token)
	res, err := p.client.Do(req.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	header := res.Header.Clone()
	header.Del("Date") // net/http writes its own
	return &captured{Status: res.StatusCode, Header: header, Body: body}, nil
}

// captureAll captures every target, checking that prodapi answered 200
// and, when want is set, that its Cache-Status says so (Redis writes are
// asynchronous: a target is asked again until it does, for ten seconds).
func (h *harness) captureAll(ctx context.Context, p *prodapiProc, list []string, want string) (*bareSet, error) {
	set := &bareSet{Responses: map[string]*captured{}, Fallback: list[0]}
	deadline := time.Now().Add(10 * time.Second)
	for _, t := range list {
		for {
			c, err := h.capture(ctx, p, t)
			if err != nil {
				return nil, err
			}
			if c.Status != http.StatusOK {
				return nil, fmt.Errorf("GET %s: %d %s", t, c.Status, tail(c.Body, 300))
			}
			if want == "" || outcomeOf(c.Header.Get("Cache-Status")) == want || want == "stale" && staleInItsFirstSecond(c.Header.Get("Cache-Status")) {
				set.Responses[t] = c
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("GET %s: Cache-Status %q, want %s", t, c.Header.Get("Cache-Status"), want)
			}
		}
	}
	return set, nil
}

// staleInItsFirstSecond reports a Cache-Status of an entry that may be
// less than a second past its freshness: its ttl (whole seconds,
// truncated) is 0, as for a fresh entry with less than a second left.
// With PRODAPI_CACHE_TTL=1ns, every entry is stale.
func staleInItsFirstSecond(cs string) bool { return strings.HasSuffix(cs, "; hit; ttl=0") }

// warmAll requests every target once, concurrently.
func (h *harness) warmAll(ctx context.Context, p *prodapiProc, list []string) error {
	errs := make([]error, len(list))
	var wg sync.WaitGroup
	for i, t := range list {
		wg.Go(func() { _, errs[i] = h.capture(ctx, p, t) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// itemDetails lists the detail URL of every item of the newsroom.
func (h *harness) itemDetails(ctx context.Context, p *prodapiProc) ([]string, error) {
	req := newRequest(p.base+"/prodapi/v1/items?max_results=500&source="+url.QueryEscape(`{"_source":["_id"]}`), h.token)
	req.Header.Del("Accept-Encoding")
	res, err := p.client.Do(req.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	var list struct {
		Items []struct {
			ID string `json:"_id"`
		} `json:"_items"`
	}
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil || res.StatusCode != 200 || len(list.Items) == 0 {
		return nil, fmt.Errorf("listing the items: %d %v", res.StatusCode, err)
	}
	var out []string
	for _, it := range list.Items {
		out = append(out, "/prodapi/v1/items/"+url.PathEscape(it.ID))
	}
	return out, nil
}

// hitScenario measures cache answers on the item details of a prodapi
// started with vars: warmed, then each captured with the cache outcome
// the scenario expects ("hit" or "stale").
func (h *harness) hitScenario(ctx context.Context, rep *report, name, outcome, what string, vars map[string]string) (err error) {
	p, err := h.startProdapi(name, vars)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, p.shutdown()) }()
	details, err := h.itemDetails(ctx, p)
	if err != nil {
		return err
	}
	if err := h.warmAll(ctx, p, details); err != nil {
		return err
	}
	set, err := h.captureAll(ctx, p, details, outcome)
	if err != nil {
		return err
	}
	bare, err := h.startBare(name, set, "")
	if err != nil {
		return err
	}
	defer bare.stop(5 * time.Second)
	r, err := h.compare(ctx, name, what, p, bare, uniform(details))
	if err != nil {
		return err
	}
	rep.results = append(rep.results, r)
	return nil
}

func (h *harness) hitLocal(ctx context.Context, rep *report) error {
	return h.hitScenario(ctx, rep, "hit-local", "hit",
		"in-process hits, 41 item details, uniformly; no Redis, PRODAPI_CACHE_TTL=1h",
		map[string]string{"PRODAPI_CACHE_TTL": "1h"})
}

func (h *harness) hitRedis(ctx context.Context, rep *report) error {
	if h.redis == nil {
		rep.skipped = append(rep.skipped, "hit-redis: redis-server not found")
		return nil
	}
	return h.hitScenario(ctx, rep, "hit-redis", "hit",
		"Redis hits, 41 item details, uniformly; PRODAPI_CACHE_LOCAL_BYTES=-1 (in-process tier off), PRODAPI_CACHE_TTL=1h",
		map[string]string{"PRODAPI_CACHE_TTL": "1h", "REDIS_URL": h.redis.url(0), "PRODAPI_CACHE_LOCAL_BYTES": "-1"})
}

// stale serves every item detail past its freshness: TTL 1ns, a stale
// window of an hour, and a backend slow enough that each key's refresh
// is under way for most of the run.
func (h *harness) stale(ctx context.Context, rep *report) error {
	return h.hitScenario(ctx, rep, "stale", "stale",
		fmt.Sprintf("stale hits (refresh under way), 41 item details; PRODAPI_CACHE_TTL=1ns, PRODAPI_CACHE_STALE=1h, backend latency %s, no Redis", h.o.staleLatency),
		map[string]string{"PRODAPI_CACHE_TTL": "1ns", "PRODAPI_CACHE_STALE": "1h", "PRODAPI_SANDBOX_LATENCY": h.o.staleLatency.String()})
}

// production runs the scenarios that want prodapi as it is deployed:
// Redis and the in-process tier, the default TTLs (10s lists, 60s
// details, 5m desks and users) and stale window, and backend latency:
// misses, the stampede, the Zipf mix, then SIGTERM, which ends it.
func (h *harness) production(ctx context.Context, rep *report) (err error) {
	vars := map[string]string{}
	if h.redis != nil {
		vars["REDIS_URL"] = h.redis.url(1)
	} else {
		rep.skipped = append(rep.skipped, "miss, zipf, stampede and sigterm ran without Redis: redis-server not found")
	}
	p, err := h.startProdapi("production", vars)
	if err != nil {
		return err
	}
	stopped := false
	defer func() {
		if !stopped {
			err = errors.Join(err, p.shutdown())
		}
	}()
	details, err := h.itemDetails(ctx, p)
	if err != nil {
		return err
	}
	want := func(s string) bool { return slices.Contains(h.o.scenarios, s) }
	var nonce atomic.Int64
	newMiss := func() string { return missTarget(h.runID, strconv.FormatInt(nonce.Add(1), 10)) }

	if want("miss") {
		if err := h.missScenario(ctx, rep, p, newMiss); err != nil {
			return err
		}
	}
	if want("stampede") {
		for _, shape := range []struct{ keys, perKey int }{{1, h.o.stampede}, {10, max(1, h.o.stampede/5)}} {
			s, err := h.stampede(ctx, p, shape.keys, shape.perKey, newMiss)
			if err != nil {
				return err
			}
			rep.stampedes = append(rep.stampedes, s)
		}
	}
	// The mix: item details and lists, in a popularity order shuffled
	// once (the same every run).
	mix := append(append([]string{}, details...), lists...)
	rand.New(rand.NewPCG(7, 11)).Shuffle(len(mix), func(i, j int) { mix[i], mix[j] = mix[j], mix[i] })
	if want("zipf") {
		if err := h.zipfScenario(ctx, rep, p, mix); err != nil {
			return err
		}
	}
	if want("sigterm") {
		stopped = true
		s, err := h.sigterm(ctx, p, mix, newMiss)
		if err != nil {
			return err
		}
		rep.sigterm = s
	}
	return nil
}

func (h *harness) missScenario(ctx context.Context, rep *report, p *prodapiProc, newMiss func() string) error {
	first := newMiss()
	set, err := h.captureAll(ctx, p, []string{first}, "miss")
	if err != nil {
		return err
	}
	bare, err := h.startBare("miss", set, "")
	if err != nil {
		return err
	}
	defer bare.stop(5 * time.Second)
	t := targets{newPicker: func(int, *rand.Rand) picker { return newMiss }}
	r, err := h.compare(ctx, "miss", fmt.Sprintf("a new key every request: a 10-item list (about 30 KB, 4 backend queries); backend latency %s; Redis and in-process tiers", h.o.latency), p, bare, t)
	if err != nil {
		return err
	}
	rep.results = append(rep.results, r)
	return nil
}

func (h *harness) zipfScenario(ctx context.Context, rep *report, p *prodapiProc, mix []string) error {
	// A first pass fills the cache as traffic would; then every target
	// is captured (and the rare ones loaded) for the bare server.
	prod := &load{base: p.base, client: newClient(h.o.conns), token: h.token, conns: h.o.conns, seed: 99}
	prod.run(ctx, h.o.slice, zipf(mix, h.o.zipfS))
	set, err := h.captureAll(ctx, p, mix, "")
	if err != nil {
		return err
	}
	bare, err := h.startBare("zipf", set, "")
	if err != nil {
		return err
	}
	defer bare.stop(5 * time.Second)
	r, err := h.compare(ctx, "zipf", fmt.Sprintf("%d item details and %d lists, Zipf s=%.2g; default TTLs (10s lists, 60s details, 5m desks/users), stale window 15m; backend latency %s; Redis and in-process tiers",
		len(mix)-len(lists), len(lists), h.o.zipfS, h.o.latency), p, bare, zipf(mix, h.o.zipfS))
	if err != nil {
		return err
	}
	rep.results = append(rep.results, r)
	return nil
}

func hostOf(base string) string { return strings.TrimPrefix(base, "http://") }
