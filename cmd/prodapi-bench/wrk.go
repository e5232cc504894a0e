package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The wrk scenario measures with a load generator that does not share
// the Go runtime's cost: wrk (C, epoll), from Debian. It runs every
// server on one core and wrk on the other (taskset), then again with
// everything floating over both cores, and reports beside requests/s the
// server's own CPU time per request, read from /proc (utime+stime of the
// server and its children, over the requests wrk completed). That figure
// holds steady on a shared machine where requests/s does not.
//
// Servers, all serving the same bytes on loopback:
//
//	bare           net/http replaying prodapi's captured answers
//	prodapi-local  in-process hits (no Redis)
//	prodapi-redis  Redis hits (in-process tier off)
//	nginx          proxy_cache in front of the bare server
//	varnish        varnishd in front of the bare server
//
// A server whose program is missing (nginx, varnishd, redis-server) is
// left out and the report says so.

// wrkTargets are what the scenario asks for: an item detail and the
// 25-item list.
var wrkTargets = []struct{ name, target string }{
	{"item", ""}, // the first item detail, found at run time
	{"list25", "/prodapi/v1/items?max_results=25"},
}

// A wrkServer is one server under measurement: where to send requests
// and which process tree does the work.
type wrkServer struct {
	name   string
	base   string
	pid    int
	helper int // a process it needs, pinned with it, CPU counted apart (redis-server); 0 for none
}

// A wrkRow is one server, target and placement, summed over the rounds.
type wrkRow struct {
	server, target, placement string
	requests                  int64
	errors                    int64 // socket errors and non-2xx answers
	seconds                   float64
	cpu                       time.Duration // server CPU over the measured slices
	helperCPU                 time.Duration // its helper's (redis-server's)
	p50, p99                  []time.Duration
	rounds                    []float64       // requests/s per round
	cpuRounds                 []time.Duration // CPU per request per round
}

func (r *wrkRow) rps() float64 {
	if r.seconds == 0 {
		return 0
	}
	return float64(r.requests) / r.seconds
}

func (r *wrkRow) cpuPerRequest() time.Duration {
	if r.requests == 0 {
		return 0
	}
	return r.cpu / time.Duration(r.requests)
}

