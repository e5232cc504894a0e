package main

import (
	"bufio"
	"errors"
	"fmt"
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

	"github.com/prodapi/prodapi/sources/sandbox"
)

// BenchmarkWalkSandbox measures a mirror's first walk of a sandbox
// directory (PRODAPI_SANDBOX=DIR) of full-size items: prodapi runs as a
// process of its own, so that its time to ready and its peak memory are
// its own; the client follows the next links of GET
// /prodapi/v1/items?max_results=500&cursor= to the last page over
// loopback HTTP with keep-alive, a token and gzip. Two newsrooms, one
// after the other: the sample as it is (prodapi-seed -out DIR), and
// PRODAPI_SANDBOX_BENCH_ITEMS items (300,000 when unset) made by
// prodapi-seed -scale N -out DIR, copies of the sample's items.
//
//	nice go test -run '^$' -bench BenchmarkWalkSandbox -benchtime 1x -timeout 1h ./cmd/prodapi
//
// Making a 300,000-item directory (1.6 GB) takes a while, so the
// directories are kept under the system's temporary directory
// (prodapi-sandbox-bench/<items>) between runs; remove it to make them
// again. Each run of a sub-benchmark starts prodapi afresh, walks every
// item exactly once (or fails) and stops it. Metrics: docs/s over the
// walk, ms/page-median, ms/page-max and ms/page-first (the first page
// builds the order of the walk's sort), s-to-ready (from the start of the
// process to its first 200 from /readyz on the operator listener),
// CPU-s-to-ready (the CPU time prodapi used until then, which a busy
// machine does not stretch), docs/CPU-s (items walked per second of
// prodapi's CPU), MB-json (the newsroom's *.json files), MB-peak-RSS
// (the process's VmHWM after the walk: the most it held, loading
// included) and RSS/json, their ratio. The log has the load average before and after
// each walk.
func BenchmarkWalkSandbox(b *testing.B) {
	large := 300_000
	if v := os.Getenv("PRODAPI_SANDBOX_BENCH_ITEMS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("PRODAPI_SANDBOX_BENCH_ITEMS=%q: want a number of items", v)
		}
		large = n
	}
	seed, prodapi := seedBinary(b), commandBinary(b, "prodapi")
	sample, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{0, large} {
		name, items := strconv.Itoa(n), n
		if n == 0 {
			name, items = "sample", sample.Counts()["archive"]
		}
		b.Run(name, func(b *testing.B) {
			dir := benchNewsroom(b, seed, n)
			size := jsonSize(b, dir)
			for range b.N {
				walkSandbox(b, prodapi, dir, items, size)
			}
		})
	}
}

