package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// passEnv are the variables of the harness's environment a subprocess
// keeps; everything else, PRODAPI_* and REDIS_URL included, is set by the
// scenario alone.
var passEnv = []string{"PATH", "HOME", "TMPDIR", "GOMAXPROCS", "GOGC", "GOMEMLIMIT", "GODEBUG"}

func subprocessEnv(vars map[string]string) []string {
	var env []string
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		env = append(env, k+"="+vars[k])
	}
	return env
}

// A proc is a subprocess the harness started.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process has exited and was reaped
	err    error         // cmd.Wait's result, set before exited closes
}

func startProc(cmd *exec.Cmd) (*proc, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() { // ends when the process exits
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// stop sends SIGTERM, and SIGKILL if the process has not exited after
// grace; it returns the process's exit error (nil for a clean exit).
func (p *proc) stop(grace time.Duration) error {
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("did not exit within %s of SIGTERM: killed", grace)
	}
}

// A prodapiProc is prodapi serving on a loopback port, its log (stderr,
// one JSON line per request) going to a file.
type prodapiProc struct {
	*proc
	name    string
	base    string // http://127.0.0.1:port
	ops     string // its operator listener's (probes, /metrics); base for a baseline without one
	logPath string
	client  *http.Client // for /metrics and captures
}

// listeningOn finds the address in what prodapi prints on stdout in
// sandbox mode: "... (listening on 127.0.0.1:port)"; opsOn, the operator
// listener's on the line after it, when there is one.
var (
	listeningOn = regexp.MustCompile(`\(listening on ([^)]+)\)`)
	opsOn       = regexp.MustCompile(`^Probes and metrics, without a token: (http://[^/]+)/healthz`)
)

// startProdapi starts the binary on 127.0.0.1:0, its operator listener
// too, with the sample newsroom, the harness's secret and vars.
func (h *harness) startProdapi(name string, vars map[string]string) (*prodapiProc, error) {
	return h.startProdapiBinary(h.o.prodapi, name, vars)
}

// opsVars places bin's operator listener on a port of the system's
// choosing, as two prodapis on its default :5502 would collide, when bin
// has one (a baseline built before it would refuse the setting).
func opsVars(bin string, vars map[string]string) map[string]string {
	all := map[string]string{}
	if out, err := exec.Command(bin, "help").Output(); err == nil && strings.Contains(string(out), "PRODAPI_OPS_ADDR") {
		all["PRODAPI_OPS_ADDR"] = "127.0.0.1:0"
	}
	maps.Copy(all, vars)
	return all
}

// fairShareUnreached are the settings of the prodapi the harness
// measures (-prodapi): the fair share on, with limits it never reaches,
// since the harness sends as one client far faster than any client's
// limit. A baseline (-baseline, perhaps older than the fair share) runs
// with -baseline-vars instead.
var fairShareUnreached = map[string]string{"PRODAPI_RATE_LIMIT": "1000000000/s", "PRODAPI_CLIENT_MAX_LOADS": "1048576"}

// startProdapiBinary is startProdapi with another binary (-baseline, for
// a name with "baseline" in it).
func (h *harness) startProdapiBinary(bin, name string, vars map[string]string) (*prodapiProc, error) {
	vars = opsVars(bin, vars)
	all := map[string]string{
		"PRODAPI_SANDBOX":           "sample",
		"AUTH_SERVER_SHARED_SECRET": h.secret,
		"PRODAPI_SANDBOX_LATENCY":   h.o.latency.String(),
	}
	if strings.Contains(name, "baseline") {
		maps.Copy(all, h.o.baselineVars)
	} else {
		maps.Copy(all, fairShareUnreached)
	}
	maps.Copy(all, vars)
	logPath := filepath.Join(h.dir, "prodapi-"+name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child has its own descriptor
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	cmd.Env = subprocessEnv(all)
	cmd.Stderr = logFile
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p, err := startProc(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	type addrs struct{ api, ops string }
	addr := make(chan addrs, 1)
	go func() { // ends when prodapi closes its stdout, at exit
		sc := bufio.NewScanner(out)
		var a addrs
		for sc.Scan() {
			switch {
			case a.api == "":
				if m := listeningOn.FindStringSubmatch(sc.Text()); m != nil {
					a.api = "http://" + m[1]
				}
				continue
			case a.ops == "":
				if m := opsOn.FindStringSubmatch(sc.Text()); m != nil {
					a.ops = m[1]
				}
				a.ops = cmp.Or(a.ops, a.api) // a baseline without one serves /metrics beside the API
				addr <- a
			}
		}
	}()
	select {
	case a := <-addr:
		h.progress("prodapi %s listening on %s, ops %s (%s)", name, a.api, a.ops, describeVars(vars))
		return &prodapiProc{proc: p, name: name, base: a.api, ops: a.ops, logPath: logPath, client: newClient(4)}, nil
	case <-p.exited:
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("prodapi %s exited at start: %v\n%s", name, p.err, tail(log, 2000))
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		return nil, fmt.Errorf("prodapi %s printed no address within 30s", name)
	}
}

func describeVars(vars map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		parts = append(parts, k+"="+vars[k])
	}
	return strings.Join(parts, " ")
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// shutdown stops prodapi and reports a failed exit.
func (p *prodapiProc) shutdown() error {
	if err := p.stop(15 * time.Second); err != nil {
		return fmt.Errorf("prodapi %s: %w", p.name, err)
	}
	return nil
}

// counters are prodapi's own counts, from /metrics.
type counters struct {
	queries  float64            // prodapi_source_queries_total, summed
	outcomes map[string]float64 // prodapi_cache_requests_total by outcome, over resources
}

func (p *prodapiProc) counters(ctx context.Context) (counters, error) {
	c := counters{outcomes: map[string]float64{}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.ops+"/metrics", nil)
	res, err := p.client.Do(req)
	if err != nil {
		return c, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		series, value, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		v, _ := strconv.ParseFloat(value, 64)
		switch {
		case strings.HasPrefix(series, "prodapi_source_queries_total{"):
			c.queries += v
		case strings.HasPrefix(series, "prodapi_cache_requests_total{"):
			if _, o, ok := strings.Cut(series, `outcome="`); ok {
				c.outcomes[strings.TrimSuffix(o, `"}`)] += v
			}
		}
	}
	return c, sc.Err()
}

func (p *prodapiProc) sourceQueries(ctx context.Context) (float64, error) {
	c, err := p.counters(ctx)
	return c.queries, err
}

// A redisProc is a redis-server on a free loopback port, without
// persistence.
type redisProc struct {
	*proc
	port   string
	client *redis.Client
}

func startRedis(ctx context.Context, path, dir string) (*redisProc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	p, err := startProc(cmd)
	if err != nil {
		return nil, fmt.Errorf("starting redis-server: %w", err)
	}
	r := &redisProc{proc: p, port: port, client: redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + port})}
	deadline := time.Now().Add(10 * time.Second)
	for r.client.Ping(ctx).Err() != nil {
		if time.Now().After(deadline) {
			r.stop()
			return nil, errors.New("redis-server did not answer PING within 10s")
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("redis-server exited at start: %v", p.err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return r, nil
}

// url is the REDIS_URL of database db.
func (r *redisProc) url(db int) string { return "redis://127.0.0.1:" + r.port + "/" + strconv.Itoa(db) }

func (r *redisProc) stop() {
	r.client.Close()
	r.cmd.Process.Kill()
	<-r.exited
}

// gets reads how many GETs Redis has served (INFO commandstats).
func (r *redisProc) gets(ctx context.Context) (float64, error) {
	info, err := r.client.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(info, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_get:calls="); ok {
			n, _, _ := strings.Cut(rest, ",")
			return strconv.ParseFloat(n, 64)
		}
	}
	return 0, nil
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// A captured response is what prodapi answered for a request target, as
// the bare server replays it.
type captured struct {
	Status int         `json:"status"`
	Header http.Header `json:"header"`
	Body   []byte      `json:"body"`
}

// A bareSet is a bare server's whole content: a response per target,
// and the one it gives any other target (the misses' shape).
type bareSet struct {
	Responses map[string]*captured `json:"responses"`
	Fallback  string               `json:"fallback"`
}

// A bareProc is the bare server: this same program, started with -bare,
// in its own process as prodapi is, so that neither shares the load
// generator's runtime (its scheduler and garbage collector).
type bareProc struct {
	*proc
	base string
}

func (h *harness) startBare(name string, set *bareSet, redisAddr string) (*bareProc, error) {
	if set.Responses[set.Fallback] == nil {
		return nil, errors.New("the bare server's fallback target was not captured")
	}
	path := filepath.Join(h.dir, "bare-"+name+".json")
	b, err := json.Marshal(set)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"-bare", path}
	if redisAddr != "" {
		args = append(args, "-bare-redis", redisAddr)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = subprocessEnv(nil)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p, err := startProc(cmd)
	if err != nil {
		return nil, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		p.stop(time.Second)
		return nil, fmt.Errorf("bare server: %w", err)
	}
	go io.Copy(io.Discard, out) // ends when the process exits
	return &bareProc{proc: p, base: "http://" + strings.TrimSpace(line)}, nil
}

// serveBare is the -bare mode: a plain net/http server (its defaults,
// no timeouts) whose handler is a map lookup and a write of the captured
// headers and body. It prints its address, then serves until SIGTERM.
//
// With a Redis address it is the floor of a Redis hit instead: it stores
// each body in Redis at start, and every request reads its body back
// with one go-redis GET (RESP2, the client's defaults otherwise) before
// it writes it.
func serveBare(ctx context.Context, path, redisAddr string, stdout io.Writer) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var set bareSet
	if err := json.Unmarshal(b, &set); err != nil {
		return err
	}
	fallback := set.Responses[set.Fallback]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	body := func(_ context.Context, target string, res *captured) ([]byte, error) { return res.Body, nil }
	if redisAddr != "" {
		rdb := redis.NewClient(&redis.Options{Addr: redisAddr, Protocol: 2})
		defer rdb.Close()
		for target, res := range set.Responses {
			if err := rdb.Set(ctx, "prodapi-bench:floor:"+target, res.Body, 0).Err(); err != nil {
				return err
			}
		}
		body = func(ctx context.Context, target string, _ *captured) ([]byte, error) {
			return rdb.Get(ctx, "prodapi-bench:floor:"+target).Bytes()
		}
	}
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		target := r.RequestURI
		res := set.Responses[target]
		if res == nil {
			target, res = set.Fallback, fallback
		}
		b, err := body(r.Context(), target, res)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		maps.Copy(w.Header(), res.Header)
		w.WriteHeader(res.Status)
		w.Write(b)
	})}
	fmt.Fprintln(stdout, ln.Addr().String())
	go func() { // ends when the harness stops this process
		<-ctx.Done()
		hs.Close()
	}()
	if err := hs.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
