package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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

// Backoff of a bulk request Elasticsearch refused with 429 (its queues
// are full): short at first, doubling, for at most maxBulkAttempts.
const (
	firstBackoff    = 500 * time.Millisecond
	maxBackoff      = 30 * time.Second
	maxBulkAttempts = 10
)

// bulkPath asks for what the seed reads of a bulk answer: whether an
// item failed and, for each, its id, status and error.
const bulkPath = "/_bulk?filter_path=errors,items.*._id,items.*.status,items.*.error"

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

func seedElastic(ctx context.Context, cfg config.Config, room *corpus, w waiter, l loader) error {
	client, err := elasticsearch.NewClient(essrc.Config(string(cfg.ElasticURL), l.requestTimeout()))
	if err != nil {
		return fmt.Errorf("seed: elastic: %w", err)
	}
	es := esClient{c: client, l: l}
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
		if err := es.load(ctx, index, c, mapping, room.colls[c]); err != nil {
			return fmt.Errorf("seed: elastic: %s: %w", index, err)
		}
	}
	return nil
}

// An esClient sends the seed's requests through the client prodapi uses
// (so ELASTICSEARCH_URL means the same: several nodes, credentials in the
// URL, gzip), each under its own timeout.
type esClient struct {
	c *elasticsearch.Client
	l loader
}

// load replaces index: delete, create with mapping, bulk-index the
// collection's documents in batches, refresh, and check the count.
func (es esClient) load(ctx context.Context, index, collection string, mapping []byte, coll collection) error {
	if _, err := es.do(ctx, http.MethodDelete, "/"+index, "", nil, http.StatusOK, http.StatusNotFound); err != nil {
		return err
	}
	if _, err := es.do(ctx, http.MethodPut, "/"+index, "application/json", mapping, http.StatusOK); err != nil {
		return err
	}
	p := es.l.progress("elastic: indexing", coll.n, "index", index)
	if coll.n > 0 {
		err := batches(ctx, coll.docs(true), es.l.lim, func(dst []byte, d *sources.Doc) ([]byte, error) {
			return appendBulkItem(dst, index, collection, d)
		}, func(ctx context.Context, b batch) error {
			if err := es.bulk(ctx, b); err != nil {
				return err
			}
			p.add(b.len())
			return nil
		})
		if err != nil {
			return err
		}
	}
	if _, err := es.do(ctx, http.MethodPost, "/"+index+"/_refresh", "", nil, http.StatusOK); err != nil {
		return err
	}
	res, err := es.do(ctx, http.MethodGet, "/"+index+"/_count", "", nil, http.StatusOK)
	if err != nil {
		return err
	}
	var count struct{ Count *int }
	if err := json.Unmarshal(res, &count); err != nil || count.Count == nil {
		return fmt.Errorf("count: unreadable answer %.200q", res)
	}
	if *count.Count != coll.n {
		return fmt.Errorf("count: %d documents indexed, want %d", *count.Count, coll.n)
	}
	p.end("elastic: index loaded")
	return nil
}

// bulk indexes a batch. A 413 (the body is over the server's or a
// proxy's limit) splits it in two, down to single documents, and so does
// a 429 that says the body is too large for the node's memory (a
// circuit breaker, or indexing pressure: a node takes at most 10% of its
// heap in bulk bodies at once). Another 429 for the request, or a 429
// for some of its documents (the node's queues are full), sends them
// again after a pause.
func (es esClient) bulk(ctx context.Context, b batch) error {
	delay := firstBackoff
	for attempt := 1; ; attempt++ {
		status, body, err := es.send(ctx, http.MethodPost, bulkPath, "application/x-ndjson", b.buf)
		if err != nil {
			return err
		}
		reason := ""
		switch {
		case status == http.StatusRequestEntityTooLarge && b.len() > 1,
			status == http.StatusTooManyRequests && b.len() > 1 && tooMuchMemory(body):
			es.l.logger.Info("elastic: bulk too large, splitting it", "status", status, "documents", b.len(), "bytes", len(b.buf))
			half := b.len() / 2
			if err := es.bulk(ctx, b.sub(0, half)); err != nil {
				return err
			}
			return es.bulk(ctx, b.sub(half, b.len()))
		case status == http.StatusTooManyRequests:
			reason = errorType(body) // all of it again
		case status == http.StatusOK:
			again, err := bulkErrors(body)
			if err != nil {
				return err
			}
			if len(again) == 0 {
				return nil
			}
			b = b.pick(again)
			reason = "refused items"
		default:
			return fmt.Errorf("POST /_bulk: %d: %.500s", status, bytes.TrimSpace(body))
		}
		if attempt == maxBulkAttempts {
			return fmt.Errorf("bulk: %d documents still refused with 429 after %d attempts", b.len(), attempt)
		}
		es.l.logger.Info("elastic: busy (429), sending again", "reason", reason, "documents", b.len(), "attempt", attempt, "pause", delay.String())
		if err := es.l.pause(ctx, delay); err != nil {
			return err
		}
		delay = min(2*delay, maxBackoff)
	}
}

