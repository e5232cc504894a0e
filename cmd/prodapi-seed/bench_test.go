package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prodapi/prodapi/test/realserver"
)

// BenchmarkSeedScale measures prodapi-seed -scale on a newsroom of
// PRODAPI_SEED_BENCH_ITEMS items (300,000 when unset), each stage in a
// process of its own so that its peak RSS is its own:
//
//   - elastic: loading it into a real Elasticsearch 7.10.2 node;
//   - ferretdb: loading it into a real FerretDB;
//   - out/25000 and out/N: writing it as a sandbox directory;
//   - serve/N: prodapi on that directory (PRODAPI_SANDBOX=DIR): the time
//     to its first answer to GET /items and its memory then.
//
// Loads this size are benchmarks: `make test` and CI never run them.
// `make seed-bench` does (an hour or so on two busy cores), and prints
// each figure with its unit; -bench 'SeedScale/out' picks stages.
func BenchmarkSeedScale(b *testing.B) {
	items := 300_000
	if v := os.Getenv("PRODAPI_SEED_BENCH_ITEMS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("PRODAPI_SEED_BENCH_ITEMS=%q: want a number of items", v)
		}
		items = n
	}
	var servers realserver.Set
	defer servers.Close()
	tmp := b.TempDir()
	seed := buildCommand(b, tmp, "prodapi-seed")
	counts := func(n int) map[string]int {
		s, err := newScaler(sampleRoom(b), n, 1)
		if err != nil {
			b.Fatal(err)
		}
		return s.corpus().counts()
	}
	sum := func(counts map[string]int, colls ...string) int {
		total := 0
		for c, n := range counts {
			if len(colls) == 0 || slices.Contains(colls, c) {
				total += n
			}
		}
		return total
	}
	scale := []string{"-scale", strconv.Itoa(items), "-wait", "5m"}

	b.Run("elastic", func(b *testing.B) {
		es := servers.Elastic(b)
		docs := sum(counts(items), searchCollections()...)
		for range b.N {
			runMeasured(b, seed, docs, items, append([]string{"-targets", "elastic"}, scale...),
				"ELASTICSEARCH_URL", es.URL, "ELASTICSEARCH_INDEX", "bench")
		}
	})
	b.Run("ferretdb", func(b *testing.B) {
		ferret := servers.FerretDB(b)
		docs := sum(counts(items))
		for range b.N {
			runMeasured(b, seed, docs, items, append([]string{"-targets", "mongo"}, scale...),
				"MONGO_URI", strings.TrimSuffix(ferret.URI, "/")+"/bench")
		}
	})
	dirs := map[int]string{}
	for _, n := range []int{25_000, items} {
		b.Run(fmt.Sprintf("out/%d", n), func(b *testing.B) {
			for i := range b.N {
				dir := filepath.Join(tmp, fmt.Sprintf("newsroom-%d-%d", n, i))
				runMeasured(b, seed, sum(counts(n)), n, []string{"-scale", strconv.Itoa(n), "-out", dir})
				dirs[n] = dir
				b.ReportMetric(float64(dirSize(b, dir))/(1<<20), "MB-on-disk")
			}
		})
	}
	b.Run(fmt.Sprintf("serve/%d", items), func(b *testing.B) {
		dir, ok := dirs[items]
		if !ok {
			dir = filepath.Join(tmp, "newsroom-serve")
			if out, err := exec.Command(seed, "-scale", strconv.Itoa(items), "-out", dir).CombinedOutput(); err != nil {
				b.Fatalf("prodapi-seed -out: %v\n%s", err, tail(out, 4000))
			}
		}
		prodapi := buildCommand(b, tmp, "prodapi")
		for range b.N {
			serveMeasured(b, prodapi, dir)
		}
	})
}

// buildCommand builds cmd/<name> into dir.
func buildCommand(b *testing.B, dir, name string) string {
	b.Helper()
	goBin, err := realserver.LookPath("go", "install the Go toolchain named in go.mod (https://go.dev/dl/)")
	if err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	if out, err := exec.Command(goBin, "build", "-o", bin, "github.com/prodapi/prodapi/cmd/"+name).CombinedOutput(); err != nil {
		b.Fatalf("building %s: %v\n%s", name, err, out)
	}
	return bin
}

