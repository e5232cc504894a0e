package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// TestDocsPage loads <prefix>/v1/docs and checks three things: the page
// loads with no failed request, no request outside the service, no
// script error and no Content-Security-Policy violation; it renders
// every operation of the document (the nine resources' lists and
// details, and the rest) under the document's tag groups, and its search
// works; and it leaves two screenshots in bin/.
func TestDocsPage(t *testing.T) {
	chromium := findChromium(t)
	root := repoRoot(t)
	base := startProdapi(t, root)
	doc := fetchDocument(t, base+"/openapi.json")

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ctx, cancel = chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1400, 1000),
	)
	defer cancel()
	ctx, cancel = chromedp.NewContext(ctx)
	defer cancel()

	origin := strings.TrimSuffix(base, "/prodapi/v1")
	events := &pageEvents{origin: origin, urls: map[network.RequestID]string{}}
	if err := chromedp.Listen(ctx, events.observe); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}

	// The listener runs before the page's scripts; the page's policy does
	// not apply to what DevTools adds.
	const recordViolations = `window.cspViolations = [];
document.addEventListener("securitypolicyviolation", e =>
	window.cspViolations.push(e.effectiveDirective + " refused " + (e.blockedURI || "inline") + (e.sample ? " (" + e.sample + ")" : "")));`
	ids, _ := json.Marshal(doc.elementIDs())
	if _, err := chromedp.Call(ctx, network.Enable, network.EnableParams{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: recordViolations}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/docs")); err != nil {
		t.Fatal(err)
	}
	// Redoc gives each operation an element whose id is
	// tag/<tag>/operation/<operationId>.
	start := time.Now()
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`(ids => ids.every(id => document.getElementById(id)))(`+string(ids)+`)`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(2*time.Minute)))
	if err != nil {
		missing, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`(ids => ids.filter(id => !document.getElementById(id)))(`+string(ids)+`)`))
		present, _ := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('[id*="/operation/"]'), e => e.id)`))
		t.Fatalf("the page did not render every operation: %v; missing %q; present %q; events: %q", err, missing, present, events.problems())
	}

	t.Logf("every operation rendered after %v", time.Since(start).Round(time.Millisecond))

	// The menu shows the document's tag groups, each with its tags.
	menu, err := chromedp.Run(ctx, chromedp.Evaluate[map[string][]string](menuScript))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range doc.TagGroups {
		if got := menu[g.Name]; !slices.Equal(got, g.Tags) {
			t.Errorf("menu group %s lists %v, want %v (menu: %v)", g.Name, got, g.Tags, menu)
		}
	}

	shoot := func(name, script string) {
		t.Helper()
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[any](script)); err != nil {
			t.Errorf("screenshot %s: %v", name, err)
			return
		}
		png, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Errorf("screenshot %s: %v", name, err)
			return
		}
		path := filepath.Join(root, "bin", name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s", path)
	}
	shoot("docs-page.png", `window.scrollTo(0, 0)`)
	shoot("docs-operation.png", `document.getElementById("tag/Items/operation/listItems").scrollIntoView()`)

	// Search runs in Redoc's worker, which the policy must let start.
	err = chromedp.Do(ctx, chromedp.SendKeys(`input.search-input`, "assignment"))
	results, err2 := chromedp.Run(ctx, chromedp.Poll[int](`document.querySelectorAll('[data-role="search:results"] > li').length`,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(time.Minute)))
	if err := errors.Join(err, err2); err != nil || results == 0 {
		t.Errorf("searching the page: %v, %d results", err, results)
	}

	// The style elements the bundle makes without the nonce are those
	// whose hashes the policy lists, and only those.
	policy, err := chromedp.Run(ctx, chromedp.Evaluate[string](`fetch(location.href).then(r => r.headers.get("Content-Security-Policy"))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	hashes, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](styleHashesScript, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	listed := regexp.MustCompile(`'sha256-[^']+'`).FindAllString(policy, -1)
	for _, h := range hashes {
		if !slices.Contains(listed, h) {
			t.Errorf("a style element without the nonce hashes to %s, which the policy does not list (docsui.StyleHashes)", h)
		}
	}
	for _, h := range listed {
		if h != emptyHash && !slices.Contains(hashes, h) {
			t.Errorf("the policy lists %s, which no style element has (docsui.StyleHashes)", h)
		}
	}

	violations, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`window.cspViolations`))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range violations {
		t.Errorf("Content-Security-Policy violation: %s", v)
	}
	for _, p := range events.problems() {
		t.Error(p)
	}
	if events.requests() < 3 {
		t.Errorf("%d requests seen: the network events are not observed", events.requests())
	}
}

// menuScript reads Redoc's menu: each tag group and the tags under it,
// in order.
const menuScript = `(() => {
	const groups = {};
	for (const g of document.querySelectorAll('li[data-item-id^="group/"]')) {
		groups[g.getAttribute("aria-label")] = Array.from(
			g.querySelectorAll(':scope > ul > li[data-item-id^="tag/"]'), li => li.getAttribute("aria-label"));
	}
	return groups;
})()`

// styleHashesScript hashes, as CSP hash sources, the style elements that
// carry no nonce.
const styleHashesScript = `Promise.all(Array.from(document.querySelectorAll("style"))
	.filter(s => !s.nonce)
	.map(async s => {
		const sum = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(s.textContent));
		return "'sha256-" + btoa(String.fromCharCode(...new Uint8Array(sum))) + "'";
	}))`

// emptyHash is the hash source of an empty style element: the bundle
// inserts its stylesheet's element empty, then fills it.
const emptyHash = "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='"

