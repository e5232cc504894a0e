package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// Integration tests against the stack of compose.yaml (make integration):
// the service answers every request as the sandbox holding the same
// documents does. The fakes of platform_test.go show the same through the
// adapters in-process; these show it against MongoDB 7, Elasticsearch 8,
// Redis and MinIO, seeded by cmd/prodapi-seed.
//
//	PRODAPI_INTEGRATION=1       run them (skipped otherwise) against the stack of
//	                            make stack: prodapi on http://localhost:5500 (its
//	                            operator listener on :5502) and, with media in object
//	                            storage, prodapi-s3 on :5501 (:5503)
//	PRODAPI_INTEGRATION=flips   TestIntegrationReadyzFlips too: it stops and starts the
//	                            stack's backends with docker compose (run it alone)
//	AUTH_SERVER_SHARED_SECRET   the secret the stack was started with, as for
//	                            compose.yaml (default: compose's)

// stackDefaultSecret is compose.yaml's default AUTH_SERVER_SHARED_SECRET
// (the Makefile's DEV_SECRET).
const stackDefaultSecret = "sandbox-only-secret-never-use-in-production"

// A stackService is a prodapi of the stack.
type stackService struct {
	name, url string
	ops       string // the operator listener's URL: probes and /metrics
	redirects bool   // media come from object storage: assets answer 302
}

func requireStack(t *testing.T) (services []stackService, secret string) {
	t.Helper()
	if os.Getenv("PRODAPI_INTEGRATION") == "" {
		t.Skip("set PRODAPI_INTEGRATION=1 (make integration) to compare the prodapi of compose.yaml " +
			"(http://localhost:5500, and its S3 twin on :5501) with the sandbox, request by request")
	}
	services = []stackService{
		{name: "gridfs", url: "http://localhost:5500", ops: "http://localhost:5502"},
		{name: "s3", url: "http://localhost:5501", ops: "http://localhost:5503", redirects: true},
	}
	return services, stackSecret()
}

// stackSecret is the secret the stack signs with: compose.yaml's
// AUTH_SERVER_SHARED_SECRET, taken from the environment as compose
// takes it.
func stackSecret() string {
	return cmp.Or(os.Getenv("AUTH_SERVER_SHARED_SECRET"), stackDefaultSecret)
}

// TestIntegrationStack sends every request of the golden suite
// (server/testdata/*.golden), and the details of documents with links,
// to the stack's prodapi and to an in-process sandbox over the sample
// with the same public URL and secret, and compares the answers: status,
// type, X-Total-Count and the parsed JSON body. Field order is not
// compared (Elasticsearch lists end with _id, as the original's did);
// everything else is. Media come back with the sandbox's bytes.
func TestIntegrationStack(t *testing.T) {
	services, secret := requireStack(t)
	tok := bearer(t, secret, sources.AllScopes...)
	for _, svc := range services {
		t.Run(svc.name, func(t *testing.T) {
			remote := &instance{base: svc.url, ops: svc.ops}
			local := start(t, "PRODAPI_URL", svc.url, "AUTH_SERVER_SHARED_SECRET", secret)

			t.Run("readyz", func(t *testing.T) {
				status, _, body := remote.getOps(t, "/readyz")
				var ready struct {
					Status string
					Checks map[string]string
				}
				json.Unmarshal(body, &ready)
				// Every backend answers: these three at least, and any other.
				allOK := len(ready.Checks) > 0
				for _, c := range []string{"mongo", "elastic", "redis"} {
					allOK = allOK && ready.Checks[c] == "ok"
				}
				for _, state := range ready.Checks {
					allOK = allOK && state == "ok"
				}
				if status != 200 || ready.Status != "ready" || !allOK {
					t.Errorf("GET /readyz: %d %s; want 200, ready, with mongo, elastic and redis ok", status, body)
				}
			})

			compareWithSandbox(t, remote, local, tok, svc.redirects)
		})
	}
}

// compareWithSandbox sends every request of the golden suite, the details
// of documents with links, and every sample asset to remote, a prodapi
// over a platform seeded with the sample, and to local, the sandbox over
// the sample with the same public URL and secret, and compares the
// answers (compareStack, compareAsset). redirects: remote serves media
// from object storage.
func compareWithSandbox(t *testing.T, remote, local *instance, tok string, redirects bool) {
	t.Helper()
	t.Run("responses", func(t *testing.T) {
		targets := stackGoldenTargets(t)
		for _, r := range []string{"items", "planning", "events", "assignments"} {
			targets = append(targets, stackDetails(t, local, r, tok)...)
		}
		for _, target := range targets {
			compareStack(t, remote, local, target, tok)
		}
	})
	t.Run("walks", func(t *testing.T) {
		for _, r := range sources.Resources() {
			compareWalks(t, remote, local, r.Name, tok)
		}
	})
	t.Run("assets", func(t *testing.T) {
		entries, err := fs.ReadDir(sandbox.SampleFS(), "assets")
		if err != nil || len(entries) == 0 {
			t.Fatalf("the sample has no assets: %v", err)
		}
		for _, e := range entries {
			compareAsset(t, remote, local, "/prodapi/v1/assets/"+e.Name(), tok, redirects)
		}
	})
}

