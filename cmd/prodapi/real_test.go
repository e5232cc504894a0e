package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/elastic/estest"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
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
	status, _, body := remote.getOps(t, "/readyz")
	var ready struct{ Checks map[string]string }
	json.Unmarshal(body, &ready)
	if status != 200 || ready.Checks["mongo"] != "ok" || ready.Checks["elastic"] != "ok" {
		t.Errorf("GET /readyz: %d %s; want 200 with mongo and elastic ok", status, body)
	}
	compareWithSandbox(t, remote, local, bearer(t, devSecret, sources.AllScopes...), false)
}

// seedPlatform runs cmd/prodapi-seed, as compose.yaml does, with the
// platform's variables (pairs in env), loading targets, with flags args
// after its own. It is built once for the package's tests.
func seedPlatform(t testing.TB, targets string, env []string, args ...string) {
	t.Helper()
	start := time.Now()
	if out, err := runSeed(seedBinary(t), targets, env, args...); err != nil {
		t.Fatalf("prodapi-seed: %v\n%s", err, out)
	}
	t.Logf("seeded in %s", time.Since(start).Round(time.Millisecond))
}

// seedBinary is cmd/prodapi-seed, built once for the package's tests.
func seedBinary(t testing.TB) string { return commandBinary(t, "prodapi-seed") }

// commandBinary is cmd/<name>, built once for the package's tests.
func commandBinary(t testing.TB, name string) string {
	t.Helper()
	return realserver.Shared(t, &servers, name, func() (string, error) {
		goBin, err := realserver.LookPath("go", "install the Go toolchain named in go.mod (https://go.dev/dl/)")
		if err != nil {
			return "", err
		}
		dir, err := os.MkdirTemp("", name+"-")
		if err != nil {
			return "", err
		}
		servers.OnClose(func() { os.RemoveAll(dir) })
		bin := filepath.Join(dir, name)
		if out, err := exec.Command(goBin, "build", "-o", bin, "github.com/prodapi/prodapi/cmd/"+name).CombinedOutput(); err != nil {
			return "", fmt.Errorf("building %s: %v\n%s", name, err, out)
		}
		return bin, nil
	})
}

