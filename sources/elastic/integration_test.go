package elastic_test

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8"
	gocmp "github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	essrc "github.com/prodapi/prodapi/sources/elastic"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// integrationURL is the real Elasticsearch whose indexes
// superdesk_<collection> hold the sample newsroom (sources/sandbox/sample,
// mapped by IndexMappings): with PRODAPI_INTEGRATION set, the one of
// compose.yaml that the seed job filled, on http://localhost:9200;
// otherwise the package's own 7.10.2 node
// (test/realserver), seeded the same way, or a loud skip where Java and
// Maven are missing.
func integrationURL(t *testing.T) string {
	t.Helper()
	if os.Getenv("PRODAPI_INTEGRATION") != "" {
		return "http://localhost:9200"
	}
	return sampleNode(t)
}

// requireElastic returns a store on integrationURL's indexes prefix_*.
func requireElastic(t *testing.T, prefix string) *essrc.Store {
	t.Helper()
	return essrc.New(storeClient(t), essrc.Options{Index: prefix, Timeout: 30 * time.Second})
}

// The real cluster answers as the sandbox does over the same newsroom: the
// same documents (canonical JSON), the same totals, the same aggregations.
func TestIntegrationAgainstSandbox(t *testing.T) {
	store := requireElastic(t, "superdesk")
	if err := store.Ping(t.Context()); err != nil {
		t.Fatalf("ping: %v", err)
	}
	sb, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	aggField := map[string]string{"items": "type", "contacts": "contact_type", "events": "state", "planning": "state", "assignments": "assigned_to.state"}
	for _, r := range sources.Resources() {
		if !r.Search {
			continue
		}
		sort := string(codec.AppendJSON(nil, sortBody(r.DefaultSort)))
		for _, tc := range []struct{ name, body string }{
			{"default list", `{"query":{"bool":{}},"sort":` + sort + `,"size":25,"track_total_hits":10000}`},
			{"second page", `{"query":{"bool":{}},"sort":` + sort + `,"size":3,"from":3,"track_total_hits":10000}`},
			{"aggregation", `{"query":{"bool":{}},"size":0,"aggs":{"a":{"terms":{"field":"` + aggField[r.Name] + `","size":10}}},"track_total_hits":10000}`},
			{"_source includes", `{"query":{"match_all":{}},"sort":` + sort + `,"size":5,"_source":{"includes":["_updated","guid","name"]},"track_total_hits":10000}`},
		} {
			t.Run(r.Name+"/"+tc.name, func(t *testing.T) {
				q := &sources.Query{Resource: r, Page: 1, MaxResults: 25, Search: decode(t, tc.body)}
				got, err := store.Find(t.Context(), q)
				if err != nil {
					t.Fatalf("elastic: %v", err)
				}
				want, err := sb.Find(t.Context(), q)
				if err != nil {
					t.Fatalf("sandbox: %v", err)
				}
				if got.Total != want.Total {
					t.Errorf("total %d, sandbox %d", got.Total, want.Total)
				}
				// Sets, not order: ties in the sort are broken differently.
				if diff := gocmp.Diff(canonicalDocs(got.Docs), canonicalDocs(want.Docs)); diff != "" {
					t.Errorf("documents (-elastic +sandbox):\n%s", diff)
				}
				if diff := gocmp.Diff(string(codec.AppendCanonicalJSON(nil, got.Aggregations)),
					string(codec.AppendCanonicalJSON(nil, want.Aggregations))); diff != "" {
					t.Errorf("aggregations (-elastic +sandbox):\n%s", diff)
				}
			})
		}
	}

	// Search lookups: assignments of every planning item, items of every
	// assignment.
	planning, err := sb.Find(t.Context(), &sources.Query{Resource: resourceOf(t, "planning"), Page: 1, MaxResults: 500,
		Search: decode(t, `{"query":{"match_all":{}},"size":500}`)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []any
	for _, d := range planning.Docs {
		id, _ := d.Get("_id")
		ids = append(ids, id)
	}
	l := sources.Lookup{Collection: "assignments", Field: "planning_item", Values: ids, Search: true,
		Sort: []sources.SortKey{{Field: "_updated", Desc: true}}}
	got, err := store.Lookup(t.Context(), l)
	if err != nil {
		t.Fatal(err)
	}
	want, err := sb.Lookup(t.Context(), l)
	if err != nil {
		t.Fatal(err)
	}
	if diff := gocmp.Diff(canonicalDocs(got), canonicalDocs(want)); diff != "" {
		t.Errorf("lookup (-elastic +sandbox):\n%s", diff)
	}
}

// The answers eve-elastic turned into empty results, and a refusal.
func TestIntegrationErrors(t *testing.T) {
	store := requireElastic(t, "superdesk")
	items := resourceOf(t, "items")
	res, err := store.Find(t.Context(), &sources.Query{Resource: items,
		Search: decode(t, `{"query":{"bool":{}},"sort":[{"no_such_field_anywhere":{"order":"asc"}}],"size":25,"track_total_hits":10000}`)})
	if err != nil || len(res.Docs) != 0 {
		t.Errorf("sort on an unmapped field: %v, %v; want an empty result", res, err)
	}
	res, err = essrc.New(storeClient(t), essrc.Options{Index: "prodapi_absent"}).Find(t.Context(),
		&sources.Query{Resource: items, Search: decode(t, itemsList)})
	if err != nil || len(res.Docs) != 0 {
		t.Errorf("missing index: %v, %v; want an empty result", res, err)
	}
	// headline is text without fielddata: Elasticsearch refuses to sort on it.
	_, err = store.Find(t.Context(), &sources.Query{Resource: items,
		Search: decode(t, `{"query":{"bool":{}},"sort":[{"headline":{"order":"asc"}}],"size":25,"track_total_hits":10000}`)})
	if !errors.Is(err, sources.ErrInvalid) {
		t.Errorf("sort on a text field: %v, want ErrInvalid", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := store.Find(ctx, &sources.Query{Resource: items, Search: decode(t, itemsList)}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", err)
	}
}

func storeClient(t *testing.T) *elasticsearch.Client {
	t.Helper()
	client, err := elasticsearch.NewClient(essrc.Config(integrationURL(t), 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func resourceOf(t *testing.T, name string) *sources.Resource {
	t.Helper()
	r, ok := sources.ResourceByName(name)
	if !ok {
		t.Fatalf("no resource %s", name)
	}
	return r
}

func sortBody(keys []sources.SortKey) []any {
	out := make([]any, len(keys))
	for i, k := range keys {
		order := "asc"
		if k.Desc {
			order = "desc"
		}
		out[i] = sources.D(k.Field, sources.D("order", order))
	}
	return out
}

// canonicalDocs renders documents as sorted canonical JSON, so that two
// backends' answers compare whatever their key and tie orders.
func canonicalDocs(docs []*sources.Doc) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = string(codec.AppendCanonicalJSON(nil, d))
	}
	slices.Sort(out)
	return out
}
