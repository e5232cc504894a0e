package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"mime"
	"net/url"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/elastic/estest"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
	"github.com/prodapi/prodapi/sources/sandbox"
	"github.com/prodapi/prodapi/sources/sourcestest"
	"github.com/prodapi/prodapi/test/realserver"
)

// platform starts the protocol-level fakes of MongoDB (with the sample's
// media in GridFS) and Elasticsearch, seeded with the sample newsroom, and
// prodapi on them through the real drivers, exactly as it runs against a
// platform: no sandbox. backendTimeout is PRODAPI_BACKEND_TIMEOUT; kv is
// more environment (name, value, ...).
func platform(t *testing.T, backendTimeout string, kv ...string) (*instance, *mongotest.Server, *estest.Server) {
	t.Helper()
	return platformOf(t, sampleDir, backendTimeout, kv...)
}

// platformOf is platform seeded with the documents of dir, a sandbox
// directory, instead of the sample's.
func platformOf(t *testing.T, dir, backendTimeout string, kv ...string) (*instance, *mongotest.Server, *estest.Server) {
	t.Helper()
	mongo, es, env := platformServers(t, dir)
	mongo.EnableChangeStreams() // a replica set, as compose.yaml runs
	in := start(t, append(append(env, "PRODAPI_BACKEND_TIMEOUT", backendTimeout), kv...)...)
	return in, mongo, es
}

// platformServers starts the fakes of platformOf, seeded with dir, and
// returns them with the environment that points prodapi at them.
func platformServers(t *testing.T, dir string) (*mongotest.Server, *estest.Server, []string) {
	t.Helper()
	docs, err := sourcestest.Fixtures(dir)
	if err != nil {
		t.Fatal(err)
	}
	mongo := mongotest.Start(t, docs)
	assets, err := fs.Sub(sandbox.SampleFS(), "assets")
	if err != nil {
		t.Fatal(err)
	}
	files, _ := fs.ReadDir(assets, ".")
	for _, f := range files {
		data, _ := fs.ReadFile(assets, f.Name())
		stem := strings.TrimSuffix(f.Name(), path.Ext(f.Name()))
		var id sources.ObjectID
		hex.Decode(id[:], []byte(stem))
		if err := mongo.PutFile(mongotest.File{ID: id, Filename: f.Name(), ContentType: mime.TypeByExtension(path.Ext(f.Name())),
			Data: data, MD5: true, UploadDate: time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)}); err != nil {
			t.Fatal(err)
		}
	}
	search := map[string][]*sources.Doc{}
	for _, r := range sources.Resources() {
		if r.Search {
			search[r.Collection] = docs[r.Collection]
		}
	}
	es := estest.New(t, estest.Options{Docs: search})
	return mongo, es, []string{"PRODAPI_SANDBOX", "", "MONGO_URI", mongo.URI(), "ELASTICSEARCH_URL", es.URL,
		"ELASTICSEARCH_INDEX", "superdesk",
		// Longer than twice the backend timeout, as config requires.
		"PRODAPI_WRITE_TIMEOUT", "5m"}
}

var sampleDir = path.Join("..", "..", "sources", "sandbox", "sample")