// compareWalks walks a resource by cursor, two documents a page, on
// remote and on local: each serves every document of the list exactly
// once, the same documents. (Ties may come in another order: on
// Elasticsearch 8 some resources break them by a point in time's shard
// order, the sandbox by _id.)
func compareWalks(t *testing.T, remote, local *instance, resource, tok string) {
	t.Helper()
	walk := func(in *instance) map[string]int {
		t.Helper()
		w := &walker{name: "walk of " + resource, next: "/prodapi/v1/" + resource + "?max_results=2&cursor=", auth: tok, seen: map[string]int{}}
		for w.next != "" && w.pages <= 10000 {
			w.step(t, in)
		}
		return w.seen
	}
	got, want := walk(remote), walk(local)
	if len(want) == 0 || slices.ContainsFunc(slices.Collect(maps.Values(want)), func(n int) bool { return n != 1 }) {
		t.Fatalf("the sandbox's walk of %s: %v", resource, want)
	}
	if diff := gocmp.Diff(got, want); diff != "" {
		t.Errorf("walk of %s, documents and times served (-stack +sandbox):\n%s", resource, diff)
	}
}

// stackGoldenTargets are the requests of server's golden suite, read from
// the first line of each golden file ("GET <target>"), so that the two
// suites cannot drift apart.
func stackGoldenTargets(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "server", "testdata", "*.golden"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files: %v", err)
	}
	var targets []string
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		first, err := bufio.NewReader(fh).ReadString('\n')
		fh.Close()
		target, ok := strings.CutPrefix(strings.TrimSpace(first), "GET ")
		if err != nil || !ok {
			t.Fatalf("%s does not start with GET <target>", f)
		}
		targets = append(targets, strings.ReplaceAll(target, " ", "%20"))
	}
	return targets
}

// stackDetails are detail targets of the first documents of a resource's
// default list, as the sandbox lists them.
func stackDetails(t *testing.T, local *instance, resource, tok string) []string {
	t.Helper()
	status, _, body := local.get(t, "/prodapi/v1/"+resource+"?max_results=4", tok)
	var list struct {
		Items []struct {
			ID string `json:"_id"`
		} `json:"_items"`
	}
	if err := json.Unmarshal(body, &list); status != 200 || err != nil || len(list.Items) == 0 {
		t.Fatalf("sandbox %s: %d %v", resource, status, err)
	}
	var out []string
	for _, it := range list.Items {
		out = append(out, "/prodapi/v1/"+resource+"/"+url.PathEscape(it.ID))
	}
	return out
}

func compareStack(t *testing.T, remote, local *instance, target, tok string) {
	t.Helper()
	ls, lh, lb := local.get(t, target, tok)
	rs, rh, rb := remote.get(t, target, tok)
	if rs != ls || rh.Get("Content-Type") != lh.Get("Content-Type") || rh.Get("X-Total-Count") != lh.Get("X-Total-Count") {
		t.Errorf("GET %s: stack %d %q total %q, sandbox %d %q total %q\nstack: %.600s\nsandbox: %.600s", target,
			rs, rh.Get("Content-Type"), rh.Get("X-Total-Count"), ls, lh.Get("Content-Type"), lh.Get("X-Total-Count"), rb, lb)
		return
	}
	got, errR := stackJSON(rb)
	want, errL := stackJSON(lb)
	if errR != nil || errL != nil {
		t.Errorf("GET %s: bodies are not JSON: stack %v, sandbox %v", target, errR, errL)
		return
	}
	if diff := gocmp.Diff(got, want); diff != "" {
		t.Errorf("GET %s (-stack +sandbox):\n%s", target, diff)
	} else if !bytes.Equal(rb, lb) {
		t.Logf("GET %s: same JSON, in another field order", target)
	}
}

