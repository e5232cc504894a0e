package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	"github.com/prodapi/prodapi/sources/elastic/estest"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
	"github.com/prodapi/prodapi/test/realserver"
)

// checkVars is the environment of prodapi check over the fakes env
// points at (pairs, as platformServers returns them), with more pairs.
func checkVars(env []string, kv ...string) map[string]string {
	vars := map[string]string{"AUTH_SERVER_SHARED_SECRET": devSecret}
	all := append(env, kv...)
	for i := 0; i+1 < len(all); i += 2 {
		vars[all[i]] = all[i+1]
	}
	return vars
}

// wantLines fails for each pattern (a regular expression matched against
// a line of out, from its start) no line matches.
func wantLines(t *testing.T, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(`(?m)^` + p).MatchString(out) {
			t.Errorf("no line matches %q in:\n%s", p, out)
		}
	}
}

// prodapi check over the MongoDB wire fake (a replica set, a few
// indexes), the Elasticsearch fake and a real redis-server: it reports
// each server, each index a query needs and the createIndex commands of
// the missing ones, exits 0, and sends nothing but reads.
func TestCheck(t *testing.T) {
	rds := realserver.StartRedis(t, 0)
	mongo, es, env := platformServers(t, sampleDir)
	mongo.EnableChangeStreams()
	mongo.AddIndex("desks", mongotest.Index{Name: "name_1__id_1", Key: sources.D("name", int32(1), "_id", int32(1))})
	mongo.AddIndex("planning", mongotest.Index{Name: "event_item_1", Key: sources.D("event_item", int32(1))})
	mongo.AddIndex("events_history", mongotest.Index{Name: "by_updated", Key: sources.D("_updated", int32(1), "_id", int32(-1))})
	mongo.AddIndex("fs.chunks", mongotest.Index{Name: "files_id_1_n_1", Key: sources.D("files_id", int32(1), "n", int32(1))})

	out, errOut, exit, err := cli(t, checkVars(env, "REDIS_URL", rds.URL()), "check")
	if exit != 0 {
		t.Fatalf("exit %d: %v\n%s%s", exit, err, out, errOut)
	}
	wantLines(t, out,
		`  ok    mongo +MongoDB 7\.0\.0 at mongodb://127\.0\.0\.1:\d+/superdesk, database superdesk$`,
		`  ok    change streams +available`,
		`  ok    elasticsearch +Elasticsearch 8\.15\.3 \(default\) at http://127\.0\.0\.1:\d+: the product check passes by the X-Elastic-Product header$`,
		`  ok    search index +superdesk_archive: 41 documents$`,
		`  ok    search index +superdesk_contacts: 10 documents$`,
		`  ok    redis +Redis \d+\.\d+\.\d+ at redis://127\.0\.0\.1:\d+$`,
		`  -     object storage +OBJSTORE_CONTAINER_NAME is not set`,
		`  ok    index +desks sorted on name, _id: served by name_1__id_1$`,
		`  ok    index +events_history sorted on _updated desc, _id: served by by_updated$`,
		`  warn  index +events_history by operation sorted on _updated desc, _id: no index serves it`,
		`  warn  index +users sorted on username, _id: no index serves it`,
		`  ok    index +planning by event_item: served by event_item_1$`,
		`  ok    index +content_types by _id: served by _id_$`,
		`  warn  index +assignments by coverage_item: no index serves it`,
		`  ok    index +fs.chunks by files_id sorted on n: served by files_id_1_n_1$`,
		// The feed's lookups of what a change obsoletes.
		`  warn  index +archive by assignment_id: no index serves it`,
		`  warn  index +planning by coverages\.assigned_to\.assignment_id: no index serves it`,
		`  use superdesk$`,
		`  db\.getCollection\("events_history"\)\.createIndex\(\{"operation": 1, "_updated": -1, "_id": 1\}\)$`,
		`  db\.getCollection\("assignments"\)\.createIndex\(\{"coverage_item": 1\}\)$`,
		`prodapi can work with this platform: \d+ warnings\.$`,
	)
	if strings.Contains(out, `getCollection("events_history").createIndex({"_updated"`) || strings.Contains(out, `getCollection("desks")`) ||
		strings.Contains(out, `getCollection("planning").createIndex({"event_item"`) || strings.Contains(out, `getCollection("fs.chunks")`) {
		t.Errorf("an index that exists is proposed:\n%s", out)
	}
	if strings.Contains(out, "sorted on _updated:") || strings.Contains(out, "reconcile") {
		t.Errorf("with change streams, the poll's indexes or its reconcile are reported:\n%s", out)
	}

	// Nothing but reads reached the servers.
	reads := []string{"hello", "isMaster", "ismaster", "ping", "buildInfo", "listIndexes", "killCursors", "endSessions"}
	for _, c := range mongo.Commands(reads...) {
		first := ""
		if c.Name == "aggregate" {
			if p, _ := c.Body.Get("pipeline"); p != nil {
				if stages, ok := p.([]any); ok && len(stages) > 0 {
					first = string(codec.AppendJSON(nil, stages[0]))
				}
			}
		}
		if c.Name != "aggregate" || !strings.HasPrefix(first, `{"$changeStream":`) {
			t.Errorf("MongoDB received %s %s", c.Name, codec.AppendJSON(nil, c.Body))
		}
	}
	for _, r := range es.Requests() {
		if !(r.Method == "GET" && r.Path == "/") && !(r.Method == "POST" && strings.HasSuffix(r.Path, "/_search") &&
			strings.HasPrefix(string(r.Body), `{"size":0,`)) {
			t.Errorf("Elasticsearch received %s %s %s", r.Method, r.Path, r.Body)
		}
	}
	stats, err := rds.Do(context.Background(), "INFO", "commandstats")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(stats.(string), "\n") {
		name, _, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":")
		if ok && !strings.HasPrefix(line, "#") && name != "info" && name != "ping" && name != "hello" && !strings.HasPrefix(name, "client") {
			t.Errorf("Redis received %s", line)
		}
	}
}

