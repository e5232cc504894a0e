package elastic_test

import (
	"errors"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	essrc "github.com/prodapi/prodapi/sources/elastic"
	"github.com/prodapi/prodapi/sources/elastic/estest"
)

// Node describes what answers at the URL and whether the client takes it
// for Elasticsearch: 8.x and 7.17 by their header, 7.10 by its GET /,
// OpenSearch not at all.
func TestNode(t *testing.T) {
	for _, tc := range []struct {
		name                     string
		opts                     estest.Options
		version                  string
		accepted, legacy, tested bool
	}{
		{"8.x", estest.Options{Version: estest.V8}, string(estest.V8), true, false, true},
		{"7.17", estest.Options{Version: estest.V7}, string(estest.V7), true, false, true},
		{"7.10", estest.Options{Version: estest.V710}, string(estest.V710), true, true, true},
		{"OpenSearch", estest.Options{Product: estest.OpenSearch}, "", false, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t, tc.opts, time.Second)
			n, err := f.store.Node(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if (tc.version != "" && n.Version != tc.version) || n.Accepted != tc.accepted || n.Legacy() != tc.legacy || n.Tested() != tc.tested {
				t.Errorf("Node = %+v (legacy %v, tested %v); want version %s, accepted %v, legacy %v, tested %v",
					n, n.Legacy(), n.Tested(), tc.version, tc.accepted, tc.legacy, tc.tested)
			}
			if tc.name == "OpenSearch" && n.Distribution != "opensearch" {
				t.Errorf("OpenSearch's distribution = %q", n.Distribution)
			}
		})
	}
	nobody := fixture{}.connect(t, "http://127.0.0.1:1", time.Second)
	if _, err := nobody.store.Node(t.Context()); !errors.Is(err, sources.ErrUnavailable) {
		t.Errorf("Node with nothing at the URL: %v, want ErrUnavailable", err)
	}
}

func TestNodeTested(t *testing.T) {
	for v, want := range map[string]bool{"7.10.1": true, "7.17.24": true, "8.15.3": true, "7.9.3": false, "6.8.23": false, "9.0.0": false} {
		if got := (essrc.Node{Version: v, Accepted: true}).Tested(); got != want {
			t.Errorf("Tested(%s) = %v, want %v", v, got, want)
		}
	}
}

// Count counts an index's documents, and tells a missing index from an
// empty one.
func TestCount(t *testing.T) {
	f := setup(t, estest.Options{}, time.Second)
	want := len(newsroom()["archive"])
	if n, exists, err := f.store.Count(t.Context(), "archive"); err != nil || !exists || n != want {
		t.Errorf("Count(archive) = %d, %v, %v; want %d, existing", n, exists, err, want)
	}
	if n, exists, err := f.store.Count(t.Context(), "events"); err != nil || exists || n != 0 {
		t.Errorf("Count(events), no such index: %d, %v, %v", n, exists, err)
	}
}
