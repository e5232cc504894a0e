package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// TestDocsPage loads <prefix>/v1/docs as a reader would, from a prodapi
// whose PRODAPI_TOKEN_URL names a stand-in for Superdesk's auth server,
// and checks:
//
//   - the page renders every operation of the document under its tags,
//     and the operations' code samples (curl, Python, JavaScript);
//   - Authorize takes a bearer token, and Try it out on GET /items then
//     answers 200, the curl line it shows carrying that token;
//   - Authorize takes a client id and secret instead (OAuth 2 client
//     credentials): the page asks the auth server for a token, and Try it
//     out answers 200 with the token the auth server issued;
//   - through it all, no request failed, none left the service and the
//     auth server, no script failed and the Content-Security-Policy
//     refused nothing.
//
// It leaves two screenshots in bin/.
func TestDocsPage(t *testing.T) {
	chromium := findChromium(t)
	root := repoRoot(t)
	bin := buildProdapi(t, root)
	bearer := mintToken(t, bin, "ARCHIVE_READ,DESKS_READ")
	issued := mintToken(t, bin, "ARCHIVE_READ") // what the auth server gives the client
	auth := newAuthServer(t, issued)
	base := startProdapi(t, bin, "PRODAPI_TOKEN_URL="+auth.URL+"/api/auth_server/token")
	doc := fetchDocument(t, base+"/openapi.json")

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
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
	events := &pageEvents{origins: []string{origin, auth.URL}, urls: map[network.RequestID]string{}}
	if err := chromedp.Listen(ctx, events.observe); err != nil {
		t.Fatalf("starting chromium: %v", err)
	}

	// The listener runs before the page's scripts; the page's policy does
	// not apply to what DevTools adds.
	const recordViolations = `window.cspViolations = [];
document.addEventListener("securitypolicyviolation", e =>
	window.cspViolations.push(e.effectiveDirective + " refused " + (e.blockedURI || "inline") + (e.sample ? " (" + e.sample + ")" : "")));`
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
	p := &docsPage{t: t, ctx: ctx, events: events}

	// Swagger UI gives each operation an element whose id is
	// operations-<tag>-<operationId>, and each tag a heading.
	ids, _ := json.Marshal(doc.operationIDs())
	start := time.Now()
	p.wait("every operation rendered", `(ids => ids.every(id => document.querySelector('.opblock[id$="-' + id + '"]')))(`+string(ids)+`)`)
	t.Logf("every operation rendered after %v", time.Since(start).Round(time.Millisecond))
	tags, _ := json.Marshal(doc.tags())
	if missing := p.eval(`(tags => tags.filter(tag => !document.querySelector('h3.opblock-tag[data-tag="' + tag + '"]')))(` + string(tags) + `)`); missing != "[]" {
		t.Errorf("tags without their section: %s", missing)
	}
	p.shoot(root, "docs-page.png", `window.scrollTo(0, 0)`)

	// The code samples of GET /items, opened.
	const items = `.opblock[id$="-listItems"]`
	p.click(items + ` .opblock-summary`)
	p.wait("the code samples of listItems", `document.querySelectorAll('`+items+` .code-samples .tablinks').length === 3`)
	if got := p.eval(`Array.from(document.querySelectorAll('` + items + ` .code-samples .tablinks'), b => b.textContent)`); got != `["curl","Python","JavaScript"]` {
		t.Errorf("listItems code samples: tabs %s", got)
	}
	p.click(items + ` .code-samples .tablinks[data-lang="Python"]`)
	p.wait("the Python sample", `document.querySelector('`+items+` .code-samples').textContent.includes('href = "items?max_results=100&cursor="')`)

	// Authorize with a bearer token, then Try it out.
	p.click(`.auth-wrapper .authorize`)
	p.wait("the authorization dialog", `!!document.querySelector('#auth-bearer-value')`)
	if got := p.eval(`Array.from(document.querySelectorAll('.auth-container h4'), h => h.textContent.replace(/\s+/g, " ").trim())`); !strings.Contains(got, "bearer") || !strings.Contains(got, "oauth2") {
		t.Errorf("the authorization dialog offers %s, want bearer and oauth2", got)
	}
	if err := chromedp.Do(ctx, chromedp.SendKeys(`#auth-bearer-value`, bearer)); err != nil {
		t.Fatal(err)
	}
	p.click(`.auth-container:has(#auth-bearer-value) button.authorize`)
	p.wait("the bearer token taken", `!document.querySelector('#auth-bearer-value')`)
	p.click(`.modal-ux .btn-done`)
	p.tryItems(items, bearer)
	p.shoot(root, "docs-operation.png", `document.querySelector('`+items+` .responses-wrapper').scrollIntoView()`)
	p.click(items + ` .btn-clear`)

	// Log out, and authorize with the client's id and secret instead.
	p.click(`.auth-wrapper .authorize`)
	p.wait("the authorization dialog", `!!document.querySelector('.modal-ux button[aria-label="Remove authorization"]')`)
	p.click(`.modal-ux button[aria-label="Remove authorization"]`)
	p.wait("the OAuth 2 form", `!!document.querySelector('#client_id_clientCredentials')`)
	if err := chromedp.Do(ctx, chromedp.SendKeys(`#client_id_clientCredentials`, authClient), chromedp.SendKeys(`#client_secret_clientCredentials`, authSecret)); err != nil {
		t.Fatal(err)
	}
	p.click(`.modal-ux button[aria-label="Apply given OAuth2 credentials"]`)
	p.wait("the auth server's token taken", `!document.querySelector('#client_id_clientCredentials')`)
	p.click(`.modal-ux .btn-done`)
	if n := auth.tokens.Load(); n != 1 {
		t.Errorf("the auth server issued %d tokens, want 1", n)
	}
	p.tryItems(items, issued)
	p.click(items + ` .btn-clear`)

	if violations := p.eval(`window.cspViolations`); violations != "[]" {
		t.Errorf("Content-Security-Policy violations: %s", violations)
	}
	for _, problem := range events.problems() {
		t.Error(problem)
	}
	if events.requests() < 5 {
		t.Errorf("%d requests seen: the network events are not observed", events.requests())
	}
}

