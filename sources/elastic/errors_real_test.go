package elastic_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8"

	"github.com/prodapi/prodapi/sources"
	essrc "github.com/prodapi/prodapi/sources/elastic"
)

// A real 7.10.2 node's answers to wrong queries are refusals
// (ErrInvalid): every error type it names is one queryErrors lists. Its
// answers about an index it cannot search (closed, read-blocked) are
// not.
func TestRefusalsReal(t *testing.T) {
	url := sampleNode(t)
	client, err := elasticsearch.NewClient(essrc.Config(url, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	store := essrc.New(client, essrc.Options{Index: "superdesk", Timeout: 30 * time.Second})
	for _, body := range []string{
		`{"query":{"foo":{}}}`,
		`{"query":{"term":{"urgency":"abc"}}}`,
		`{"query":{"term":{"versioncreated":"x"}}}`,
		`{"query":{"range":{"versioncreated":{"gte":"notadate"}}}}`,
		`{"query":{"range":{"versioncreated":{"gte":"now-1d","time_zone":"Bad/Zone"}}}}`,
		`{"query":{"range":{"urgency":{"gte":"1","format":"bad"}}}}`,
		`{"query":{"query_string":{"query":"headline:(bridge"}}}`,
		`{"query":{"wildcard":{"urgency":{"value":"a*"}}}}`,
		`{"query":{"prefix":{"urgency":"1"}}}`,
		`{"query":{"nested":{"path":"headline","query":{"match_all":{}}}}}`,
		`{"query":{"match":{"headline":{"query":"x","fuzziness":"bad"}}}}`,
		`{"sort":[{"headline":"asc"}]}`,
		`{"aggs":{"x":{"terms":{"field":"headline"}}}}`,
		`{"aggs":{"x":{"date_histogram":{"field":"versioncreated","calendar_interval":"bad"}}}}`,
		`{"size":"abc"}`,
		`{"from":9999,"size":10}`,
		`{"search_after":[1,2,3],"sort":[{"_id":"asc"}]}`,
	} {
		_, err := store.Find(t.Context(), &sources.Query{Resource: resource("items"), Search: decode(t, body)})
		if !errors.Is(err, sources.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", body, err)
		}
	}

	// Indexes of a prefix of this test's own: the node is shared.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for _, index := range []string{"refusals_archive", "refusals_contacts"} {
		if _, err := esDo(ctx, http.MethodPut, url+"/"+index, nil); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { esDo(context.Background(), http.MethodDelete, url+"/"+index, nil) })
	}
	if _, err := esDo(ctx, http.MethodPost, url+"/refusals_archive/_close", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := esDo(ctx, http.MethodPut, url+"/refusals_contacts/_settings", []byte(`{"index.blocks.read":true}`)); err != nil {
		t.Fatal(err)
	}
	blocked := essrc.New(client, essrc.Options{Index: "refusals", Timeout: 30 * time.Second})
	for _, tc := range []struct{ resource, typ string }{
		{"items", "index_closed_exception"},
		{"contacts", "cluster_block_exception"},
	} {
		_, err := blocked.Find(t.Context(), &sources.Query{Resource: resource(tc.resource), Search: decode(t, `{"query":{"match_all":{}}}`)})
		if e, ok := errors.AsType[*essrc.Error](err); !ok || e.Type != tc.typ || !errors.Is(err, sources.ErrUnavailable) {
			t.Errorf("%s: %v, want ErrUnavailable from %s", tc.resource, err, tc.typ)
		}
	}
}