// errorType is the type of the error an Elasticsearch answer carries, ""
// when it carries none.
func errorType(body []byte) string {
	t, _ := errorOf(body)
	return t
}

func errorOf(body []byte) (typ, reason string) {
	var res struct {
		Error struct{ Type, Reason string }
	}
	json.Unmarshal(body, &res)
	return res.Error.Type, res.Error.Reason
}

// tooMuchMemory reports whether a 429 says the request's body is more
// than the node can hold: a circuit breaker tripped, or indexing pressure
// (whose reason counts the bytes held against the limit) refused it.
func tooMuchMemory(body []byte) bool {
	typ, reason := errorOf(body)
	return typ == "circuit_breaking_exception" || strings.Contains(reason, "coordinating_and_primary_bytes")
}

// do sends one request and returns the body of an answer with one of the
// wanted statuses; any other answer is an error quoting Elasticsearch.
func (es esClient) do(ctx context.Context, method, target, contentType string, body []byte, want ...int) ([]byte, error) {
	status, b, err := es.send(ctx, method, target, contentType, body)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(want, status) {
		return nil, fmt.Errorf("%s %s: %d %s: %.500s", method, target, status, http.StatusText(status), bytes.TrimSpace(b))
	}
	return b, nil
}

// send sends one request under its own timeout and returns the answer's
// status and body.
func (es esClient) send(ctx context.Context, method, target, contentType string, body []byte) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, es.l.requestTimeout())
	defer cancel()
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, r)
	if err != nil {
		return 0, nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := es.c.Perform(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, target, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, target, err)
	}
	return res.StatusCode, b, nil
}

// appendBulkItem appends the NDJSON lines indexing d into index, as
// Superdesk's indexer writes them: _id the document's id as a string,
// _source the document without _id, then _resource.
func appendBulkItem(dst []byte, index, collection string, d *sources.Doc) ([]byte, error) {
	v, _ := d.Get("_id")
	id, ok := sources.IDString(v)
	if !ok || id == "" {
		return dst, fmt.Errorf("document %v: _id must be a non-empty string or an ObjectId", v)
	}
	dst = codec.AppendJSON(dst, sources.D("index", sources.D("_index", index, "_id", id)))
	dst = append(dst, '\n')
	dst = codec.AppendJSON(dst, esSource(d, collection))
	return append(dst, '\n'), nil
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

// bulkErrors reads a bulk answer (200 even when items failed): it
// returns the positions of the items refused with 429, to send again,
// or an error naming the items that failed otherwise.
func bulkErrors(body []byte) (again []int, err error) {
	var res struct {
		Errors bool
		Items  []map[string]struct {
			ID     string `json:"_id"`
			Status int
			Error  json.RawMessage
		}
	}
	if err := json.Unmarshal(body, &res); err != nil {
		return nil, fmt.Errorf("bulk: unreadable answer: %w", err)
	}
	if !res.Errors {
		return nil, nil
	}
	var failed []string
	for i, item := range res.Items {
		for _, r := range item {
			switch {
			case r.Status == http.StatusTooManyRequests:
				again = append(again, i)
			case len(r.Error) > 0 && string(r.Error) != "null":
				failed = append(failed, fmt.Sprintf("%s (%d): %.300s", r.ID, r.Status, r.Error))
			}
		}
	}
	if n := len(failed); n > 0 {
		return nil, fmt.Errorf("bulk: %d documents refused: %s", n, strings.Join(failed[:min(n, 3)], "; ")+more(n-3))
	}
	return again, nil
}

func more(n int) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(" and %d more", n)
}
