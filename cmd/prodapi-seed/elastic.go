package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/elastic/go-elasticsearch/v8"

	"github.com/prodapi/prodapi/config"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	essrc "github.com/prodapi/prodapi/sources/elastic"
)

// esTimeout bounds each Elasticsearch request; index creation on a busy
// single node can take seconds.
const esTimeout = time.Minute

// searchCollections are the collections prodapi reads from the search
// index: those of the search resources (lookups marked Search read
// archive and assignments, which are among them).
func searchCollections() []string {
	var out []string
	for _, r := range sources.Resources() {
		if r.Search {
			out = append(out, r.Collection)
		}
	}
	return out
}

func seedElastic(ctx context.Context, cfg config.Config, room *newsroom, w waiter, logger *slog.Logger) error {
	client, err := elasticsearch.NewClient(essrc.Config(string(cfg.ElasticURL), esTimeout))
	if err != nil {
		return fmt.Errorf("seed: elastic: %w", err)
	}
	es := esClient{c: client}
	err = w.until(ctx, "elastic", func(ctx context.Context) error {
		_, err := es.do(ctx, http.MethodGet, "/_cluster/health?wait_for_status=yellow&timeout=2s", "", nil, http.StatusOK)
		return err
	})
	if err != nil {
		return err
	}
	mappings := essrc.IndexMappings()
	for _, c := range searchCollections() {
		mapping, ok := mappings[c]
		if !ok {
			return fmt.Errorf("seed: elastic: sources/elastic has no mapping for %s", c)
		}
		index := cfg.ElasticIndex + "_" + c
		n, err := es.load(ctx, index, c, mapping, room.colls[c])
		if err != nil {
			return fmt.Errorf("seed: elastic: %s: %w", index, err)
		}
		logger.Info("elastic: index loaded", "index", index, "documents", n)
	}
	return nil
}

// An esClient sends the seed's few requests through the client prodapi
// uses (so ELASTICSEARCH_URL means the same: several nodes, credentials
// in the URL, gzip).
type esClient struct{ c *elasticsearch.Client }

// load replaces index: delete, create with mapping, bulk-index docs,
// refresh, and check the count. It returns the number of documents.
func (es esClient) load(ctx context.Context, index, collection string, mapping []byte, docs []*sources.Doc) (int, error) {
	if _, err := es.do(ctx, http.MethodDelete, "/"+index, "", nil, http.StatusOK, http.StatusNotFound); err != nil {
		return 0, err
	}
	if _, err := es.do(ctx, http.MethodPut, "/"+index, "application/json", mapping, http.StatusOK); err != nil {
		return 0, err
	}
	if len(docs) > 0 {
		body, err := bulkBody(index, collection, docs)
		if err != nil {
			return 0, err
		}
		res, err := es.do(ctx, http.MethodPost, "/_bulk", "application/x-ndjson", body, http.StatusOK)
		if err != nil {
			return 0, err
		}
		if err := bulkErrors(res); err != nil {
			return 0, err
		}
	}
	if _, err := es.do(ctx, http.MethodPost, "/"+index+"/_refresh", "", nil, http.StatusOK); err != nil {
		return 0, err
	}
	res, err := es.do(ctx, http.MethodGet, "/"+index+"/_count", "", nil, http.StatusOK)
	if err != nil {
		return 0, err
	}
	var count struct{ Count *int }
	if err := json.Unmarshal(res, &count); err != nil || count.Count == nil {
		return 0, fmt.Errorf("count: unreadable answer %.200q", res)
	}
	if *count.Count != len(docs) {
		return 0, fmt.Errorf("count: %d documents indexed, want %d", *count.Count, len(docs))
	}
	return len(docs), nil
}

// do sends one request and returns the body of an answer with one of the
// wanted statuses; any other answer is an error quoting Elasticsearch.
func (es esClient) do(ctx context.Context, method, target, contentType string, body []byte, want ...int) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, esTimeout)
	defer cancel()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, r)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := es.c.Perform(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, target, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, target, err)
	}
	if !slices.Contains(want, res.StatusCode) {
		return nil, fmt.Errorf("%s %s: %s: %.500s", method, target, res.Status, bytes.TrimSpace(b))
	}
	return b, nil
}

// bulkBody is the NDJSON of a _bulk request indexing docs into index, as
// Superdesk's indexer writes them: _id the document's id as a string,
// _source the document without _id, then _resource. Documents go in
// ascending _id order: Elasticsearch breaks sort ties by index order, the
// sandbox by _id, so both order ties alike.
func bulkBody(index, collection string, docs []*sources.Doc) ([]byte, error) {
	type entry struct {
		id  string
		doc *sources.Doc
	}
	entries := make([]entry, len(docs))
	for i, d := range docs {
		v, _ := d.Get("_id")
		id, ok := sources.IDString(v)
		if !ok || id == "" {
			return nil, fmt.Errorf("document %d: _id must be a non-empty string or an ObjectId", i)
		}
		entries[i] = entry{id, d}
	}
	slices.SortStableFunc(entries, func(a, b entry) int { return strings.Compare(a.id, b.id) })
	var b []byte
	for _, e := range entries {
		b = codec.AppendJSON(b, sources.D("index", sources.D("_index", index, "_id", e.id)))
		b = append(b, '\n')
		b = codec.AppendJSON(b, esSource(e.doc, collection))
		b = append(b, '\n')
	}
	return b, nil
}

// esSource is the _source Superdesk stores for d: d without _id, plus
// _resource naming its collection.
func esSource(d *sources.Doc, collection string) *sources.Doc {
	src := sources.NewDoc()
	for k, v := range d.All() {
		if k != "_id" {
			src.Set(k, v)
		}
	}
	src.Set("_resource", collection)
	return src
}

// bulkErrors reports the items of a _bulk answer that failed (the answer
// is 200 even then).
func bulkErrors(body []byte) error {
	var res struct {
		Errors bool
		Items  []map[string]struct {
			ID     string `json:"_id"`
			Status int
			Error  json.RawMessage
		}
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return fmt.Errorf("bulk: unreadable answer: %w", err)
	}
	if !res.Errors {
		return nil
	}
	var failed []string
	for _, item := range res.Items {
		for _, r := range item {
			if len(r.Error) > 0 && string(r.Error) != "null" {
				failed = append(failed, fmt.Sprintf("%s (%d): %.300s", r.ID, r.Status, r.Error))
			}
		}
	}
	n := len(failed)
	return fmt.Errorf("bulk: %d documents refused: %s", n, strings.Join(failed[:min(n, 3)], "; ")+more(n-3))
}

func more(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" and %d more", n)
}
