// Command prodapi-bench is prodapi's load harness (`make bench`). It
// starts the service as a subprocess on the sandbox's sample newsroom
// (PRODAPI_SANDBOX_LATENCY models the platform's cost per query), a
// redis-server for the Redis scenarios, and a bare net/http server that
// replays, byte for byte and header for header, what prodapi answered for
// each URL of a scenario. It drives both over loopback with keep-alive
// connections, alternating between them in short slices so that both see
// the same machine, and prints a Markdown report: requests/s, p50/p99
// latency, errors, backend queries per request, cache outcomes, and
// prodapi's throughput as a ratio of the bare server's.
//
// Usage:
//
//	go build -o bin/prodapi ./cmd/prodapi && go run ./cmd/prodapi-bench -prodapi bin/prodapi
//
// Scenarios (-scenarios picks some):
//
//	wrk         wrk (C) pinned to one core, servers to the other, then
//	            floating: bare, prodapi in-process and Redis hits,
//	            in-process hits with invalidation on, the Redis floor (the
//	            bare server with one go-redis GET per request), nginx
//	            proxy_cache and Varnish in front of the bare server, on an
//	            item detail and the 25-item list; requests/s and the
//	            server's CPU time per request from /proc; with
//	            -wrk-together every server's slice runs at the same time
//	hit-local   in-process tier hits on the 41 item details (no Redis)
//	hit-redis   Redis hits: the in-process tier off, every hit a GET
//	miss        a new key every request (a 10-item list), backend latency
//	stale       entries past freshness, served while a slow refresh runs
//	zipf        item details and a dozen lists, Zipf-distributed, with the
//	            default TTLs: mostly hits, some expiring during the run
//	stampede    many concurrent requests on one cold key (and 10 keys at
//	            once): backend queries must be the cost of one load per key
//	sigterm     SIGTERM during a mixed load: no accepted request may fail
//	redis-kill  misses one at a time without Redis, with Redis up, then
//	            right after redis-server is SIGKILLed: what Redis dying
//	            costs a miss, against the Redis budget (50ms)
//
// The whole run takes about two minutes with the defaults.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/sources"
)

type options struct {
	prodapi      string
	redisServer  string
	latency      time.Duration
	staleLatency time.Duration
	conns        int
	rate         float64
	slice        time.Duration
	rounds       int
	stampede     int
	zipfS        float64
	scenarios    []string
	out          string
	wrkConns     int
	wrkOnly      string // comma-separated servers to measure, beside bare; empty: all
	wrkTogether  bool   // wrk: every server's slice at the same time, not one after another
	baseline     string
	baselineVars map[string]string // the baseline's settings on top of the scenario's
}

var allScenarios = []string{"wrk", "hit-local", "hit-redis", "miss", "stale", "zipf", "stampede", "sigterm", "redis-kill"}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "prodapi-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("prodapi-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.prodapi, "prodapi", "bin/prodapi", "the prodapi binary to measure")
	fs.StringVar(&o.redisServer, "redis-server", "redis-server", "redis-server binary (Redis scenarios are skipped without it)")
	fs.DurationVar(&o.latency, "latency", 20*time.Millisecond, "PRODAPI_SANDBOX_LATENCY: the backend's cost per query")
	fs.DurationVar(&o.staleLatency, "stale-latency", time.Second, "backend latency of the stale scenario, so that refreshes are slow")
	fs.StringVar(&o.baseline, "baseline", "", "wrk and redis-kill scenarios: also measure this prodapi binary (e.g. main's), as baseline-local and baseline-redis (wrk) or baseline (redis-kill), in the same run")
	baselineVars := fs.String("baseline-vars", "", "settings the -baseline binary runs with on top of each scenario's, comma-separated NAME=value (e.g. PRODAPI_RATE_LIMIT=off: the same binary with its limiter off)")
	fs.IntVar(&o.wrkConns, "wrk-c", 64, "wrk scenario: connections wrk keeps open")
	fs.StringVar(&o.wrkOnly, "wrk-only", "", "wrk scenario: measure only these servers (comma-separated, e.g. prodapi-local,baseline-local) beside bare")
	fs.BoolVar(&o.wrkTogether, "wrk-together", false, "wrk scenario: run each round's slice on every server at the same time (one wrk each), so that they share the CPU and whatever else the machine runs: ratios hold on a busy machine; a redis-server's CPU counts for every server that uses it")
	fs.IntVar(&o.conns, "c", 32, "concurrent connections (closed loop: requests in flight)")
	fs.Float64Var(&o.rate, "rate", 0, "open loop: requests/s offered to each server, latency measured from the scheduled time (0: closed loop)")
	fs.DurationVar(&o.slice, "slice", time.Second, "length of one measured slice")
	fs.IntVar(&o.rounds, "rounds", 6, "slices per server and scenario, alternating prodapi and bare")
	fs.IntVar(&o.stampede, "stampede", 500, "concurrent requests on one cold key")
	fs.Float64Var(&o.zipfS, "zipf-s", 1.1, "Zipf exponent of the mix (> 1)")
	scen := fs.String("scenarios", strings.Join(allScenarios, ","), "comma-separated scenarios to run")
	fs.StringVar(&o.out, "o", "", "also write the report to this file")
	bare := fs.String("bare", "", "internal: serve the responses in this file as the bare server")
	bareRedis := fs.String("bare-redis", "", "internal: with -bare, read each body from this Redis (host:port) per request")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bare != "" {
		return serveBare(ctx, *bare, *bareRedis, stdout)
	}
	if *baselineVars != "" {
		o.baselineVars = map[string]string{}
		for kv := range strings.SplitSeq(*baselineVars, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return fmt.Errorf("-baseline-vars: %q is not NAME=value", kv)
			}
			o.baselineVars[k] = v
		}
	}
	for s := range strings.SplitSeq(*scen, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(allScenarios, s) {
			return fmt.Errorf("unknown scenario %q (known: %s)", s, strings.Join(allScenarios, ", "))
		}
		o.scenarios = append(o.scenarios, s)
	}
	if o.conns < 1 || o.wrkConns < 1 || o.rounds < 1 || o.slice <= 0 || o.zipfS <= 1 || o.stampede < 1 {
		return errors.New("-c, -wrk-c, -rounds, -slice and -stampede must be positive and -zipf-s above 1")
	}
	if _, err := os.Stat(o.prodapi); err != nil {
		return fmt.Errorf("the prodapi binary: %w (build it: go build -o bin/prodapi ./cmd/prodapi)", err)
	}
	if p, err := exec.LookPath(o.redisServer); err == nil {
		o.redisServer = p
	} else {
		o.redisServer = ""
	}

	h, err := newHarness(ctx, o, stderr)
	if err != nil {
		return err
	}
	rep, err := h.run(ctx)
	h.close(err != nil)
	if rep != nil {
		text := rep.markdown()
		fmt.Fprint(stdout, text)
		if o.out != "" {
			if werr := os.WriteFile(o.out, []byte(text), 0o644); werr != nil {
				err = errors.Join(err, werr)
			}
		}
	}
	return err
}