// prodapi check fails (exit 1) when prodapi could not work: a server
// unreachable, a version the driver refuses, another product at the
// Elasticsearch URL; a version it is not tested with is a warning.
func TestCheckFailures(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, mongo *mongotest.Server, env []string) []string
		exit  int
		want  string
	}{
		{"MongoDB down", func(t *testing.T, mongo *mongotest.Server, env []string) []string {
			mongo.Stop()
			return env
		}, 1, `  FAIL  mongo +MongoDB at mongodb://\S+, database superdesk cannot be used: `},
		{"MongoDB 4.2", func(t *testing.T, mongo *mongotest.Server, env []string) []string {
			mongo.SetVersion("4.2.24", 8)
			return env
		}, 1, `  FAIL  mongo +MongoDB at \S+, database superdesk cannot be used: .*reports wire version 8, but .* requires at least 9 \(MongoDB 4\.4\)`},
		{"MongoDB 8, untested", func(t *testing.T, mongo *mongotest.Server, env []string) []string {
			mongo.SetVersion("8.0.4", 25)
			return env
		}, 0, `  warn  mongo +MongoDB 8\.0\.4 at \S+, database superdesk: outside the versions prodapi is tested with \(4\.4 to 7\)$`},
		{"OpenSearch", func(t *testing.T, mongo *mongotest.Server, env []string) []string {
			return append(env, "ELASTICSEARCH_URL", estest.New(t, estest.Options{Product: estest.OpenSearch}).URL)
		}, 1, `  FAIL  elasticsearch +http://\S+ answers as "opensearch 7\.10\.2" \(tagline "The OpenSearch Project: https://opensearch.org/"\), which the product check refuses`},
		{"Elasticsearch 7.10", func(t *testing.T, mongo *mongotest.Server, env []string) []string {
			return append(env, "ELASTICSEARCH_URL", estest.New(t, estest.Options{Version: estest.V710}).URL)
		}, 0, `  ok    elasticsearch +Elasticsearch 7\.10\.2 \(default\) at \S+: the product check passes by its GET /`},
		{"Redis down", func(t *testing.T, mongo *mongotest.Server, env []string) []string {
			return append(env, "REDIS_URL", "redis://127.0.0.1:1/0")
		}, 1, `  FAIL  redis +redis://127\.0\.0\.1:1/0 cannot be reached: `},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mongo, _, env := platformServers(t, sampleDir)
			env = tc.setup(t, mongo, env)
			out, errOut, exit, err := cli(t, checkVars(env), "check")
			if exit != tc.exit {
				t.Errorf("exit %d (%v), want %d", exit, err, tc.exit)
			}
			wantLines(t, out, tc.want)
			if tc.exit != 0 && (err == nil || !strings.HasPrefix(err.Error(), "check: ")) {
				t.Errorf("error %v, want check: <n> failures\n%s", err, errOut)
			}
		})
	}
}