func (h *harness) wrkScenario(ctx context.Context, rep *report) (err error) {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		return errors.New("wrk not found: install it with `apt-get install -y wrk` (Debian) and run again")
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		return errors.New("taskset not found: install it with `apt-get install -y util-linux`")
	}
	var servers []*wrkServer
	local, err := h.startProdapi("wrk-local", map[string]string{"PRODAPI_CACHE_TTL": "1h"})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, local.shutdown()) }()
	details, err := h.itemDetails(ctx, local)
	if err != nil {
		return err
	}
	targets := map[string]string{}
	var list []string
	for _, t := range wrkTargets {
		if t.target == "" {
			t.target = details[0]
		}
		targets[t.name] = t.target
		list = append(list, t.target)
	}
	if err := h.warmAll(ctx, local, list); err != nil {
		return err
	}
	set, err := h.captureAll(ctx, local, list, "hit")
	if err != nil {
		return err
	}
	for _, t := range list {
		rep.wrkSizes = append(rep.wrkSizes, fmt.Sprintf("`%s`: %d B gzipped", t, len(set.Responses[t].Body)))
	}
	bare, err := h.startBare("wrk", set, "")
	if err != nil {
		return err
	}
	defer bare.stop(5 * time.Second)
	servers = append(servers, &wrkServer{name: "bare", base: bare.base, pid: bare.cmd.Process.Pid},
		&wrkServer{name: "prodapi-local", base: local.base, pid: local.cmd.Process.Pid})

	// addProdapi starts a prodapi binary as server name, warms it and
	// checks that it answers the targets from its cache.
	var started []*prodapiProc
	defer func() {
		for _, p := range started {
			err = errors.Join(err, p.shutdown())
		}
	}()
	addProdapi := func(bin, name string, vars map[string]string, helper int) error {
		p, err := h.startProdapiBinary(bin, "wrk-"+name, vars)
		if err != nil {
			return err
		}
		started = append(started, p)
		if err := h.warmAll(ctx, p, list); err != nil {
			return err
		}
		if _, err := h.captureAll(ctx, p, list, "hit"); err != nil {
			return err
		}
		servers = append(servers, &wrkServer{name: name, base: p.base, pid: p.cmd.Process.Pid, helper: helper})
		return nil
	}

	if h.redis != nil {
		redisPid := h.redis.cmd.Process.Pid
		if err := addProdapi(h.o.prodapi, "prodapi-redis", map[string]string{"PRODAPI_CACHE_TTL": "1h", "REDIS_URL": h.redis.url(2), "PRODAPI_CACHE_LOCAL_BYTES": "-1"}, redisPid); err != nil {
			return err
		}
		// Invalidation on: Redis for tags, generations and the
		// pub/sub subscription, the purge listener on; hits still come
		// from the in-process tier, so it compares with prodapi-local.
		if err := addProdapi(h.o.prodapi, "prodapi-inval", map[string]string{
			"PRODAPI_CACHE_TTL": "1h", "REDIS_URL": h.redis.url(4),
			"PRODAPI_ADMIN_ADDR": "127.0.0.1:0", "PRODAPI_ADMIN_SECRET": "a-benchmark-admin-secret-of-32-bytes",
		}, redisPid); err != nil {
			return err
		}

		// The floor of a Redis hit: the bare server, but each body read
		// with one go-redis GET per request.
		floor, err := h.startBare("wrk-floor", set, "127.0.0.1:"+h.redis.port)
		if err != nil {
			return err
		}
		defer floor.stop(5 * time.Second)
		servers = append(servers, &wrkServer{name: "floor-redis", base: floor.base, pid: floor.cmd.Process.Pid, helper: h.redis.cmd.Process.Pid})
	} else {
		rep.skipped = append(rep.skipped, "wrk: prodapi-redis left out: redis-server not found")
	}
	if h.o.baseline != "" {
		type variant struct{ name, redisURL string }
		variants := []variant{{"baseline-local", ""}}
		if h.redis != nil {
			variants = append(variants, variant{"baseline-redis", h.redis.url(3)})
		}
		for _, v := range variants {
			vars := map[string]string{"PRODAPI_CACHE_TTL": "1h"}
			helper := 0
			if v.redisURL != "" {
				vars["REDIS_URL"], vars["PRODAPI_CACHE_LOCAL_BYTES"] = v.redisURL, "-1"
				helper = h.redis.cmd.Process.Pid
			}
			if err := addProdapi(h.o.baseline, v.name, vars, helper); err != nil {
				return err
			}
		}
	}
	barePort := strings.TrimPrefix(bare.base, "http://127.0.0.1:")
	for _, ref := range []struct {
		name  string
		start func(string) (*proc, string, error)
	}{{"nginx", h.startNginx}, {"varnish", h.startVarnish}} {
		p, base, err := ref.start(barePort)
		if err != nil {
			h.progress("wrk: %s left out: %v", ref.name, err)
			rep.skipped = append(rep.skipped, fmt.Sprintf("wrk: %s left out: %v", ref.name, err))
			continue
		}
		defer p.stop(5 * time.Second)
		if err := h.warmAll(ctx, &prodapiProc{base: base, client: newClient(4)}, list); err != nil {
			return fmt.Errorf("%s: %w", ref.name, err)
		}
		servers = append(servers, &wrkServer{name: ref.name, base: base, pid: p.cmd.Process.Pid})
	}

	if h.o.wrkOnly != "" {
		keep := strings.Split(h.o.wrkOnly, ",")
		var names []string
		for _, s := range servers {
			names = append(names, s.name)
		}
		for _, k := range keep {
			if !slices.Contains(names, k) {
				return fmt.Errorf("-wrk-only: no server %q in this run (%s)", k, strings.Join(names, ", "))
			}
		}
		servers = slices.DeleteFunc(servers, func(s *wrkServer) bool {
			return s.name != "bare" && !slices.Contains(keep, s.name)
		})
	}
	rows := map[string]*wrkRow{}
	for _, placement := range []string{"pinned", "floating"} {
		serverCPUs, clientArgs := "0,1", []string{"-t2"}
		if placement == "pinned" {
			serverCPUs, clientArgs = "0", []string{"-t1"}
		}
		for _, s := range servers {
			for _, pid := range []int{s.pid, s.helper} {
				if pid == 0 {
					continue
				}
				if err := pinTree(taskset, pid, serverCPUs); err != nil {
					return err
				}
			}
		}
		// runWrk runs one slice of wrk on s, as the placement runs it.
		runWrk := func(s *wrkServer, target, d string) (string, error) {
			args := []string{wrk, "-c", strconv.Itoa(h.o.wrkConns), "-d", d, "--latency",
				"-H", "Authorization: " + h.token, "-H", "Accept-Encoding: gzip"}
			args = append(append(args, clientArgs...), s.base+target)
			if placement == "pinned" {
				args = append([]string{taskset, "-c", "1"}, args...)
			}
			out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
			if err != nil {
				return "", fmt.Errorf("wrk on %s: %v\n%s", s.name, err, out)
			}
			return string(out), nil
		}
		// Go (1.25 on) follows the CPU affinity mask with GOMAXPROCS, about
		// a second after it changes: one unmeasured slice per server lets
		// every runtime settle before the measured rounds.
		for _, s := range servers {
			if _, err := runWrk(s, targets[wrkTargets[0].name], "1s"); err != nil {
				return err
			}
		}
		rep.wrkProcs = append(rep.wrkProcs, fmt.Sprintf("%s: GOMAXPROCS %s", placement, h.gomaxprocsOf(ctx, local)))
		// measure runs one slice of target tn on each server of group at
		// once (one wrk each) and adds it to their rows: each server's
		// CPU is read before the first wrk starts and after the last
		// ends.
		measure := func(group []*wrkServer, tn string) error {
			type slice struct {
				c0, hc0 time.Duration
				out     string
				err     error
			}
			runs := make([]slice, len(group))
			for i, s := range group {
				c0, err := treeCPU(s.pid)
				if err != nil {
					return err
				}
				hc0, _ := treeCPU(s.helper)
				runs[i] = slice{c0: c0, hc0: hc0}
			}
			var wg sync.WaitGroup
			for i, s := range group {
				wg.Go(func() { runs[i].out, runs[i].err = runWrk(s, targets[tn], wrkDuration(h.o.slice)) })
			}
			wg.Wait()
			for i, s := range group {
				sl := runs[i]
				if sl.err != nil {
					return sl.err
				}
				c1, err := treeCPU(s.pid)
				if err != nil {
					return err
				}
				hc1, _ := treeCPU(s.helper)
				key := s.name + "|" + tn + "|" + placement
				row := rows[key]
				if row == nil {
					row = &wrkRow{server: s.name, target: tn, placement: placement}
					rows[key] = row
					rep.wrk = append(rep.wrk, row)
				}
				row.helperCPU += hc1 - sl.hc0
				res, err := parseWrk(sl.out)
				if err != nil {
					return fmt.Errorf("wrk on %s: %v\n%s", s.name, err, sl.out)
				}
				row.requests += res.requests
				row.errors += res.errors
				row.seconds += res.seconds
				row.cpu += c1 - sl.c0
				row.p50 = append(row.p50, res.p50)
				row.p99 = append(row.p99, res.p99)
				row.rounds = append(row.rounds, float64(res.requests)/res.seconds)
				if res.requests > 0 {
					row.cpuRounds = append(row.cpuRounds, (c1-sl.c0)/time.Duration(res.requests))
				}
			}
			return nil
		}
		for round := range h.o.rounds {
			for _, tn := range wrkTargets {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				// Rotate the order every round so that no server is
				// always first after a pause.
				order := append(slices.Clone(servers[round%len(servers):]), servers[:round%len(servers)]...)
				if h.o.wrkTogether {
					if err := measure(order, tn.name); err != nil {
						return err
					}
					continue
				}
				for _, s := range order {
					if err := measure([]*wrkServer{s}, tn.name); err != nil {
						return err
					}
				}
			}
		}
		for _, row := range rep.wrk {
			if row.placement == placement {
				h.progress("wrk %s %s %s: %.0f req/s, %s CPU/req", placement, row.target, row.server, row.rps(), row.cpuPerRequest())
			}
		}
	}
	for _, row := range rep.wrk {
		if row.errors > 0 {
			return fmt.Errorf("wrk: %s on %s (%s): %d errors", row.target, row.server, row.placement, row.errors)
		}
	}
	return nil
}

