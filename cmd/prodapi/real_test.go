package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/elastic/estest"
	"github.com/prodapi/prodapi/sources/sourcestest"
	"github.com/prodapi/prodapi/test/realserver"
)

// servers are the real servers this package's tests share: FerretDB and
// an Elasticsearch 7.10 node, started on first use and stopped by PID
// when the package's tests end.
var servers realserver.Set

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

// TestRealPlatform is TestIntegrationStack on every test run, without
// Docker: prodapi-seed loads the sample into a real FerretDB (MongoDB
// wire) and a real Elasticsearch 7.10 node, prodapi runs in-process on
// them, and every golden request, linked detail and asset is answered
// as the sandbox over the sample answers it.
func TestRealPlatform(t *testing.T) {
	ferret := servers.FerretDB(t)
	es := servers.Elastic(t)
	t.Logf("FerretDB %s at %s; Elasticsearch %s at %s", ferret.Version, ferret.URI, es.Version, es.URL)
	env := []string{
		"MONGO_URI", strings.TrimSuffix(ferret.URI, "/") + "/superdesk_real",
		"ELASTICSEARCH_URL", es.URL,
		"ELASTICSEARCH_INDEX", "superdesk_real",
	}
	seedPlatform(t, "mongo,elastic", env)
	compareRealWithSandbox(t, env)
}

// TestRealMongo holds the MongoDB half of TestRealPlatform apart, so that
// each half's differences show on their own: prodapi over FerretDB,
// seeded by prodapi-seed, with the Elasticsearch fake for search.
func TestRealMongo(t *testing.T) {
	ferret := servers.FerretDB(t)
	t.Logf("FerretDB %s at %s", ferret.Version, ferret.URI)
	docs, err := sourcestest.Fixtures(sampleDir)
	if err != nil {
		t.Fatal(err)
	}
	search := map[string][]*sources.Doc{}
	for _, r := range sources.Resources() {
		if r.Search {
			search[r.Collection] = docs[r.Collection]
		}
	}
	es := estest.New(t, estest.Options{Docs: search})
	env := []string{
		"MONGO_URI", strings.TrimSuffix(ferret.URI, "/") + "/superdesk_mongo",
		"ELASTICSEARCH_URL", es.URL,
		"ELASTICSEARCH_INDEX", "superdesk",
	}
	seedPlatform(t, "mongo", env)
	compareRealWithSandbox(t, env)
}

// compareRealWithSandbox runs prodapi in-process over the platform env
// names (pairs) and the sandbox over the sample, with the same public URL
// and secret, and compares their answers.
func compareRealWithSandbox(t *testing.T, env []string) {
	t.Helper()
	const publicURL = "http://prodapi.test"
	remote := start(t, append([]string{"PRODAPI_SANDBOX", "", "PRODAPI_URL", publicURL}, env...)...)
	local := start(t, "PRODAPI_URL", publicURL)
	status, _, body := remote.get(t, "/readyz", "")
	var ready struct{ Checks map[string]string }
	json.Unmarshal(body, &ready)
	if status != 200 || ready.Checks["mongo"] != "ok" || ready.Checks["elastic"] != "ok" {
		t.Errorf("GET /readyz: %d %s; want 200 with mongo and elastic ok", status, body)
	}
	compareWithSandbox(t, remote, local, bearer(t, devSecret, sources.AllScopes...), false)
}

// seedPlatform runs cmd/prodapi-seed, as compose.yaml does, with the
// platform's variables (pairs in env), loading targets. It is built once
// for the package's tests.
func seedPlatform(t *testing.T, targets string, env []string) {
	t.Helper()
	bin := realserver.Shared(t, &servers, "prodapi-seed", func() (string, error) {
		goBin, err := realserver.LookPath("go", "install the Go toolchain named in go.mod (https://go.dev/dl/)")
		if err != nil {
			return "", err
		}
		dir, err := os.MkdirTemp("", "prodapi-seed-")
		if err != nil {
			return "", err
		}
		servers.OnClose(func() { os.RemoveAll(dir) })
		bin := filepath.Join(dir, "prodapi-seed")
		if out, err := exec.Command(goBin, "build", "-o", bin, "github.com/prodapi/prodapi/cmd/prodapi-seed").CombinedOutput(); err != nil {
			return "", fmt.Errorf("building prodapi-seed: %v\n%s", err, out)
		}
		return bin, nil
	})
	cmd := exec.Command(bin, "-targets", targets, "-wait", "2m")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for i := 0; i+1 < len(env); i += 2 {
		cmd.Env = append(cmd.Env, env[i]+"="+env[i+1])
	}
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("prodapi-seed: %v\n%s", err, out)
	}
	t.Logf("seeded in %s", time.Since(start).Round(time.Millisecond))
}
