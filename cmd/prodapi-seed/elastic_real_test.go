package main

import (
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	essrc "github.com/prodapi/prodapi/sources/elastic"
	"github.com/prodapi/prodapi/sources/sandbox"
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
	sb, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range sources.Resources() {
		if !r.Search {
			continue
		}
		var sort []any
		for _, k := range r.DefaultSort {
			order := "asc"
			if k.Desc {
				order = "desc"
			}
			sort = append(sort, sources.D(k.Field, sources.D("order", order)))
		}
		q := &sources.Query{Resource: r, Page: 1, MaxResults: 500,
			Search: sources.D("query", sources.D("match_all", sources.NewDoc()), "sort", sort, "size", int64(500), "track_total_hits", int64(10000))}
		got, err := store.Find(t.Context(), q)
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		want, err := sb.Find(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(canonical(got.Docs), canonical(want.Docs)); diff != "" || got.Total != want.Total {
			t.Errorf("%s: total %d, sandbox %d; documents in order (-elastic +sandbox):\n%s", r.Name, got.Total, want.Total, diff)
		}
	}
}