// pageEvents gathers what went wrong while the page loaded, from
// Chromium's DevTools events.
type pageEvents struct {
	origin string

	mu    sync.Mutex
	urls  map[network.RequestID]string
	seen  int
	found []string
}

func (p *pageEvents) add(format string, args ...any) {
	p.found = append(p.found, fmt.Sprintf(format, args...))
}

func (p *pageEvents) observe(ev any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		p.seen++
		p.urls[e.RequestID] = e.Request.URL
		if u, err := url.Parse(e.Request.URL); err != nil || (u.Scheme != "data" && u.Scheme != "blob" && u.Scheme+"://"+u.Host != p.origin) {
			p.add("a request outside the service: %s", e.Request.URL)
		}
	case *network.EventResponseReceived:
		if e.Response.Status >= 400 {
			p.add("%s answered %d", e.Response.URL, int(e.Response.Status))
		}
	case *network.EventLoadingFailed:
		p.add("request failed: %s: %s %s", p.urls[e.RequestID], e.ErrorText, e.BlockedReason)
	case *runtime.EventExceptionThrown:
		d := e.ExceptionDetails
		text := d.Text
		if d.Exception != nil {
			text += " " + d.Exception.Description
		}
		p.add("script error at %s:%d: %s", d.URL, d.LineNumber+1, text)
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range e.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			p.add("console %s: %s", e.Type, strings.Join(args, " "))
		}
	case *cdplog.EventEntryAdded:
		if e.Entry.Level == cdplog.EntryLevelError || e.Entry.Level == cdplog.EntryLevelWarning {
			p.add("log %s (%s): %s %s", e.Entry.Level, e.Entry.Source, e.Entry.Text, e.Entry.URL)
		}
	}
}

func (p *pageEvents) problems() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.found)
}

func (p *pageEvents) requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen
}

// document is what the test reads of the served OpenAPI document: each
// operation's id and first tag, and the tag groups.
type document struct {
	Paths     map[string]map[string]json.RawMessage `json:"paths"`
	TagGroups []struct {
		Name string   `json:"name"`
		Tags []string `json:"tags"`
	} `json:"x-tagGroups"`
}

// elementIDs are the ids Redoc gives the operations' elements.
func (d *document) elementIDs() []string {
	var ids []string
	for _, item := range d.Paths {
		for method, raw := range item {
			if !slices.Contains([]string{"get", "head", "post", "put", "patch", "delete", "options", "trace"}, method) {
				continue
			}
			var op struct {
				ID   string   `json:"operationId"`
				Tags []string `json:"tags"`
			}
			if json.Unmarshal(raw, &op) == nil && op.ID != "" && len(op.Tags) > 0 {
				ids = append(ids, "tag/"+strings.ReplaceAll(op.Tags[0], " ", "-")+"/operation/"+op.ID)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

func fetchDocument(t *testing.T, url string) *document {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var d document
	if err := json.NewDecoder(res.Body).Decode(&d); err != nil || res.StatusCode != 200 {
		t.Fatalf("GET %s: %d, %v", url, res.StatusCode, err)
	}
	// The nine resources have a list and a detail each.
	if n := len(d.elementIDs()); n < 18 || len(d.TagGroups) == 0 {
		t.Fatalf("the document has %d operations and %d tag groups", n, len(d.TagGroups))
	}
	return &d
}

// findChromium finds Debian's chromium, or skips (fails under
// PRODAPI_REQUIRE_REAL).
func findChromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err == nil {
		return path
	}
	const how = "chromium is not on PATH (apt-get install chromium)"
	if os.Getenv("PRODAPI_REQUIRE_REAL") != "" {
		t.Fatal(how)
	}
	t.Skip(how)
	return ""
}

// repoRoot is the main module's directory, two levels up.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !strings.HasPrefix(string(mod), "module github.com/prodapi/prodapi\n") {
		t.Fatalf("%s is not prodapi's module: %v", root, err)
	}
	return root
}

// startProdapi builds prodapi and serves the sample newsroom on a free
// loopback port until the test ends; it returns the API's base URL.
func startProdapi(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "prodapi")
	build := exec.Command("go", "build", "-o", bin, "./cmd/prodapi")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building prodapi: %v\n%s", err, out)
	}
	// Only what the sandbox needs: a developer's REDIS_URL or MONGO_URI
	// must not reach it. The operator listener on a free port too: another
	// prodapi may hold its default, :5502.
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "PRODAPI_SANDBOX=sample", "AUTH_SERVER_SHARED_SECRET=browser-test-secret-of-at-least-32-bytes",
		"PRODAPI_OPS_ADDR=127.0.0.1:0"}
	stdout, w := io.Pipe()
	cmd.Stdout = w
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { // ends when prodapi exits, at the latest on the cleanup's signal
		waitErr = cmd.Wait()
		w.Close()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-exited
		}
	})

	// The banner names the address it listens on.
	addr := make(chan string, 1)
	go func() { // ends at the end of prodapi's output
		listening := regexp.MustCompile(`\(listening on ([^)]+)\)`)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
				break
			}
		}
		io.Copy(io.Discard, stdout) // until prodapi exits and its output closes
	}()
	select {
	case a := <-addr:
		return "http://" + a + "/prodapi/v1"
	case <-exited:
		t.Fatalf("prodapi exited: %v\n%s", waitErr, stderr.String())
	case <-time.After(2 * time.Minute):
		t.Fatalf("prodapi did not say where it listens\n%s", stderr.String())
	}
	return ""
}