// gomaxprocsOf reads the GOMAXPROCS a prodapi reports on /metrics, or
// "unknown".
func (h *harness) gomaxprocsOf(ctx context.Context, p *prodapiProc) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.ops+"/metrics", nil)
	if err != nil {
		return "unknown"
	}
	res, err := p.client.Do(req)
	if err != nil {
		return "unknown"
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 4<<20))
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "go_sched_gomaxprocs_threads "); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}

// wrkDuration is a slice as wrk's -d takes it: whole seconds, at least one.
func wrkDuration(d time.Duration) string {
	return strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second))) + "s"
}

// pinTree sets the CPU affinity of pid, every thread, and its children's.
func pinTree(taskset string, pid int, cpus string) error {
	for _, p := range append([]int{pid}, children(pid)...) {
		if out, err := exec.Command(taskset, "-a", "-p", "-c", cpus, strconv.Itoa(p)).CombinedOutput(); err != nil {
			return fmt.Errorf("taskset %d: %v: %s", p, err, out)
		}
	}
	return nil
}

// children lists the processes whose parent is pid (varnishd's worker).
func children(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(n); err == nil && st.ppid == pid {
			out = append(out, n)
		}
	}
	return out
}

type procStat struct {
	ppid         int
	utime, stime int64 // clock ticks
}

