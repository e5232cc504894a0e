package main

import (
	"bufio"
	"debug/buildinfo"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// A report is the whole run, printed as Markdown.
type report struct {
	h          *harness
	start, end time.Time
	loadStart  string
	loadEnd    string
	results    []*result
	stampedes  []*stampedeResult
	sigterm    *sigtermResult
	kills      []*killRun
	skipped    []string
	failures   []string
	wrk        []*wrkRow
	wrkSizes   []string
	wrkProcs   []string // the GOMAXPROCS prodapi reported in each placement
}

func newReport(h *harness) *report {
	return &report{h: h, start: time.Now(), loadStart: loadAverage()}
}

func (r *report) finish() {
	r.end = time.Now()
	r.loadEnd = loadAverage()
}

func (r *report) markdown() string {
	var b strings.Builder
	o := r.h.o
	fmt.Fprintf(&b, "### Load harness, %s\n\n", r.start.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- Machine: %s, %d CPUs, GOMAXPROCS %s; %s; load average %s at start, %s at end\n",
		cpuModel(), runtime.NumCPU(), gomaxprocs(), runtime.Version(), r.loadStart, r.loadEnd)
	fmt.Fprintf(&b, "- prodapi: %s (%s); sandbox `sample`, `PRODAPI_SANDBOX_LATENCY=%s`; %s\n", o.prodapi, binaryInfo(o.prodapi), o.latency, redisInfo(o.redisServer))
	loop := fmt.Sprintf("closed loop, %d connections", o.conns)
	if o.rate > 0 {
		loop = fmt.Sprintf("open loop, %.0f requests/s offered to each server (latency from the scheduled start), up to %d connections", o.rate, o.conns)
	}
	fmt.Fprintf(&b, "- Load: %s, keep-alive, a token with every scope on every request, `Accept-Encoding: gzip`; each scenario %d slices of %s on prodapi and on the bare server, alternating; whole run %s\n\n",
		loop, o.rounds, o.slice, r.end.Sub(r.start).Round(time.Second))

	r.wrkMarkdown(&b)
	if len(r.results) > 0 {
		b.WriteString("| scenario | prodapi req/s | bare req/s | **ratio** | ratio per round | prodapi p50 / p99 | bare p50 / p99 | failed | backend queries/req | cache outcomes (prodapi) |\n")
		b.WriteString("|---|--:|--:|--:|---|---|---|--:|--:|---|\n")
		for _, res := range r.results {
			lo, hi := slices.Min(res.ratios), slices.Max(res.ratios)
			outcomes := outcomeSummary(res.outcomes, res.prod.requests)
			if res.redisGets >= 0 {
				outcomes += fmt.Sprintf("; %.2f Redis GETs/req", res.redisGets)
			}
			failed := fmt.Sprintf("%d", res.prod.failed()+res.bare.failed())
			if res.prod.dropped+res.bare.dropped > 0 {
				failed += fmt.Sprintf(" (+%d not issued)", res.prod.dropped+res.bare.dropped)
			}
			fmt.Fprintf(&b, "| %s | %.0f | %.0f | **%.2f** | %.2f–%.2f | %s / %s | %s / %s | %s | %.2g | %s |\n",
				res.name, res.prod.rps(), res.bare.rps(), res.ratio(), lo, hi,
				ms(res.prod.percentile(0.50)), ms(res.prod.percentile(0.99)),
				ms(res.bare.percentile(0.50)), ms(res.bare.percentile(0.99)),
				failed, res.queries, outcomes)
		}
		if o.rate > 0 {
			b.WriteString("\nOpen loop: both servers were offered the same rate, so the ratio only says whether prodapi kept up; compare the latencies.\n")
		}
		b.WriteString("\n")
		for _, res := range r.results {
			fmt.Fprintf(&b, "- **%s**: %s.\n", res.name, res.what)
		}
		b.WriteString("\n")
	}

	if len(r.stampedes) > 0 {
		b.WriteString("| stampede | requests | backend queries | one load costs | **loads** | p50 / p99 | failed | cache outcomes |\n")
		b.WriteString("|---|--:|--:|--:|--:|---|--:|---|\n")
		for _, s := range r.stampedes {
			verdict := "ok"
			if !s.ok() {
				verdict = "**FAIL**"
			}
			fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f | **%.2f** (%s) | %s / %s | %d | %s |\n",
				s.describe(), s.s.requests, s.queries, s.loadCost, s.loads(), verdict,
				ms(s.s.percentile(0.50)), ms(s.s.percentile(0.99)), s.s.failed(), outcomeSummary(s.s.outcomes, s.s.requests))
		}
		b.WriteString("\nEach stampede opens every connection first and writes every request at once, on keys nobody asked for (a 10-item list with a nonce); \"one load costs\" is a key of the same shape loaded alone just before. G10 wants one load per key.\n\n")
	}

	if s := r.sigterm; s != nil {
		verdict := "**pass**"
		if !s.passed() {
			verdict = "**FAIL**"
		}
		fmt.Fprintf(&b, "SIGTERM under load (F12/G11): %s. %d requests (half hits from the Zipf mix, half misses waiting on the backend), SIGTERM after 2s with %d in flight: %d answered 200, **%d lost**; %d started after SIGTERM; %d refused at connect after the listener closed and %d reset before prodapi read them (never accepted, see below); prodapi exited %s after SIGTERM (%s), clean stop logged: %v.\n\n",
			verdict, s.sent, s.inFlight, s.ok, len(s.lost), s.afterTerm, s.refused, s.unaccepted, s.exitAfter.Round(time.Millisecond), exitText(s.exitErr), s.stopped)
		for _, l := range s.lost[:min(len(s.lost), 10)] {
			fmt.Fprintf(&b, "- lost: %s\n", l)
		}
		b.WriteString("A request counts as accepted once prodapi has run its handler: its access log has the request's X-Request-Id. Accepted requests must all get a whole 200 (and none may run twice); requests refused or reset before prodapi read them were never accepted and are a client's (or load balancer's) to retry elsewhere.\n\n")
	}
	r.killMarkdown(&b)
	for _, s := range r.skipped {
		fmt.Fprintf(&b, "- skipped: %s\n", s)
	}
	for _, f := range r.failures {
		fmt.Fprintf(&b, "- **failed**: %s\n", f)
	}
	return b.String()
}