// TestRealCheck is prodapi check against a real FerretDB and Elasticsearch
// 7.10.2 node seeded by prodapi-seed, and a real redis-server: FerretDB
// is a test server and has no change streams (warnings), the node passes
// the product check by its GET /, every search index holds the sample,
// and the indexes Superdesk's queries need but the seed did not make are
// listed to create. (Its output is the README's example.)
func TestRealCheck(t *testing.T) {
	ferret := servers.FerretDB(t)
	es := servers.Elastic(t)
	rds := realserver.StartRedis(t, 0)
	env := []string{
		"PRODAPI_SANDBOX", "",
		"MONGO_URI", strings.TrimSuffix(ferret.URI, "/") + "/superdesk_check",
		"ELASTICSEARCH_URL", es.URL,
		"ELASTICSEARCH_INDEX", "superdesk_check",
	}
	seedPlatform(t, "mongo,elastic", env)
	out, errOut, exit, err := cli(t, checkVars(env, "REDIS_URL", rds.URL()), "check")
	t.Logf("prodapi check against FerretDB %s, Elasticsearch %s and redis-server:\n%s", ferret.Version, es.Version, out)
	if strings.Contains(out, `getCollection("events_history").createIndex({"_updated": 1})`) {
		t.Errorf("an index is proposed for a query another proposed index serves:\n%s", out)
	}
	if exit != 0 {
		t.Fatalf("exit %d: %v\n%s", exit, err, errOut)
	}
	wantLines(t, out,
		`  warn  mongo +FerretDB v?\d+\.\d+\.\d+ \(answering as MongoDB \d+\.\d+\.\d+\) at mongodb://\S+/superdesk_check, database superdesk_check: a test server`,
		`  warn  change streams +not available \(a standalone server, or FerretDB\): the feed polls each collection's _updated every 1s instead, `+
			`so updates reach the cache and /changes at once and deletions only when it reconciles the ids, every 10m$`,
		// What a round of the reconcile reads: the sample's documents.
		`  ok    reconcile +every 10m the feed's holder reads the _id of every document to find deletions: \d+ documents in \d+ collections `+
			`\(the most in archive: 41\), about \d+ queries of up to 1000 ids on the _id index; the ids it knows are kept in Redis`,
		`  ok    elasticsearch +Elasticsearch 7\.10\.2 \((default|oss)\) at \S+: the product check passes by its GET /`,
		`  ok    search index +superdesk_check_archive: 41 documents$`,
		`  ok    search index +superdesk_check_contacts: 10 documents$`,
		`  ok    redis +Redis \d+\.\d+\.\d+ at redis://\S+$`,
		`  ok    index +content_types by _id: served by _id_$`,
		`  ok    index +fs\.chunks by files_id sorted on n: served by files_id_1_n_1$`,
		`  warn  index +events_history by operation sorted on _updated desc, _id: no index serves it`,
		`  use superdesk_check$`,
		`  db\.getCollection\("events_history"\)\.createIndex\(\{"_updated": -1, "_id": 1\}\)$`,
		// The feed polls there: each collection's _updated, in order.
		`  warn  index +archive sorted on _updated: no index serves it`,
		`  warn  index +desks sorted on _updated: no index serves it`,
		`  db\.getCollection\("archive"\)\.createIndex\(\{"_updated": 1\}\)$`,
		`  warn  index +events_history sorted on _updated: no index serves it; the server reads the whole collection; the index proposed for events_history sorted on _updated desc, _id would serve it too$`,
		`prodapi can work with this platform: \d+ warnings\.$`,
	)
}

// On the sandbox, prodapi check says a directory is watched, and the
// embedded sample, which has nothing to watch, is not.
func TestCheckSandboxWatched(t *testing.T) {
	for _, tc := range []struct{ sandbox, want string }{
		{"sample", `  -  change streams +not used, and nothing is watched: the sandbox sample never changes$`},
		{t.TempDir(), `  -  change streams +not used: the sandbox directory is watched, and reports its own changes$`},
	} {
		out, errOut, exit, err := cli(t, map[string]string{"AUTH_SERVER_SHARED_SECRET": devSecret, "PRODAPI_SANDBOX": tc.sandbox}, "check")
		if exit != 0 {
			t.Fatalf("%s: exit %d: %v\n%s%s", tc.sandbox, exit, err, out, errOut)
		}
		wantLines(t, out, tc.want)
	}
}
