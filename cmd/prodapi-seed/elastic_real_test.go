package main

import (
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8"

	essrc "github.com/prodapi/prodapi/sources/elastic"
	"github.com/prodapi/prodapi/test/realserver"
)

// The seed loads the sample into a real Elasticsearch 7.10.2 node
// (test/realserver; skipped loudly without Java and Maven): the mappings
// are accepted, every document is indexed, seeding again replaces the
// indexes, and every search resource's default list reads back through
// the adapter as the sandbox answers it.
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
}