func outcomeSummary(m map[string]int, total int) string {
	if total == 0 {
		return "-"
	}
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return m[b] - m[a] })
	var parts []string
	for _, k := range keys {
		share := 100 * float64(m[k]) / float64(total)
		if share >= 99.95 {
			parts = append(parts, k+" 100%")
		} else if share >= 0.1 {
			parts = append(parts, fmt.Sprintf("%s %.1f%%", k, share))
		} else {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	return strings.Join(parts, ", ")
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return runtime.GOARCH
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

func gomaxprocs() string {
	if v := os.Getenv("GOMAXPROCS"); v != "" {
		return v + " (from the environment)"
	}
	return fmt.Sprint(runtime.GOMAXPROCS(0))
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// binaryInfo names the Go version and revision prodapi was built from.
func binaryInfo(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "no build info"
	}
	parts := []string{bi.GoVersion}
	stamped := false
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			parts = append(parts, "revision "+s.Value[:min(len(s.Value), 12)])
			stamped = true
		case s.Key == "vcs.modified" && s.Value == "true":
			parts = append(parts, "with uncommitted changes")
		}
	}
	if !stamped {
		// Built with -buildvcs=false: name the working tree instead.
		if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
			parts = append(parts, "working tree "+strings.TrimSpace(string(out)))
		}
	}
	return strings.Join(parts, ", ")
}

func redisInfo(path string) string {
	if path == "" {
		return "no redis-server"
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return "redis-server (version unknown)"
	}
	f := strings.Fields(string(out))
	for _, w := range f {
		if v, ok := strings.CutPrefix(w, "v="); ok {
			return "redis-server " + v + " on loopback"
		}
	}
	return "redis-server on loopback"
}