// stackJSON parses a body keeping numbers as written, so that 2 and 2.0
// differ.
func stackJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// compareAsset checks that the stack serves a media file with the
// sandbox's bytes: streamed from GridFS with the sandbox's headers (the
// seed stores its md5 and time), or redirected to object storage.
func compareAsset(t *testing.T, remote, local *instance, target, tok string, redirects bool) {
	t.Helper()
	ls, lh, want := local.get(t, target, tok)
	if ls != 200 {
		t.Fatalf("sandbox GET %s: %d", target, ls)
	}
	noFollow := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(c *http.Client, u, auth string) (*http.Response, []byte) {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		res, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, b
	}
	res, got := get(noFollow, remote.base+target, tok)
	switch {
	case res.StatusCode == http.StatusFound:
		loc := res.Header.Get("Location")
		obj, data := get(noFollow, loc, "")
		if obj.StatusCode != 200 || !bytes.Equal(data, want) || obj.Header.Get("Content-Type") != lh.Get("Content-Type") {
			t.Errorf("GET %s -> %s: %d %q, %d bytes; want 200 %q and the sandbox's %d bytes",
				target, loc, obj.StatusCode, obj.Header.Get("Content-Type"), len(data), lh.Get("Content-Type"), len(want))
		}
	case redirects:
		t.Errorf("GET %s: %d, want a redirect to object storage", target, res.StatusCode)
	case res.StatusCode == http.StatusOK:
		if !bytes.Equal(got, want) {
			t.Errorf("GET %s: %d bytes, want the sandbox's %d", target, len(got), len(want))
		}
		for _, h := range []string{"Content-Type", "Content-Length", "Etag", "Last-Modified", "Cache-Control", "Content-Disposition"} {
			if res.Header.Get(h) != lh.Get(h) {
				t.Errorf("GET %s: %s %q, sandbox %q", target, h, res.Header.Get(h), lh.Get(h))
			}
		}
	default:
		t.Errorf("GET %s: %d %s", target, res.StatusCode, got)
	}
}

// TestIntegrationReadyzFlips stops the stack's backends and starts them
// again: /readyz degrades as Redis, MongoDB and Elasticsearch go, and
// stays 200 with all three down (readiness is the replica's own: the
// stack's prodapi keeps PRODAPI_READY_REQUIRES_BACKENDS unset), while a
// list it never served answers 503; it is ready again when they are
// back. It changes the stack under every other test, so make integration
// runs it alone, after them.
func TestIntegrationReadyzFlips(t *testing.T) {
	services, _ := requireStack(t)
	if os.Getenv("PRODAPI_INTEGRATION") != "flips" {
		t.Skip("set PRODAPI_INTEGRATION=flips to stop and start the stack's backends " +
			"(make integration runs this test alone, after the others)")
	}
	composeFile := filepath.Join("..", "..", "compose.yaml") // the repository's, from this package
	compose := func(args ...string) {
		t.Helper()
		cmd := exec.Command("docker", append([]string{"compose", "-f", composeFile}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("docker compose %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	remote := &instance{base: services[0].url, ops: services[0].ops}
	type readiness struct {
		code   int
		Status string
		Checks map[string]string
	}
	// await polls /readyz until ok holds; a real stack has no event to
	// wait on, so this is a bounded poll.
	await := func(what string, within time.Duration, ok func(readiness) bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			status, _, body := remote.getOps(t, "/readyz")
			r := readiness{code: status}
			json.Unmarshal(body, &r)
			if ok(r) {
				t.Logf("%s: %d %s", what, status, body)
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: /readyz still answers %d %s after %s", what, status, body, within)
			}
			<-tick.C
		}
	}
	backends := []string{"mongo", "elasticsearch", "redis"}
	t.Cleanup(func() {
		compose(append([]string{"start"}, backends...)...)
		await("the stack restored", 3*time.Minute, func(r readiness) bool { return r.code == 200 && r.Status == "ready" })
	})

	await("at first", time.Minute, func(r readiness) bool { return r.code == 200 && r.Status == "ready" })
	compose("stop", "redis")
	await("redis stopped", time.Minute, func(r readiness) bool {
		return r.code == 200 && r.Status == "degraded" && r.Checks["redis"] != "ok" && r.Checks["mongo"] == "ok"
	})
	compose("stop", "mongo")
	await("mongo stopped too", time.Minute, func(r readiness) bool {
		return r.code == 200 && r.Status == "degraded" && r.Checks["mongo"] != "ok" && r.Checks["elastic"] == "ok"
	})
	compose("stop", "elasticsearch")
	await("elasticsearch stopped too", time.Minute, func(r readiness) bool {
		return r.code == 200 && r.Status == "degraded" && r.Checks["elastic"] != "ok" && r.Checks["mongo"] != "ok"
	})
	tok := bearer(t, stackSecret(), sources.AllScopes...)
	if status, h, body := remote.get(t, "/prodapi/v1/items?max_results=17", tok); status != 503 || h.Get("Retry-After") == "" {
		t.Errorf("a list never served, every backend down: %d %v %s; want 503 with Retry-After", status, h, body)
	}
	compose(append([]string{"start"}, backends...)...)
	await("all started again", 3*time.Minute, func(r readiness) bool {
		return r.code == 200 && r.Status == "ready" &&
			!slices.ContainsFunc([]string{"mongo", "elastic", "redis"}, func(c string) bool { return r.Checks[c] != "ok" })
	})
	// And it serves again, from the restarted backends.
	if status, _, body := remote.get(t, "/prodapi/v1/users?max_results=1", tok); status != 200 {
		t.Errorf("users after recovery: %d %s", status, body)
	}
}