// readStat reads /proc/pid/stat: fields after the command name, which
// is in parentheses and may contain spaces.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); ppid is field 4, utime 14, stime 15.
	if len(f) < 13 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var st procStat
	st.ppid, _ = strconv.Atoi(f[1])
	st.utime, _ = strconv.ParseInt(f[11], 10, 64)
	st.stime, _ = strconv.ParseInt(f[12], 10, 64)
	return st, nil
}

// clockTick is USER_HZ, 100 on every Linux this runs on.
const clockTick = 10 * time.Millisecond

// treeCPU is the CPU time of pid and its children so far.
func treeCPU(pid int) (time.Duration, error) {
	if pid == 0 {
		return 0, nil
	}
	var total time.Duration
	for i, p := range append([]int{pid}, children(pid)...) {
		st, err := readStat(p)
		if err != nil {
			if i == 0 {
				return 0, err
			}
			continue // a child that just exited
		}
		total += time.Duration(st.utime+st.stime) * clockTick
	}
	return total, nil
}

type wrkResult struct {
	requests, errors int64
	seconds          float64
	p50, p99         time.Duration
}

var (
	wrkTotal   = regexp.MustCompile(`(\d+) requests in ([\d.]+)(us|ms|s|m)`)
	wrkNon2xx  = regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	wrkSocket  = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	wrkPercent = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([\d.]+)(us|ms|s)\s*$`)
)

func parseWrk(out string) (wrkResult, error) {
	var r wrkResult
	m := wrkTotal.FindStringSubmatch(out)
	if m == nil {
		return r, errors.New("no request count in wrk's output")
	}
	r.requests, _ = strconv.ParseInt(m[1], 10, 64)
	r.seconds = parseUnit(m[2], m[3]).Seconds()
	if r.seconds <= 0 {
		return r, errors.New("wrk ran for no time")
	}
	if m := wrkNon2xx.FindStringSubmatch(out); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		r.errors += n
	}
	if m := wrkSocket.FindStringSubmatch(out); m != nil {
		for _, s := range m[1:] {
			n, _ := strconv.ParseInt(s, 10, 64)
			r.errors += n
		}
	}
	for _, m := range wrkPercent.FindAllStringSubmatch(out, -1) {
		d := parseUnit(m[2], m[3])
		if m[1] == "50" {
			r.p50 = d
		} else {
			r.p99 = d
		}
	}
	return r, nil
}

func parseUnit(v, unit string) time.Duration {
	f, _ := strconv.ParseFloat(v, 64)
	switch unit {
	case "us":
		return time.Duration(f * float64(time.Microsecond))
	case "ms":
		return time.Duration(f * float64(time.Millisecond))
	case "m":
		return time.Duration(f * float64(time.Minute))
	}
	return time.Duration(f * float64(time.Second))
}

// startNginx runs nginx (one process, no master) with proxy_cache in
// front of the bare server on port, its config and cache in the scratch
// directory.
func (h *harness) startNginx(barePort string) (*proc, string, error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		return nil, "", errors.New("nginx not found (apt-get install -y nginx-light)")
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	dir := filepath.Join(h.dir, "nginx")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  proxy_cache_path %[1]s/cache keys_zone=bench:10m;
  keepalive_requests 1000000;
  upstream bare { server 127.0.0.1:%[2]s; keepalive 16; }
  server {
    listen 127.0.0.1:%[3]s;
    location / {
      proxy_pass http://bare;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_cache bench;
      proxy_cache_key $request_uri;
      proxy_cache_valid 200 1h;
      proxy_ignore_headers Cache-Control Expires Vary Set-Cookie;
    }
  }
}
`, dir, barePort, port)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log"))
	cmd.Stderr = os.Stderr
	p, err := startProc(cmd)
	if err != nil {
		return nil, "", err
	}
	if err := waitListening(p, port); err != nil {
		p.stop(time.Second)
		return nil, "", fmt.Errorf("nginx: %w", err)
	}
	return p, "http://127.0.0.1:" + port, nil
}

