package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
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
	ecfg := essrc.Config(string(cfg.ElasticURL), l.requestTimeout())
	// Bulk bodies gzipped cost the seed about as much CPU again as making
	// and encoding the documents, and the node some to inflate them: on a
	// machine the seed shares with the node (compose, a test), that is
	// time taken from indexing. Over a slow link, -compress.
	ecfg.CompressRequestBody = l.compress
	client, err := elasticsearch.NewClient(ecfg)
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
// collection's documents in batches (es.l.parallel bulk requests in
// flight), refresh, and check the count. The index is created without
// refresh and without replicas, which the load needs neither of, and
// given the mapping's own settings for them back once the indexing ends,
// however it ends (an error, an interrupt), unless Elasticsearch cannot
// be reached then.
func (es esClient) load(ctx context.Context, index, collection string, mapping []byte, coll collection) error {
	create, restore, err := loadSettings(mapping)
	if err != nil {
		return err
	}
	if _, err := es.do(ctx, http.MethodDelete, "/"+index, "", nil, http.StatusOK, http.StatusNotFound); err != nil {
		return err
	}
	if _, err := es.do(ctx, http.MethodPut, "/"+index, "application/json", create, http.StatusOK); err != nil {
		return err
	}
	p := es.l.progress("elastic: indexing", coll.n, "index", index)
	if err := es.index(ctx, index, collection, coll, restore, p); err != nil {
		return err
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

// index bulk-indexes the collection's documents into index, then PUTs
// restore as its settings, whether the indexing succeeded or not.
func (es esClient) index(ctx context.Context, index, collection string, coll collection, restore []byte, p *progress) (err error) {
	defer func() {
		// Under a context of its own: the load's may be what ended it.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), restoreTimeout)
		defer cancel()
		if _, rerr := es.do(rctx, http.MethodPut, "/"+index+"/_settings", "application/json", restore, http.StatusOK); rerr != nil {
			err = errors.Join(err, fmt.Errorf("restoring the settings the load changed: %w", rerr))
		}
	}()
	if coll.n == 0 {
		return nil
	}
	return batches(ctx, coll.docs(true), es.l.lim, es.l.parallel, func(dst []byte, d *sources.Doc) ([]byte, error) {
		return appendBulkItem(dst, index, collection, d)
	}, func(ctx context.Context, b batch) error {
		if err := es.bulk(ctx, b); err != nil {
			return err
		}
		p.add(b.len())
		return nil
	})
}

// restoreTimeout bounds the request that gives an index its settings
// back after a load, which may run after an interrupt.
const restoreTimeout = 30 * time.Second

// loadOnly are the index settings a bulk load runs under, and what they
// are for: no refresh (each would write a segment, soon merged again)
// and no replicas (each would index every document once more).
var loadOnly = []struct {
	name  string
	value any
}{{"refresh_interval", "-1"}, {"number_of_replicas", int64(0)}}

// loadSettings returns the create-index body to load under, body with
// the settings of loadOnly in place of its own, and the body of the PUT
// /<index>/_settings that gives them back after the load: the values
// body gave, or null (Elasticsearch's default) for those it did not.
// Settings may be written flat ("number_of_replicas"), under "index",
// or dotted ("index.number_of_replicas").
func loadSettings(body []byte) (create, restore []byte, err error) {
	v, err := codec.DecodeJSON(body, codec.DecodeOptions{})
	root, ok := v.(*sources.Doc)
	if err != nil || !ok {
		return nil, nil, fmt.Errorf("create-index body: not a JSON object: %w", cmp.Or(err, errNotObject))
	}
	settings, _ := root.Doc("settings")
	if settings == nil {
		settings = sources.NewDoc()
	}
	nested, _ := settings.Doc("index")
	back := sources.NewDoc()
	for _, s := range loadOnly {
		var was any
		for _, d := range []*sources.Doc{settings, nested} {
			for _, key := range []string{s.name, "index." + s.name} {
				if v, ok := d.Get(key); ok {
					was = v
					d.Delete(key)
				}
			}
		}
		back.Set(s.name, was)
		settings.Set(s.name, s.value)
	}
	if nested != nil && nested.Len() == 0 {
		settings.Delete("index")
	}
	root.Set("settings", settings)
	return codec.AppendJSON(nil, root), codec.AppendJSON(nil, sources.D("index", back)), nil
}

var errNotObject = errors.New("not an object")

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