// benchNewsroom returns the directory prodapi-seed writes for n items (0:
// the sample as it is), kept between runs under the temporary directory.
func benchNewsroom(b *testing.B, seed string, n int) string {
	b.Helper()
	root := filepath.Join(os.TempDir(), "prodapi-sandbox-bench")
	dir := filepath.Join(root, strconv.Itoa(n))
	if _, err := os.Stat(dir); err == nil {
		return dir
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		b.Fatal(err)
	}
	// Written aside and renamed, so that an interrupted run leaves no
	// half-written newsroom to be taken for a whole one.
	part, err := os.MkdirTemp(root, "part-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(part)
	args := []string{"-out", filepath.Join(part, "newsroom")}
	if n > 0 {
		args = append(args, "-scale", strconv.Itoa(n))
	}
	started := time.Now()
	if out, err := exec.Command(seed, args...).CombinedOutput(); err != nil {
		b.Fatalf("prodapi-seed %s: %v\n%.4000s", strings.Join(args, " "), err, out)
	}
	if err := os.Rename(filepath.Join(part, "newsroom"), dir); err != nil {
		b.Fatal(err)
	}
	b.Logf("prodapi-seed %s: %s", strings.Join(args, " "), time.Since(started).Round(time.Millisecond))
	return dir
}

// jsonSize is the size of the newsroom's collection files.
func jsonSize(b *testing.B, dir string) int64 {
	b.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for _, f := range files {
		info, err := os.Stat(f)
		if err != nil {
			b.Fatal(err)
		}
		size += info.Size()
	}
	return size
}

var greetAddrs = regexp.MustCompile(`\(listening on ([^)]+)\)|without a token: (http://[^ ]+)/healthz`)

// walkSandbox starts prodapi on dir, waits until it is ready, walks its
// items (there are n) and reports the figures of BenchmarkWalkSandbox.
func walkSandbox(b *testing.B, bin, dir string, n int, size int64) {
	b.Helper()
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "AUTH_SERVER_SHARED_SECRET=" + devSecret,
		"PRODAPI_SANDBOX=" + dir, "PRODAPI_OPS_ADDR=127.0.0.1:0"}
	logFile, err := os.CreateTemp(b.TempDir(), "prodapi-*.log")
	if err != nil {
		b.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stderr = logFile
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	started := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}()
	addrs := make(chan [2]string, 1)
	go func() { // ends when prodapi closes its stdout, at exit
		var api string
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			m := greetAddrs.FindStringSubmatch(sc.Text())
			switch {
			case m == nil:
			case m[1] != "":
				api = "http://" + m[1]
			case m[2] != "" && api != "":
				addrs <- [2]string{api, m[2]} // once: the greeting is printed once
			}
		}
		close(addrs)
	}()
	a, ok := <-addrs
	if !ok {
		logged, _ := os.ReadFile(logFile.Name())
		b.Fatalf("prodapi did not listen:\n%.4000s", logged)
	}
	s := &benchServer{base: a[0], ops: a[1], client: benchClient()}
	if err := awaitReady(s); err != nil {
		b.Fatal(err)
	}
	ready := time.Since(started)
	status := func() []byte {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
		if err != nil {
			b.Fatal(err)
		}
		return raw
	}
	readyHWM := procStatusKB(status(), "VmHWM")
	readyCPU := pidCPU(b, cmd.Process.Pid)

	walkStarted := time.Now()
	times := walkAll(b, s, benchToken(b), n)
	walked := time.Since(walkStarted)
	b.StopTimer()
	hwm := procStatusKB(status(), "VmHWM")
	walkCPU := pidCPU(b, cmd.Process.Pid) - readyCPU
	sorted := slices.Sorted(slices.Values(times))
	median, slowest := sorted[len(sorted)/2], sorted[len(sorted)-1]
	at := slices.Index(times, slowest) // the first page builds the sort's order
	mb := func(kb int64) float64 { return float64(kb) / 1024 }
	b.ReportMetric(float64(n)/walked.Seconds(), "docs/s")
	b.ReportMetric(float64(median.Microseconds())/1000, "ms/page-median")
	b.ReportMetric(float64(slowest.Microseconds())/1000, "ms/page-max")
	b.ReportMetric(float64(times[0].Microseconds())/1000, "ms/page-first")
	b.ReportMetric(ready.Seconds(), "s-to-ready")
	b.ReportMetric(readyCPU.Seconds(), "CPU-s-to-ready")
	b.ReportMetric(float64(n)/walkCPU.Seconds(), "docs/CPU-s")
	b.ReportMetric(float64(size)/(1<<20), "MB-json")
	b.ReportMetric(mb(hwm), "MB-peak-RSS")
	b.ReportMetric(float64(hwm<<10)/float64(size), "RSS/json")
	b.Logf("%s: %d MB of JSON, ready after %s (%s of CPU, VmHWM %.0f MB); %d items in %d pages in %s (%s of the server's CPU), %.0f docs/s, page median %s, first %s, slowest %s (page %d); VmHWM after the walk %.0f MB (%.2f× the JSON)",
		dir, size>>20, ready.Round(time.Millisecond), readyCPU, mb(readyHWM), n, len(times), walked.Round(time.Millisecond), walkCPU,
		float64(n)/walked.Seconds(), median.Round(time.Millisecond), times[0].Round(time.Millisecond), slowest.Round(time.Millisecond), at+1,
		mb(hwm), float64(hwm<<10)/float64(size))
}

// awaitReady polls /readyz on the operator listener until it answers
// 200, for at most ten minutes.
func awaitReady(s *benchServer) error {
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		res, err := s.client.Get(s.ops + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return errors.New("/readyz did not answer 200 within ten minutes")
}

// procStatusKB reads a field in kB of /proc/PID/status.
func procStatusKB(status []byte, field string) int64 {
	for line := range strings.SplitSeq(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