// startVarnish runs varnishd in the foreground with a VCL that caches
// every 200 of the bare server on port for an hour, the token and the
// backend's Cache-Control notwithstanding (prodapi checks the token;
// the reference measures a cache answer of the same bytes).
func (h *harness) startVarnish(barePort string) (*proc, string, error) {
	bin, err := exec.LookPath("varnishd")
	if err != nil {
		return nil, "", errors.New("varnishd not found (apt-get install -y varnish)")
	}
	port, err := freePort()
	if err != nil {
		return nil, "", err
	}
	dir := filepath.Join(h.dir, "varnish")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", err
	}
	vcl := fmt.Sprintf(`vcl 4.1;
backend bare { .host = "127.0.0.1"; .port = "%s"; }
sub vcl_recv { unset req.http.Authorization; return (hash); }
sub vcl_backend_response { set beresp.ttl = 1h; return (deliver); }
`, barePort)
	path := filepath.Join(dir, "bench.vcl")
	if err := os.WriteFile(path, []byte(vcl), 0o644); err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin, "-F", "-j", "none", "-n", filepath.Join(dir, "work"), "-a", "127.0.0.1:"+port,
		"-f", path, "-s", "malloc,64m", "-T", "none")
	cmd.Stdout = nil
	cmd.Stderr = nil
	p, err := startProc(cmd)
	if err != nil {
		return nil, "", err
	}
	if err := waitListening(p, port); err != nil {
		p.stop(time.Second)
		return nil, "", fmt.Errorf("varnishd: %w", err)
	}
	return p, "http://127.0.0.1:" + port, nil
}

// waitListening waits, up to 30 s, until something accepts on the port.
func waitListening(p *proc, port string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := netDial("127.0.0.1:" + port)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("exited at start: %v", p.err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("not listening after 30s")
		}
	}
}

// netDial connects to a loopback address, briefly.
func netDial(addr string) (net.Conn, error) { return net.DialTimeout("tcp", addr, time.Second) }

