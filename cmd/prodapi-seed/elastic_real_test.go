package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
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

	// Loaded without refresh, and the mapping's settings back after,
	// whether the load completes or is interrupted.
	for _, index := range []string{"superdesk_archive", "scaled_archive"} {
		if got := indexSettings(t, es.URL, index); got["index.refresh_interval"] != "" || got["index.number_of_replicas"] != "0" {
			t.Errorf("%s after the load: refresh_interval %q, number_of_replicas %q; want the default and 0",
				index, got["index.refresh_interval"], got["index.number_of_replicas"])
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var during map[string]string // the settings when the first bulk request is done
	interrupt := writerFunc(func(p []byte) (int, error) {
		if during != nil || !strings.Contains(string(p), `"msg":"elastic: indexing","index":"cut_archive"`) {
			return len(p), nil
		}
		during = indexSettings(t, es.URL, "cut_archive")
		cancel() // the seed is interrupted after its first bulk request
		return len(p), nil
	})
	args := []string{"-targets", "elastic", "-wait", "1m", "-scale", "300", "-batch-docs", "16", "-progress", "0", "-parallel", "2"}
	err = run(ctx, args, envOf("ELASTICSEARCH_URL", es.URL, "ELASTICSEARCH_INDEX", "cut"), interrupt)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("an interrupted seed: %v", err)
	}
	if during["index.refresh_interval"] != "-1" || during["index.number_of_replicas"] != "0" {
		t.Errorf("during the load: %v, want refresh_interval -1 and number_of_replicas 0", during)
	}
	if got := indexSettings(t, es.URL, "cut_archive"); got["index.refresh_interval"] != "" || got["index.number_of_replicas"] != "0" {
		t.Errorf("after an interrupted load: refresh_interval %q, number_of_replicas %q; want the default and 0",
			got["index.refresh_interval"], got["index.number_of_replicas"])
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// indexSettings are an index's settings, flat ("index.refresh_interval").
func indexSettings(t *testing.T, url, index string) map[string]string {
	t.Helper()
	res, err := http.Get(url + "/" + index + "/_settings?flat_settings=true")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body map[string]struct {
		Settings map[string]any
	}
	if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("GET /%s/_settings: %d %v", index, res.StatusCode, err)
	}
	out := map[string]string{}
	for k, v := range body[index].Settings {
		out[k] = fmt.Sprint(v)
	}
	return out
}