// A docsPage drives the reference page in the browser.
type docsPage struct {
	t      *testing.T
	ctx    context.Context
	events *pageEvents
}

// eval runs a script and returns its value as JSON.
func (p *docsPage) eval(script string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[json.RawMessage](script))
	if err != nil {
		p.t.Fatalf("%s: %v", script, err)
	}
	return string(v)
}

// wait polls a script until it is true; it stops the test, saying what it
// waited for, after two minutes.
func (p *docsPage) wait(what, script string) {
	p.t.Helper()
	_, err := chromedp.Run(p.ctx, chromedp.Poll[bool](script,
		chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(2*time.Minute)))
	if err != nil {
		p.t.Fatalf("waiting for %s: %v; events: %q", what, err, p.events.problems())
	}
}

// click clicks the element a CSS selector names, once it is visible.
func (p *docsPage) click(sel string) {
	p.t.Helper()
	if err := chromedp.Do(p.ctx, chromedp.Click(sel, chromedp.NodeVisible)); err != nil {
		p.t.Fatalf("clicking %s: %v", sel, err)
	}
}

// tryItems runs Try it out on the opened GET /items and checks it
// answers 200, with the curl line Swagger UI shows carrying token.
func (p *docsPage) tryItems(items, token string) {
	p.t.Helper()
	if p.eval(`!!document.querySelector('`+items+` .try-out__btn:not(.cancel)')`) == "true" {
		p.click(items + ` .try-out__btn`)
	}
	p.click(items + ` .btn.execute`)
	p.wait("the answer to Try it out", `!!document.querySelector('`+items+` .live-responses-table tbody .response-col_status')`)
	status := p.eval(`document.querySelector('` + items + ` .live-responses-table tbody .response-col_status').firstChild.textContent.trim()`)
	if status != `"200"` {
		p.t.Errorf("Try it out on GET /items answered %s, want 200: %s", status, p.eval(`document.querySelector('`+items+` .live-responses-table').textContent.slice(0, 500)`))
	}
	curl := p.eval(`document.querySelector('` + items + ` .curl-command').textContent`)
	if !strings.Contains(curl, "Authorization: Bearer "+token) {
		p.t.Errorf("Try it out did not send the token: %s", curl)
	}
}

// shoot runs a script, then saves a screenshot in the repository's bin/.
func (p *docsPage) shoot(root, name, script string) {
	p.t.Helper()
	p.eval(script)
	png, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(root, "bin", name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		p.t.Fatal(err)
	}
	p.t.Logf("screenshot: %s", path)
}