// A harness holds what every scenario shares: the secret, tokens, a
// scratch directory for logs and captured responses, and Redis.
type harness struct {
	o       options
	log     io.Writer // progress, on stderr
	secret  string
	token   string // Authorization value with every scope
	dir     string
	redis   *redisProc // nil without redis-server
	runID   string     // makes this run's miss keys new
	started time.Time
}

func newHarness(ctx context.Context, o options, log io.Writer) (*harness, error) {
	var b [19]byte
	rand.Read(b[:])
	h := &harness{o: o, log: log, secret: hex.EncodeToString(b[:16]), runID: hex.EncodeToString(b[16:]), started: time.Now()}
	tok, err := server.MintToken([]byte(h.secret), "prodapi-bench", sources.AllScopes, 24*time.Hour, time.Now())
	if err != nil {
		return nil, err
	}
	h.token = "Bearer " + tok
	if h.dir, err = os.MkdirTemp("", "prodapi-bench-"); err != nil {
		return nil, err
	}
	if o.redisServer != "" {
		if h.redis, err = startRedis(ctx, o.redisServer, h.dir); err != nil {
			h.close(false)
			return nil, err
		}
	}
	return h, nil
}

// close stops Redis and removes the scratch directory, or, to keep
// prodapi's logs for a look, names it.
func (h *harness) close(keep bool) {
	if h.redis != nil {
		h.redis.stop()
	}
	switch {
	case h.dir == "":
	case keep:
		h.progress("logs and captured responses kept in %s", h.dir)
	default:
		os.RemoveAll(h.dir)
	}
}

func (h *harness) progress(format string, args ...any) {
	fmt.Fprintf(h.log, "[%5.1fs] %s\n", time.Since(h.started).Seconds(), fmt.Sprintf(format, args...))
}

// run runs the selected scenarios and returns the report, complete with
// what ran even when a scenario failed.
func (h *harness) run(ctx context.Context) (*report, error) {
	rep := newReport(h)
	var errs []error
	want := func(s string) bool { return slices.Contains(h.o.scenarios, s) }
	for _, s := range []struct {
		name string
		run  func(context.Context, *report) error
	}{
		{"wrk", h.wrkScenario},
		{"hit-local", h.hitLocal},
		{"hit-redis", h.hitRedis},
		{"miss+zipf+stampede+sigterm", h.production},
		{"stale", h.stale},
		{"redis-kill", h.redisKill},
	} {
		if ctx.Err() != nil {
			break
		}
		names := strings.Split(s.name, "+")
		if !slices.ContainsFunc(names, want) {
			continue
		}
		if err := s.run(ctx, rep); err != nil {
			h.progress("%s: %v", s.name, err)
			errs = append(errs, fmt.Errorf("%s: %w", s.name, err))
			rep.failures = append(rep.failures, fmt.Sprintf("%s: %v", s.name, err))
		}
	}
	rep.finish()
	for _, s := range rep.stampedes {
		if !s.ok() {
			errs = append(errs, fmt.Errorf("stampede (%s): %.0f backend queries, want %.0f", s.describe(), s.queries, float64(s.keys)*s.loadCost))
		}
	}
	if rep.sigterm != nil && !rep.sigterm.passed() {
		errs = append(errs, errors.New("SIGTERM under load: see the report"))
	}
	for _, res := range rep.results {
		if n := res.prod.failed() + res.bare.failed(); n > 0 {
			errs = append(errs, fmt.Errorf("%s: %d requests failed", res.name, n))
		}
	}
	return rep, errors.Join(errs...)
}