// The platform adapters, driven through the official drivers, answer
// every kind of request with the same bytes as the sandbox holding the
// same documents.
func TestPlatformMatchesSandbox(t *testing.T) {
	// Generous: on a busy machine a short timeout degrades enrichment
	// (links left out), which is not what this test compares.
	// One public URL for both, as behind one load balancer: rendition
	// hrefs would otherwise name each one's port.
	const publicURL = "http://localhost:5500"
	onPlatform, _, _ := platform(t, "1m", "PRODAPI_URL", publicURL)
	onSandbox := start(t, "PRODAPI_URL", publicURL)
	tok := bearer(t, devSecret, sources.AllScopes...)
	targets := []string{
		"/prodapi/v1/items?max_results=3",
		"/prodapi/v1/items?max_results=2&page=3&sort=" + url.QueryEscape(`[("versioncreated", -1)]`),
		"/prodapi/v1/items?source=" + url.QueryEscape(`{"query":{"term":{"type":"picture"}},"size":3,"aggs":{"states":{"terms":{"field":"state"}}}}`),
		"/prodapi/v1/items?q=flood&df=headline",
		"/prodapi/v1/items?projection=" + url.QueryEscape(`{"headline":1}`),
		"/prodapi/v1/desks",
		"/prodapi/v1/desks?where=" + url.QueryEscape(`{"name":"Sport"}`),
		"/prodapi/v1/users?sort=-username",
		"/prodapi/v1/contacts?max_results=4",
		"/prodapi/v1/events",
		"/prodapi/v1/events_files",
		"/prodapi/v1/events_history",
		"/prodapi/v1/planning",
		"/prodapi/v1/assignments",
		"/prodapi/v1/items/urn:no-such-item",
	}
	// Details of every document that carries links.
	for _, r := range []string{"items", "planning", "events", "assignments"} {
		l := getListAuth(t, onSandbox, "/prodapi/v1/"+r+"?max_results=10", tok)
		for _, d := range l.Items[:3] {
			targets = append(targets, "/prodapi/v1/"+r+"/"+url.PathEscape(d["_id"].(string)))
		}
	}
	for _, target := range targets {
		s1, h1, b1 := onSandbox.get(t, target, tok)
		s2, h2, b2 := onPlatform.get(t, target, tok)
		if s1 != s2 || !bytes.Equal(b1, b2) {
			t.Errorf("GET %s: sandbox %d, platform %d (-sandbox +platform):\n%s", target, s1, s2, cmp.Diff(string(b1), string(b2)))
		}
		if h1.Get("Etag") != h2.Get("Etag") || h1.Get("X-Total-Count") != h2.Get("X-Total-Count") {
			t.Errorf("GET %s: headers differ: %v / %v", target, h1, h2)
		}
	}
	// Media come from GridFS, with the bytes the sandbox serves.
	asset := "/prodapi/v1/assets/6aff5018957184d45484eb7d.jpg"
	s1, _, b1 := onSandbox.get(t, asset, tok)
	s2, h2, b2 := onPlatform.get(t, asset, tok)
	if s1 != 200 || s2 != 200 || !bytes.Equal(b1, b2) || h2.Get("Content-Type") != "image/jpeg" || h2.Get("Etag") == "" {
		t.Errorf("asset: sandbox %d (%d bytes), platform %d (%d bytes) %v", s1, len(b1), s2, len(b2), h2)
	}
}

func getListAuth(t *testing.T, in *instance, target, auth string) listBody {
	t.Helper()
	_, _, body := in.get(t, target, auth)
	var l listBody
	if err := jsonUnmarshal(body, &l); err != nil || len(l.Items) == 0 {
		t.Fatalf("GET %s: %v %s", target, err, body)
	}
	return l
}