// The client the stand-in auth server knows.
const (
	authClient = "docs-test-client"
	authSecret = "docs-test-client-secret"
)

// An authServer stands in for Superdesk's auth server: its token
// endpoint grants client credentials to authClient, by HTTP Basic
// authentication as Swagger UI sends them, with the token it was given,
// and allows the page's cross-origin requests.
type authServer struct {
	*httptest.Server
	tokens atomic.Int64 // issued
}

func newAuthServer(t *testing.T, token string) *authServer {
	t.Helper()
	a := &authServer{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
		h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Requested-With")
		h.Set("Access-Control-Allow-Methods", "POST")
		switch {
		case r.URL.Path != "/api/auth_server/token":
			http.NotFound(w, r)
		case r.Method == http.MethodOptions:
			w.WriteHeader(http.StatusNoContent)
		case r.Method != http.MethodPost:
			w.WriteHeader(http.StatusMethodNotAllowed)
		default:
			id, secret, ok := r.BasicAuth()
			if r.ParseForm() != nil || r.PostForm.Get("grant_type") != "client_credentials" || !ok || id != authClient || secret != authSecret {
				h.Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				io.WriteString(w, `{"error": "invalid_client"}`)
				return
			}
			a.tokens.Add(1)
			h.Set("Content-Type", "application/json")
			h.Set("Cache-Control", "no-store")
			json.NewEncoder(w).Encode(map[string]any{"access_token": token, "token_type": "Bearer", "expires_in": 3600})
		}
	}))
	t.Cleanup(a.Close)
	return a
}

// pageEvents gathers what went wrong while the page loaded, from
// Chromium's DevTools events.
type pageEvents struct {
	origins []string // the service's, and the auth server's

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
		if u, err := url.Parse(e.Request.URL); err != nil || (u.Scheme != "data" && u.Scheme != "blob" && !slices.Contains(p.origins, u.Scheme+"://"+u.Host)) {
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
// operation's id, and the tags.
type document struct {
	Paths map[string]map[string]json.RawMessage `json:"paths"`
	Tags  []struct {
		Name string `json:"name"`
	} `json:"tags"`
}

// operationIDs are the ids of the document's operations.
func (d *document) operationIDs() []string {
	var ids []string
	for _, item := range d.Paths {
		for method, raw := range item {
			if !slices.Contains([]string{"get", "head", "post", "put", "patch", "delete", "options", "trace"}, method) {
				continue
			}
			var op struct {
				ID string `json:"operationId"`
			}
			if json.Unmarshal(raw, &op) == nil && op.ID != "" {
				ids = append(ids, op.ID)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// tags are the names of the document's tags.
func (d *document) tags() []string {
	var names []string
	for _, tag := range d.Tags {
		names = append(names, tag.Name)
	}
	return names
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
	if n := len(d.operationIDs()); n < 18 || len(d.Tags) == 0 {
		t.Fatalf("the document has %d operations and %d tags", n, len(d.Tags))
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

// secret is the sandbox's AUTH_SERVER_SHARED_SECRET.
const secret = "browser-test-secret-of-at-least-32-bytes"

// buildProdapi builds prodapi from the repository at root.
func buildProdapi(t *testing.T, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "prodapi")
	build := exec.Command("go", "build", "-o", bin, "./cmd/prodapi")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building prodapi: %v\n%s", err, out)
	}
	return bin
}

// mintToken is a token of the sandbox's secret with the scopes, for an
// hour.
func mintToken(t *testing.T, bin, scopes string) string {
	t.Helper()
	cmd := exec.Command(bin, "token", "-scope", scopes, "-ttl", "1h")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "AUTH_SERVER_SHARED_SECRET=" + secret}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("prodapi token: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// startProdapi serves the sample newsroom with bin on a free loopback
// port, with the settings given beside the sandbox's, until the test
// ends; it returns the API's base URL.
func startProdapi(t *testing.T, bin string, settings ...string) string {
	t.Helper()
	// Only what the sandbox needs: a developer's REDIS_URL or MONGO_URI
	// must not reach it. The operator listener on a free port too: another
	// prodapi may hold its default, :5502.
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0")
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "PRODAPI_SANDBOX=sample", "AUTH_SERVER_SHARED_SECRET=" + secret,
		"PRODAPI_OPS_ADDR=127.0.0.1:0"}, settings...)
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
