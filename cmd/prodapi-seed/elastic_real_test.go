package main

import (
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8"

	essrc "github.com/prodapi/prodapi/sources/elastic"
	"github.com/prodapi/prodapi/sources/sandbox"
	"github.com/prodapi/prodapi/test/realserver"
)

// The seed loads the sample into a real Elasticsearch 7.10.2 node
// (test/realserver; skipped loudly without Java and Maven): the mappings
// are accepted, every document is indexed, seeding again replaces the
// indexes, and every search resource's default list reads back through
// the adapter as the sandbox answers it. A scaled newsroom, sent in many
// small bulk requests, reads back as the sandbox answers it from the
// directory -out writes.
func TestSeedElasticReal(t *testing.T) {
	var servers realserver.Set
	defer servers.Close()
	es := servers.Elastic(t)
	env := envOf("ELASTICSEARCH_URL", es.URL, "ELASTICSEARCH_INDEX", "superdesk")
	for round := 1; round <= 2; round++ {
		var log syncBuffer
		if err := run(t.Context(), []string{"-targets", "elastic", "-wait", "1m"}, env, &log); err != nil {
			t.Fatalf("seed, round %d: %v\n%s", round, err, log.String())
		}
	}
	client, err := elasticsearch.NewClient(essrc.Config(es.URL, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	store := essrc.New(client, essrc.Options{Index: "superdesk", Timeout: 30 * time.Second})
	readsAsTheSandbox(t, store)

	var log syncBuffer
	scale := []string{"-scale", "150", "-seed", "3", "-batch-docs", "16", "-batch-bytes", "65536", "-progress", "0"}
	env = envOf("ELASTICSEARCH_URL", es.URL, "ELASTICSEARCH_INDEX", "scaled")
	if err := run(t.Context(), append([]string{"-targets", "elastic", "-wait", "1m"}, scale...), env, &log); err != nil {
		t.Fatalf("seed -scale: %v\n%s", err, log.String())
	}
	if n := strings.Count(log.String(), `"msg":"elastic: indexing","index":"scaled_archive"`); n < 150/16 {
		t.Errorf("%d progress lines for scaled_archive, want one a bulk request:\n%s", n, log.String())
	}
	dir := t.TempDir() + "/scaled"
	if err := run(t.Context(), append([]string{"-out", dir}, scale...), env, &log); err != nil {
		t.Fatalf("seed -out: %v\n%s", err, log.String())
	}
	sb, err := sandbox.Open(dir, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	readsAs(t, essrc.New(client, essrc.Options{Index: "scaled", Timeout: 30 * time.Second}), sb, false)
}