// runSeed runs the seed bin as seedPlatform does and returns what it
// wrote.
func runSeed(bin, targets string, env []string, args ...string) ([]byte, error) {
	cmd := exec.Command(bin, append([]string{"-targets", targets, "-wait", "2m"}, args...)...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	for i := 0; i+1 < len(env); i += 2 {
		cmd.Env = append(cmd.Env, env[i]+"="+env[i+1])
	}
	return cmd.CombinedOutput()
}

// awaitEntry long-polls /changes from *since (which it moves) until an
// entry "op resource/id" comes, and returns when it came.
func awaitEntry(t *testing.T, in *instance, auth string, since *string, entry string) time.Time {
	t.Helper()
	var arrived time.Time
	eventually(t, entry+" in /changes", func() bool {
		_, _, body := in.get(t, "/prodapi/v1/changes?wait=5&since="+url.QueryEscape(*since), auth)
		var p changesPage
		if json.Unmarshal(body, &p) != nil {
			return false
		}
		*since = p.Meta.Since
		for _, e := range p.Items {
			if e.Op+" "+e.Resource+"/"+e.DocID == entry {
				arrived = time.Now()
				return true
			}
		}
		return false
	})
	return arrived
}

// TestRealPollFallback: over FerretDB, which has no change streams, the
// feed's holder polls _updated, and reconciles the ids for deletions
// (every 300ms here). /readyz says how late deletions may be; a desk
// written in the database reaches /changes as an update, and the cache
// serves the new desk long before its TTL (an hour); the desk deleted
// reaches /changes as a delete, and the cache answers 404.
func TestRealPollFallback(t *testing.T) {
	ferret := servers.FerretDB(t)
	es := servers.Elastic(t)
	rs := realserver.StartRedis(t, 0)
	uri := strings.TrimSuffix(ferret.URI, "/") + "/superdesk_poll"
	env := []string{
		"MONGO_URI", uri,
		"ELASTICSEARCH_URL", es.URL,
		"ELASTICSEARCH_INDEX", "superdesk_poll",
	}
	seedPlatform(t, "mongo,elastic", env)
	in := start(t, append([]string{"PRODAPI_SANDBOX", "", "REDIS_URL", rs.URL(), "PRODAPI_CACHE_TTL", "1h",
		"PRODAPI_FEED_POLL", "100ms", "PRODAPI_FEED_RECONCILE", "300ms"}, env...)...)
	t.Cleanup(func() {
		if t.Failed() {
			_, _, m := in.getOps(t, "/metrics")
			for line := range strings.SplitSeq(string(m), "\n") {
				if !strings.HasPrefix(line, "#") && (strings.Contains(line, "changes_") || strings.Contains(line, "feed_") || strings.Contains(line, "poll")) {
					t.Log(line)
				}
			}
			for line := range strings.SplitSeq(in.stderr.String(), "\n") {
				if strings.Contains(line, "feed") || strings.Contains(line, "change") {
					t.Log(line)
				}
			}
		}
	})
	eventually(t, "/readyz to say the feed polls", func() bool {
		_, _, body := in.getOps(t, "/readyz")
		var ready struct{ Notes map[string]string }
		return json.Unmarshal(body, &ready) == nil && strings.Contains(ready.Notes["change_feed"], "walks every collection's ids every 300ms for deletions")
	})
	auth := bearer(t, devSecret, "DESKS_READ")
	const id = "67c42d4c957184d45484e656"
	desk := "/prodapi/v1/desks/" + id
	for range 2 {
		if status, _, body := in.get(t, desk, auth); status != 200 || strings.Contains(string(body), "Polled desk") {
			t.Fatalf("the desk: %d %.200s", status, body)
		}
	}
	if _, h, _ := in.get(t, desk, auth); !strings.Contains(h.Get("Cache-Status"), "; hit") {
		t.Fatalf("Cache-Status %q, want a hit", h.Get("Cache-Status"))
	}
	_, _, body := in.get(t, "/prodapi/v1/changes?since=now", auth)
	var page changesPage
	if err := json.Unmarshal(body, &page); err != nil || page.Meta.Since == "" {
		t.Fatalf("since=now: %s", body)
	}

	// The poll's first round takes what is there as its starting point;
	// a write after its second round is news.
	polls := `prodapi_source_queries_total{backend="mongo",op="poll",resource="desks"}`
	first := in.metric(t, polls)
	eventually(t, "two more polls of desks", func() bool { return in.metric(t, polls) >= first+3 })

	client, err := mongodriver.Connect(mongosrc.ClientOptions(uri, 2, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.Background())
	oid, err := bson.ObjectIDFromHex(id)
	if err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	res, err := client.Database("superdesk_poll").Collection("desks").UpdateOne(context.Background(), bson.D{{Key: "_id", Value: oid}},
		bson.D{{Key: "$set", Value: bson.D{{Key: "name", Value: "Polled desk"}, {Key: "_updated", Value: written.UTC().Truncate(time.Second)},
			{Key: "_etag", Value: "polled"}}}})
	if err != nil || res.MatchedCount != 1 {
		t.Fatalf("updating the desk: %v %+v", err, res)
	}
	since := page.Meta.Since
	arrived := awaitEntry(t, in, auth, &since, "update desks/"+id)
	t.Logf("from the write to its entry in /changes: %s (PRODAPI_FEED_POLL=100ms)", arrived.Sub(written).Round(time.Millisecond))
	// What a poll costs, per collection (the sample's sizes, no index on
	// _updated): the mean time of its query.
	_, _, m := in.getOps(t, "/metrics")
	sums, counts := map[string]float64{}, map[string]float64{}
	for line := range strings.SplitSeq(string(m), "\n") {
		for name, into := range map[string]map[string]float64{"sum": sums, "count": counts} {
			rest, ok := strings.CutPrefix(line, `prodapi_source_query_duration_seconds_`+name+`{backend="mongo",op="poll",resource="`)
			if !ok {
				continue
			}
			res, v, _ := strings.Cut(rest, `"} `)
			f, _ := strconv.ParseFloat(v, 64)
			into[res] = f
		}
	}
	for res, n := range counts {
		if n > 0 {
			t.Logf("poll of %s: %d queries, mean %.2f ms", res, int(n), 1000*sums[res]/n)
		}
	}
	eventually(t, "the cache to serve the new desk", func() bool {
		_, _, body := in.get(t, desk, auth)
		return strings.Contains(string(body), "Polled desk")
	})

	// Deleted: the reconcile's next round finds it gone.
	deleted := time.Now()
	if res, err := client.Database("superdesk_poll").Collection("desks").DeleteOne(context.Background(),
		bson.D{{Key: "_id", Value: oid}}); err != nil || res.DeletedCount != 1 {
		t.Fatalf("deleting the desk: %v %+v", err, res)
	}
	arrived = awaitEntry(t, in, auth, &since, "delete desks/"+id)
	t.Logf("from the deletion to its entry in /changes: %s (PRODAPI_FEED_RECONCILE=300ms)", arrived.Sub(deleted).Round(time.Millisecond))
	if status, _, body := in.get(t, desk, auth); status != 404 {
		t.Errorf("the deleted desk, after its entry: %d %.200s", status, body)
	}
}