// wrkMarkdown writes the wrk scenario's tables: per placement and
// target, each server's requests/s and CPU per request, and both as a
// ratio of the bare server's in the same run.
func (r *report) wrkMarkdown(b *strings.Builder) {
	if len(r.wrk) == 0 {
		return
	}
	o := r.h.o
	fmt.Fprintf(b, "wrk, %d connections, %d slices of %s per server, target and placement, servers rotated each round. Pinned: servers on CPU 0, wrk (`-t1`) on CPU 1; floating: both CPUs for all (wrk `-t2`). CPU/req is the server's (and its children's) utime+stime from /proc over the requests wrk completed; × bare (CPU) is the bare server's CPU/req divided by this server's, so above 1 is cheaper than bare; the redis-server of the servers that use Redis (prodapi-redis, prodapi-inval, floor-redis) is pinned with them and its CPU shown apart. Sizes: %s.\n\n",
		o.wrkConns, o.rounds, wrkDuration(o.slice), strings.Join(r.wrkSizes, ", "))
	if o.wrkTogether {
		b.WriteString("**Together** (`-wrk-together`): in each round every server ran its slice at the same time, one wrk each, so that all shared the CPU (pinned: CPU 0 for the servers, CPU 1 for every wrk) and whatever else the machine ran at that moment: their ratios hold on a busy machine, while each server's requests/s and CPU/req are those of a server sharing its core.\n\n")
	}
	if len(r.wrkProcs) > 0 {
		fmt.Fprintf(b, "After each placement change every server got one unmeasured 1 s slice, for Go's GOMAXPROCS to follow the CPU mask; prodapi-local then reported %s.\n\n", strings.Join(r.wrkProcs, ", "))
	}
	if o.baseline != "" {
		fmt.Fprintf(b, "baseline-local and baseline-redis are %s, measured in the same run", o.baseline)
		if len(o.baselineVars) > 0 {
			fmt.Fprintf(b, ", with %s", describeVars(o.baselineVars))
		}
		b.WriteString(".\n\n")
	}
	b.WriteString("| placement | target | server | req/s | **× bare** | req/s per slice | CPU/req | **× bare (CPU)** | p50 / p99 (median slice) |\n")
	b.WriteString("|---|---|---|--:|--:|---|--:|--:|---|\n")
	bare := map[string]*wrkRow{}
	for _, row := range r.wrk {
		if row.server == "bare" {
			bare[row.placement+"|"+row.target] = row
		}
	}
	rows := slices.Clone(r.wrk)
	slices.SortStableFunc(rows, func(a, c *wrkRow) int {
		return strings.Compare(a.placement+a.target, c.placement+c.target) * -1
	})
	for _, row := range rows {
		base := bare[row.placement+"|"+row.target]
		ratio, cpuRatio := 0.0, 0.0
		if base != nil && base.rps() > 0 && row.cpuPerRequest() > 0 {
			ratio = row.rps() / base.rps()
			cpuRatio = float64(base.cpuPerRequest()) / float64(row.cpuPerRequest())
		}
		helper := ""
		if row.helperCPU > 0 && row.requests > 0 {
			helper = fmt.Sprintf(" (+ %.1f µs redis-server)", float64(row.helperCPU/time.Duration(row.requests))/float64(time.Microsecond))
		}
		fmt.Fprintf(b, "| %s | %s | %s | %.0f | **%.2f** | %.0f–%.0f | %.1f µs%s | **%.2f** | %s / %s |\n",
			row.placement, row.target, row.server, row.rps(), ratio, slices.Min(row.rounds), slices.Max(row.rounds),
			float64(row.cpuPerRequest())/float64(time.Microsecond), helper, cpuRatio, ms(median(row.p50)), ms(median(row.p99)))
	}
	b.WriteString("\n")
	if o.baseline != "" {
		r.wrkPairs(b, rows)
	}
}

// wrkPairs compares prodapi-local and prodapi-redis with baseline-local
// and baseline-redis round by round:
// the two ran in the same round, minutes apart at most, so the spread of
// their differences says how far the machine moved under them.
func (r *report) wrkPairs(b *strings.Builder, rows []*wrkRow) {
	find := func(server, placement, target string) *wrkRow {
		i := slices.IndexFunc(rows, func(w *wrkRow) bool {
			return w.server == server && w.placement == placement && w.target == target
		})
		if i < 0 {
			return nil
		}
		return rows[i]
	}
	b.WriteString("CPU per request, prodapi against the baseline (local: in-process hits; redis: Redis hits), round by round (a pair is the two servers' slices of one round; a negative difference is prodapi cheaper):\n\n")
	b.WriteString("| placement | target | tier | prodapi | baseline | difference | per pair: median, min–max | pairs prodapi cheaper |\n")
	b.WriteString("|---|---|---|--:|--:|--:|---|--:|\n")
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	for _, row := range rows {
		tier, ok := strings.CutPrefix(row.server, "prodapi-")
		if !ok || (tier != "local" && tier != "redis") {
			continue
		}
		base := find("baseline-"+tier, row.placement, row.target)
		if base == nil || len(base.cpuRounds) != len(row.cpuRounds) || len(row.cpuRounds) == 0 {
			continue
		}
		diffs := make([]time.Duration, len(row.cpuRounds))
		cheaper := 0
		for i := range diffs {
			diffs[i] = row.cpuRounds[i] - base.cpuRounds[i]
			if diffs[i] < 0 {
				cheaper++
			}
		}
		total := row.cpuPerRequest() - base.cpuPerRequest()
		fmt.Fprintf(b, "| %s | %s | %s | %.1f µs | %.1f µs | %+.1f µs (%+.1f%%) | %+.1f, %+.1f to %+.1f µs | %d of %d |\n",
			row.placement, row.target, tier, us(row.cpuPerRequest()), us(base.cpuPerRequest()), us(total),
			100*float64(total)/float64(base.cpuPerRequest()), us(median(diffs)), us(slices.Min(diffs)), us(slices.Max(diffs)),
			cheaper, len(diffs))
	}
	b.WriteString("\n")
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