// runMeasured runs the seed with args and the variables of env (pairs),
// and reports its time, its rate in documents (docs of them, items of
// them items) and its peak RSS.
func runMeasured(b *testing.B, bin string, docs, items int, args []string, env ...string) {
	b.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for i := 0; i+1 < len(env); i += 2 {
		cmd.Env = append(cmd.Env, env[i]+"="+env[i+1])
	}
	log, err := os.CreateTemp(b.TempDir(), "seed-*.log")
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	cmd.Stderr = log
	b.ResetTimer()
	start := time.Now()
	err = cmd.Run()
	elapsed := time.Since(start)
	b.StopTimer()
	if err != nil {
		out, _ := os.ReadFile(log.Name())
		b.Fatalf("prodapi-seed %s: %v\n%s", strings.Join(args, " "), err, tail(out, 4000))
	}
	usage := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(usage.Utime.Nano() + usage.Stime.Nano())
	b.ReportMetric(elapsed.Seconds(), "s")
	b.ReportMetric(float64(docs)/elapsed.Seconds(), "docs/s")
	b.ReportMetric(float64(items)/elapsed.Seconds(), "items/s")
	b.ReportMetric(float64(usage.Maxrss)/1024, "MB-peak-RSS")
	b.ReportMetric(cpu.Seconds(), "s-CPU")
	b.Logf("prodapi-seed %s: %d documents (%d items) in %s, %.0f documents/s; peak RSS %d MB, CPU %s",
		strings.Join(args, " "), docs, items, elapsed.Round(time.Millisecond), float64(docs)/elapsed.Seconds(),
		usage.Maxrss/1024, cpu.Round(time.Millisecond))
	out, err := os.ReadFile(log.Name())
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		if strings.Contains(line, `loaded"`) || strings.Contains(line, `written"`) {
			b.Log(line) // each stage's duration and rate (go test shows the first few)
		}
	}
}

var listening = regexp.MustCompile(`\(listening on ([^)]+)\)`)

// serveMeasured starts prodapi on the sandbox directory dir and reports
// how long it takes to listen, then to answer GET /items, and its memory
// then (VmHWM, the peak; VmRSS).
func serveMeasured(b *testing.B, bin, dir string) {
	b.Helper()
	const secret = "seed-bench-secret-at-least-32-bytes-long"
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "AUTH_SERVER_SHARED_SECRET=" + secret, "PRODAPI_SANDBOX=" + dir,
		"PRODAPI_OPS_ADDR=127.0.0.1:0"} // not the default :5502, which another prodapi may hold
	tok := exec.Command(bin, "token", "-scope", "ARCHIVE_READ")
	tok.Env = env
	token, err := tok.Output()
	if err != nil {
		b.Fatalf("prodapi token: %v", err)
	}
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	cmd.Env = env
	log, err := os.CreateTemp(b.TempDir(), "prodapi-*.log")
	if err != nil {
		b.Fatal(err)
	}
	defer log.Close()
	cmd.Stderr = log
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	addr := make(chan string, 1)
	go func() { // ends when prodapi closes its stdout, at exit
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		close(addr)
	}()
	var a string
	select {
	case a = <-addr:
	case <-time.After(30 * time.Minute):
	}
	if a == "" {
		logged, _ := os.ReadFile(log.Name())
		b.Fatalf("prodapi did not listen:\n%s", tail(logged, 4000))
	}
	listened := time.Since(start)
	req, err := http.NewRequest(http.MethodGet, "http://"+a+"/prodapi/v1/items?max_results=25", nil)
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	res, err := (&http.Client{Timeout: 10 * time.Minute}).Do(req)
	if err != nil {
		b.Fatal(err)
	}
	res.Body.Close()
	answered := time.Since(start)
	b.StopTimer()
	if res.StatusCode != http.StatusOK {
		b.Fatalf("GET /items: %s", res.Status)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
	if err != nil {
		b.Fatal(err)
	}
	hwm, rss := procKB(status, "VmHWM"), procKB(status, "VmRSS")
	b.ReportMetric(listened.Seconds(), "s-to-listen")
	b.ReportMetric(answered.Seconds(), "s-to-first-list")
	b.ReportMetric(float64(hwm)/1024, "MB-peak-RSS")
	b.ReportMetric(float64(rss)/1024, "MB-RSS")
	b.Logf("prodapi on %s: listening after %s, first GET /items answered after %s; VmHWM %d MB, VmRSS %d MB",
		dir, listened.Round(time.Millisecond), answered.Round(time.Millisecond), hwm/1024, rss/1024)
}

// procKB reads a "Name:   123 kB" line of /proc/PID/status.
func procKB(status []byte, name string) int {
	for line := range strings.SplitSeq(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	return 0
}

func dirSize(b *testing.B, dir string) int64 {
	var size int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		info, err := d.Info()
		if err == nil {
			size += info.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return size
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