// A backend outage is a 503 in the envelope (never a hang or a 500),
// /readyz says so, and both recover when the backend returns; cached
// answers keep being served meanwhile. Readiness here depends on the
// backends, as PRODAPI_READY_REQUIRES_BACKENDS asks (TestFleetOutage has
// the default, a replica's own readiness).
func TestPlatformOutage(t *testing.T) {
	in, mongo, es := platform(t, "1s", "PRODAPI_READY_REQUIRES_BACKENDS", "true")
	tok := bearer(t, devSecret, sources.AllScopes...)
	ready := func() (int, string) {
		status, _, body := in.getOps(t, "/readyz")
		return status, string(body)
	}
	if status, body := ready(); status != 200 || body != `{"status":"ready","checks":{"mongo":"ok","elastic":"ok","change_feed":"ok"}}` {
		t.Fatalf("readyz before: %d %s", status, body)
	}
	const cached = "/prodapi/v1/desks"
	if status, _, _ := in.get(t, cached, tok); status != 200 {
		t.Fatal("warming the cache failed")
	}

	mongo.Stop()
	// A 503, not the 504 of a request that waited out the backend timeout:
	// server selection gave up on the refused address. That the answer
	// comes at all (no hang) is what the test's own deadline checks; how
	// fast is for benchmarks, not for a test on a busy machine.
	status, h, body := in.get(t, "/prodapi/v1/users", tok)
	if status != 503 || h.Get("Retry-After") == "" || !strings.HasPrefix(string(body), `{"_status":"ERR","_error":{"code":503,`) {
		t.Errorf("users with Mongo down: %d %v %s", status, h, body)
	}
	if status, _, _ := in.get(t, cached, tok); status != 200 {
		t.Errorf("a cached list with Mongo down: %d", status)
	}
	if status, _, _ := in.get(t, "/prodapi/v1/items?max_results=1", tok); status != 200 {
		t.Errorf("a search list with Mongo down: %d", status)
	}
	// A refused Mongo is "unavailable", or "timeout" when server selection
	// outlasts the probe's second.
	down := func(body, name string) bool {
		return strings.Contains(body, `"`+name+`":"unavailable"`) || strings.Contains(body, `"`+name+`":"timeout"`)
	}
	if status, body := ready(); status != 200 || !strings.HasPrefix(body, `{"status":"degraded"`) || !down(body, "mongo") || !strings.Contains(body, `"elastic":"ok"`) {
		t.Errorf("readyz with Mongo down: %d %s", status, body)
	}

	es.Fail(0, estest.Reply{Status: 503, Body: string(estest.NoShards())})
	if status, _, body := in.get(t, "/prodapi/v1/items?max_results=2", tok); status != 503 {
		t.Errorf("items with both down: %d %s", status, body)
	}
	if status, body := ready(); status != 503 || !strings.HasPrefix(body, `{"status":"unavailable"`) || !down(body, "mongo") || !down(body, "elastic") {
		t.Errorf("readyz with both down: %d %s", status, body)
	}

	if err := mongo.Restart(); err != nil {
		t.Fatal(err)
	}
	es.Clear()
	// Generous: the driver's monitor must see Mongo back, on a busy
	// machine.
	deadline := time.Now().Add(time.Minute)
	for {
		status, body := ready()
		if status == 200 && strings.HasPrefix(body, `{"status":"ready"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz did not recover: %d %s", status, body)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if status, _, body := in.get(t, "/prodapi/v1/users", tok); status != 200 {
		t.Errorf("users after recovery: %d %s", status, body)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

// Whatever a MongoDB going away answers a request with, the client gets
// a 503 or 504 (never the 400 of a refused query), and a list the cache
// holds is served stale. Each case makes the wire fake answer every find
// the way a stopping server, or the driver, does. The desks list, cached
// in Redis, is first obsoleted by a change event, so that its next
// request must load, fail, and fall back to the entry.
//
// "pool cleared" is the error TestPlatformOutage once got a 400 for under
// load: a request that had chosen the server as another operation's
// connection failed found the pool cleared, which the driver reports as a
// command error with no code and the label TransientTransactionError.
// sources/mongo's TestPoolClearedMidRequest reproduces that race step by
// step through the driver's pool monitor, which run does not expose;
// here the fake sends the same error.
func TestPlatformOutageMidRequest(t *testing.T) {
	esBody := func(status int, typ, reason string) string { return string(estest.ErrorBody(status, typ, reason, nil)) }
	for _, tc := range []struct {
		name  string
		fault mongotest.Fault // what MongoDB answers every find with
		reply *estest.Reply   // or what Elasticsearch answers every search with
	}{
		{"pool cleared", mongotest.Fault{Message: "connection pool for 127.0.0.1:27017 was cleared because another operation failed with: EOF",
			Labels: []string{"TransientTransactionError"}}, nil},
		{"internal error", mongotest.Fault{Code: 1, CodeName: "InternalError", Message: "the storage backend failed"}, nil},
		{"shutting down", mongotest.Fault{Code: 91, CodeName: "ShutdownInProgress", Message: "The server is in quiesce mode and will shut down"}, nil},
		{"interrupted at shutdown", mongotest.Fault{Code: 11600, CodeName: "InterruptedAtShutdown", Message: "interrupted at shutdown"}, nil},
		{"not primary", mongotest.Fault{Code: 10107, CodeName: "NotWritablePrimary", Message: "not primary"}, nil},
		{"connection dropped", mongotest.Fault{CloseConnection: true}, nil},
		{"index closed", mongotest.Fault{}, &estest.Reply{Status: 400, Body: esBody(400, "index_closed_exception", "closed")}},
		{"task cancelled", mongotest.Fault{}, &estest.Reply{Status: 400, Body: esBody(400, "task_cancelled_exception", "task cancelled [node shutting down]")}},
		{"node closed", mongotest.Fault{}, &estest.Reply{Status: 503, Body: esBody(503, "node_closed_exception", "node closed")}},
		{"connection reset", mongotest.Fault{}, &estest.Reply{Reset: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rds := realserver.StartRedis(t, 0)
			// Long enough for the warming loads to finish whole on a busy
			// machine (a degraded enrichment is not stored); a retryable
			// fault costs each request that long, as the driver retries
			// until the deadline.
			in, mongo, es := platform(t, "3s", "REDIS_URL", rds.URL())
			tok := bearer(t, devSecret, sources.AllScopes...)
			waitFeed(t, in, mongo)
			cached, uncached, resource, collection := "/prodapi/v1/desks", "/prodapi/v1/users", "desks", "desks"
			if tc.reply != nil {
				cached, uncached, resource, collection = "/prodapi/v1/items?max_results=1", "/prodapi/v1/items?max_results=2", "items", "archive"
			}
			if status, h, _ := in.get(t, cached, tok); status != 200 || !strings.Contains(h.Get("Cache-Status"), "stored") {
				t.Fatalf("warming the cache: %d %q", status, h.Get("Cache-Status"))
			}
			// Writes to Redis are queued: wait for the entry to land, then
			// for the change to obsolete it.
			waitUntil(t, "the entry reaches Redis", func() bool {
				keys, err := rds.Do(t.Context(), "KEYS", "prodapi:v1:"+resource+":list:*")
				list, _ := keys.([]any)
				return err == nil && len(list) > 0
			})
			mongo.Change(collection, "update", "some-document")
			waitUntil(t, "the change reaches the cache", func() bool {
				return in.metric(t, `prodapi_cache_changes_total{op="update"}`) >= 1
			})

			if tc.reply != nil {
				es.Fail(0, *tc.reply)
			} else {
				tc.fault.Commands = []string{"find"}
				mongo.Fail(tc.fault)
			}
			status, h, body := in.get(t, uncached, tok)
			if (status != 503 && status != 504) || h.Get("Retry-After") == "" ||
				!strings.HasPrefix(string(body), `{"_status":"ERR","_error":{"code":`+strconv.Itoa(status)+`,`) {
				t.Errorf("%s, not cached: %d %v %s; want 503 or 504", uncached, status, h, body)
			}
			status, h, body = in.get(t, cached, tok)
			if cs := h.Get("Cache-Status"); status != 200 || !strings.Contains(cs, "fwd=stale") ||
				(!strings.Contains(cs, "fwd-status=503") && !strings.Contains(cs, "fwd-status=504")) {
				t.Errorf("%s, cached and obsoleted: %d %q %s; want the stale entry", cached, status, cs, body)
			}
		})
	}
}

// waitUntil polls cond until it holds, failing the test after a
// generous minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: still not after a minute", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitFeed waits until the instance's change feed leads and follows the
// fake's change stream.
func waitFeed(t *testing.T, in *instance, mongo *mongotest.Server) {
	t.Helper()
	waitUntil(t, "the feed leads", func() bool { return in.metric(t, "prodapi_feed_leader") == 1 })
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := mongo.WaitCommand(ctx, "getMore"); err != nil {
		t.Fatal(err)
	}
}

// While the change feed runs, entries live long: they are obsoleted as
// their documents change. A change event from the wire fake shows at once.
func TestPlatformFeedTTLAndInvalidation(t *testing.T) {
	in, mongo, _ := platform(t, "1m")
	tok := bearer(t, devSecret, sources.AllScopes...)
	waitFeed(t, in, mongo)
	const target = "/prodapi/v1/desks"
	_, h, _ := in.get(t, target, tok)
	cs := h.Get("Cache-Status")
	_, ttl, _ := strings.Cut(cs, "ttl=")
	if n, err := strconv.Atoi(ttl); err != nil || n <= 300 {
		t.Errorf("desks with the feed running: Cache-Status %q, want a ttl above the 5 min default", cs)
	}
	if _, h, _ := in.get(t, target, tok); !strings.Contains(h.Get("Cache-Status"), "; hit") {
		t.Fatalf("second GET: %q", h.Get("Cache-Status"))
	}
	mongo.Change("desks", "update", "some-desk")
	waitUntil(t, "the change reaches the desks list", func() bool {
		_, h, _ := in.get(t, target, tok)
		return strings.Contains(h.Get("Cache-Status"), "fwd=miss")
	})
}
