package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The redis-kill scenario measures what Redis dying costs a miss. prodapi
// runs once without Redis and once on a redis-server of the scenario's
// own; it answers redisKillMisses misses one at a time (a 10-item list
// with a nonce each: no load is shared) with Redis up, then the harness
// SIGKILLs redis-server by PID and sends the same number of misses at
// once, one at a time, as a replica at low traffic sees them (the
// processes are warmed up by a miss first; after the kill, every miss
// counts). A miss
// whose Redis calls share one budget (PRODAPI's Redis timeout, 50ms)
// costs at most that much more after the kill than without Redis; the
// breaker opens within a few misses, after which misses make no Redis
// call at all.
const (
	redisKillMisses = 20
	redisBudget     = 50 * time.Millisecond // the Redis tier's Timeout
)

// A killRun is one binary's misses: without Redis, with Redis up, and
// right after its Redis was killed.
type killRun struct {
	name              string
	alone, up, killed []time.Duration // in the order sent
	breaker           string          // prodapi_cache_redis_breaker_state at the end
}

func (h *harness) redisKill(ctx context.Context, rep *report) error {
	if h.o.redisServer == "" {
		rep.skipped = append(rep.skipped, "redis-kill: redis-server not found")
		return nil
	}
	bins := []struct{ name, path string }{{"prodapi", h.o.prodapi}}
	if h.o.baseline != "" {
		bins = append(bins, struct{ name, path string }{"baseline", h.o.baseline})
	}
	for _, b := range bins {
		run, err := h.killRun(ctx, b.name, b.path)
		if err != nil {
			return err
		}
		rep.kills = append(rep.kills, run)
	}
	return nil
}

func (h *harness) killRun(ctx context.Context, name, bin string) (run *killRun, err error) {
	run = &killRun{name: name}
	var nonce int
	// With warm, a first miss warms the process (and its Redis
	// connection) up, and is not counted.
	misses := func(p *prodapiProc, warm bool) ([]time.Duration, error) {
		var lat []time.Duration
		for range redisKillMisses + 1 {
			nonce++
			d, err := h.timedMiss(p, missTarget(h.runID, name+"-kill-"+strconv.Itoa(nonce)))
			if err != nil {
				return nil, err
			}
			lat = append(lat, d)
		}
		if warm {
			return lat[1:], nil
		}
		return lat[:redisKillMisses], nil
	}

	alone, err := h.startProdapiBinary(bin, name+"-alone", nil)
	if err != nil {
		return nil, err
	}
	run.alone, err = misses(alone, true)
	if serr := alone.shutdown(); err == nil {
		err = serr
	}
	if err != nil {
		return nil, err
	}

	r, err := startRedis(ctx, h.o.redisServer, h.dir)
	if err != nil {
		return nil, err
	}
	defer r.stop() // already dead: stop reaps it
	p, err := h.startProdapiBinary(bin, name+"-redis", map[string]string{"REDIS_URL": r.url(0)})
	if err != nil {
		return nil, err
	}
	defer func() {
		if serr := p.shutdown(); err == nil {
			err = serr
		}
	}()
	if run.up, err = misses(p, true); err != nil {
		return nil, err
	}
	h.progress("%s: SIGKILL redis-server (pid %d)", name, r.cmd.Process.Pid)
	r.cmd.Process.Kill() // SIGKILL
	<-r.exited
	if run.killed, err = misses(p, false); err != nil {
		return nil, err
	}
	run.breaker, err = p.metric(ctx, "prodapi_cache_redis_breaker_state")
	return run, err
}

// timedMiss sends one request and times it to the end of its body; it
// must be a 200 miss.
func (h *harness) timedMiss(p *prodapiProc, target string) (time.Duration, error) {
	start := time.Now()
	res, err := p.client.Do(newRequest(p.base+target, h.token))
	if err != nil {
		return 0, err
	}
	_, err = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	d := time.Since(start)
	if err != nil {
		return 0, err
	}
	if cs := res.Header.Get("Cache-Status"); res.StatusCode != http.StatusOK || outcomeOf(cs) != "miss" {
		return 0, fmt.Errorf("a miss answered %d, Cache-Status %q", res.StatusCode, cs)
	}
	return d, nil
}

// metric reads one series without labels from /metrics.
func (p *prodapiProc) metric(ctx context.Context, name string) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.ops+"/metrics", nil)
	res, err := p.client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v, nil
		}
	}
	return "", sc.Err()
}

// killMarkdown writes the redis-kill table.
func (r *report) killMarkdown(b *strings.Builder) {
	if len(r.kills) == 0 {
		return
	}
	fmt.Fprintf(b, "| redis-kill (%d misses each, one at a time) | p50 / p99 / max | the first 5 after the kill | after the kill: p50 / max − p50 without Redis | budget | breaker at the end |\n", redisKillMisses)
	b.WriteString("|---|---|---|---|--:|--:|\n")
	for _, k := range r.kills {
		first := make([]string, 0, 5)
		for _, d := range k.killed[:min(5, len(k.killed))] {
			first = append(first, fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)))
		}
		fmt.Fprintf(b, "| %s without Redis | %s | | | | |\n", k.name, spread(k.alone))
		fmt.Fprintf(b, "| %s with Redis up | %s | | | | |\n", k.name, spread(k.up))
		fmt.Fprintf(b, "| %s after SIGKILL of redis-server | %s | %s ms | %s / %s | %s | %s |\n", k.name, spread(k.killed),
			strings.Join(first, ", "), ms(percentileOf(k.killed, 0.5)-percentileOf(k.alone, 0.5)),
			ms(percentileOf(k.killed, 1)-percentileOf(k.alone, 0.5)), ms(redisBudget), k.breaker)
	}
	b.WriteString("\nEach miss is a new 10-item list (its own key), sent alone; times are to the end of the body. The target: a miss after Redis dies costs at most the budget more than one without Redis.\n\n")
}

// spread is the p50, p99 and max of lat.
func spread(lat []time.Duration) string {
	return fmt.Sprintf("%s / %s / %s", ms(percentileOf(lat, 0.5)), ms(percentileOf(lat, 0.99)), ms(percentileOf(lat, 1)))
}

func percentileOf(lat []time.Duration, p float64) time.Duration {
	s := slice{lat: append([]time.Duration(nil), lat...)}
	return s.percentile(p)
}
