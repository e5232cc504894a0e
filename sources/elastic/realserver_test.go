package elastic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	essrc "github.com/prodapi/prodapi/sources/elastic"
	"github.com/prodapi/prodapi/sources/sandbox"
	"github.com/prodapi/prodapi/sources/sourcestest"
	"github.com/prodapi/prodapi/test/realserver"
)

// servers holds the real Elasticsearch 7.10.2 node the package's tests
// share (test/realserver): started by the first test that needs it,
// stopped when the tests end.
var servers realserver.Set

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

// realNode returns the URL of the shared real node with the documents
// of docs loaded under prefix (once per prefix), each index created with
// IndexMappings as prodapi-seed creates it.
func realNode(t *testing.T, prefix string, docs func() (map[string][]*sources.Doc, error)) string {
	t.Helper()
	es := servers.Elastic(t)
	return realserver.Shared(t, &servers, "elastic-seeded-"+prefix, func() (string, error) {
		d, err := docs()
		if err != nil {
			return "", err
		}
		if err := seedIndexes(es.URL, prefix, d); err != nil {
			return "", err
		}
		return es.URL, nil
	})
}

// seedIndexes loads docs as prodapi-seed does: for each collection with
// a mapping, PUT /<prefix>_<collection> with IndexMappings, then _bulk
// with _id as a string and _source the document without _id plus
// _resource, in ascending _id order and chunks of bulkChunk, then
// refresh.
func seedIndexes(url, prefix string, docs map[string][]*sources.Doc) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mappings := essrc.IndexMappings()
	for c, list := range docs {
		mapping, ok := mappings[c]
		if !ok {
			continue // not a search collection: details read Mongo
		}
		index := prefix + "_" + c
		if _, err := esDo(ctx, http.MethodPut, url+"/"+index, mapping); err != nil {
			return err
		}
		if len(list) == 0 {
			continue
		}
		sorted := slices.Clone(list)
		idOf := func(d *sources.Doc) string { v, _ := d.Get("_id"); s, _ := sources.IDString(v); return s }
		slices.SortStableFunc(sorted, func(a, b *sources.Doc) int { return strings.Compare(idOf(a), idOf(b)) })
		for chunk := range slices.Chunk(sorted, bulkChunk) {
			var body []byte
			for _, d := range chunk {
				src := sources.NewDoc()
				for k, v := range d.All() {
					if k != "_id" {
						src.Set(k, v)
					}
				}
				src.Set("_resource", c)
				body = codec.AppendJSON(body, sources.D("index", sources.D("_index", index, "_id", idOf(d))))
				body = append(body, '\n')
				body = codec.AppendJSON(body, src)
				body = append(body, '\n')
			}
			res, err := esDo(ctx, http.MethodPost, url+"/_bulk", body)
			if err != nil {
				return err
			}
			var bulk struct{ Errors bool }
			if err := json.Unmarshal(res, &bulk); err != nil || bulk.Errors {
				return fmt.Errorf("bulk into %s: %v %.2000s", index, err, res)
			}
		}
		if _, err := esDo(ctx, http.MethodPost, url+"/"+index+"/_refresh", nil); err != nil {
			return err
		}
	}
	return nil
}

// bulkChunk is how many documents one _bulk request carries: a bounded
// body, however many documents a test loads.
const bulkChunk = 1000

func esDo(ctx context.Context, method, url string, body []byte) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if strings.Contains(url, "/_bulk") {
		req.Header.Set("Content-Type", "application/x-ndjson")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s: %.2000s", method, url, res.Status, b)
	}
	return b, nil
}

// collectionsOf reads the <collection>.json files of fsys as the sandbox
// and the seed decode them.
func collectionsOf(fsys fs.FS) (map[string][]*sources.Doc, error) {
	out := map[string][]*sources.Doc{}
	for _, c := range sources.Collections {
		data, err := fs.ReadFile(fsys, c+".json")
		if err != nil {
			continue
		}
		v, err := codec.DecodeJSON(data, codec.DecodeOptions{Extended: true})
		if err != nil {
			return nil, fmt.Errorf("%s.json: %w", c, err)
		}
		list, _ := v.([]any)
		for _, e := range list {
			out[c] = append(out[c], e.(*sources.Doc))
		}
	}
	return out, nil
}

// sampleNode is the real node holding the sample newsroom under the
// prefix superdesk, as prodapi-seed loads it into compose.yaml's cluster.
func sampleNode(t *testing.T) string {
	t.Helper()
	return realNode(t, "superdesk", func() (map[string][]*sources.Doc, error) { return collectionsOf(sandbox.SampleFS()) })
}

// The contract suite through the client and a real Elasticsearch 7.10.2
// node holding the contract fixture with prodapi's mappings.
func TestContractReal(t *testing.T) {
	dir := sourcestest.Dir()
	url := realNode(t, "contract", func() (map[string][]*sources.Doc, error) { return sourcestest.Fixtures(dir) })
	client, err := elasticsearch.NewClient(essrc.Config(url, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	store := essrc.New(client, essrc.Options{Index: "contract", Timeout: 30 * time.Second})
	sourcestest.Run(t, dir, func(t *testing.T, dir string) sources.Store {
		sb, err := sandbox.Open(dir, sandbox.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return sources.Split{Docs: sb, Search: store}
	})
}

// A real 7.10 node sends no X-Elastic-Product header: the v8 client alone
// refuses it (the defect Superdesk users would meet), the client built
// from Config accepts it.
func TestProductCheckReal(t *testing.T) {
	url := sampleNode(t)
	q := &sources.Query{Resource: resource("items"), Search: decode(t, itemsList)}

	cfg := essrc.Config(url, 30*time.Second)
	cfg.Interceptors = nil
	bare, err := elasticsearch.NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = essrc.New(bare, essrc.Options{Index: "superdesk", Timeout: 30 * time.Second}).Find(t.Context(), q)
	if !errors.Is(err, sources.ErrUnavailable) || !strings.Contains(err.Error(), "not Elasticsearch") {
		t.Errorf("the bare v8 client against 7.10: %v, want the product check's refusal", err)
	}

	client, err := elasticsearch.NewClient(essrc.Config(url, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	res, err := essrc.New(client, essrc.Options{Index: "superdesk", Timeout: 30 * time.Second}).Find(t.Context(), q)
	if err != nil || len(res.Docs) == 0 {
		t.Errorf("Config's client against 7.10: %v, %v; want the items", res, err)
	}
}
