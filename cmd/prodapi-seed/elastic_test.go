package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	essrc "github.com/prodapi/prodapi/sources/elastic"
	"github.com/prodapi/prodapi/sources/elastic/estest"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// A fakeES answers the requests the seed makes (index deletion and
// creation, _bulk, _refresh, _count, cluster health) as Elasticsearch 8
// does, and keeps what was indexed. estest answers searches only.
type fakeES struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	indexes  map[string]*fakeIndex
	requests []string        // "METHOD /path" in order
	refuse   map[string]bool // ids whose bulk item fails
	lose     int             // documents _count leaves out
	maxBody  int             // a larger bulk body is refused with 413 (0: no limit)
	maxHeld  int             // a larger one with 429, as indexing pressure does (0: no limit)
	busy     int             // bulk requests still to refuse with 429
	busyIDs  map[string]int  // bulk items to refuse with 429, so many times each
	bulks    []int           // documents per bulk request answered, in order
	sizes    []int           // and its body's size
	tooLarge int             // bulk requests refused for their size
	onBulk   func()          // called (without mu) as each bulk request arrives
}

type fakeIndex struct {
	body     []byte   // the create-index body
	settings [][]byte // the bodies of PUT /<index>/_settings, in order
	ids      []string // in indexing order
	docs     [][]byte // _source of ids[i]
}

func newFakeES(t *testing.T) *fakeES {
	f := &fakeES{t: t, indexes: map[string]*fakeIndex{}, refuse: map[string]bool{}, busyIDs: map[string]int{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeES) serve(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		body = zr
	}
	b, _ := io.ReadAll(body)
	if r.URL.Path == "/_bulk" && f.onBulk != nil {
		f.onBulk()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, r.Method+" "+r.URL.Path)
	w.Header().Set("X-Elastic-Product", "Elasticsearch")
	w.Header().Set("Content-Type", "application/json")
	reply := func(status int, v string) {
		w.WriteHeader(status)
		io.WriteString(w, v)
	}
	path := strings.Trim(r.URL.Path, "/")
	name, op, _ := strings.Cut(path, "/")
	switch {
	case r.Method == "GET" && path == "_cluster/health":
		if r.URL.Query().Get("wait_for_status") != "yellow" {
			reply(400, `{"error":"want wait_for_status=yellow"}`)
			return
		}
		reply(200, `{"cluster_name":"docker-cluster","status":"green","timed_out":false}`)
	case r.Method == "DELETE" && op == "":
		if _, ok := f.indexes[name]; !ok {
			w.WriteHeader(404)
			w.Write(estest.IndexNotFound(name))
			return
		}
		delete(f.indexes, name)
		reply(200, `{"acknowledged":true}`)
	case r.Method == "PUT" && op == "":
		if _, ok := f.indexes[name]; ok {
			reply(400, `{"error":{"type":"resource_already_exists_exception"},"status":400}`)
			return
		}
		if r.Header.Get("Content-Type") != "application/json" {
			reply(406, `{"error":"Content-Type header is not supported"}`)
			return
		}
		f.indexes[name] = &fakeIndex{body: b}
		reply(200, fmt.Sprintf(`{"acknowledged":true,"shards_acknowledged":true,"index":%q}`, name))
	case r.Method == "POST" && path == "_bulk":
		if r.Header.Get("Content-Type") != "application/x-ndjson" {
			reply(406, `{"error":"Content-Type header is not supported"}`)
			return
		}
		switch {
		case f.maxBody > 0 && len(b) > f.maxBody:
			f.tooLarge++
			reply(413, "")
		case f.maxHeld > 0 && len(b) > f.maxHeld:
			f.tooLarge++
			reply(429, fmt.Sprintf(`{"error":{"type":"es_rejected_execution_exception","reason":"rejected execution of coordinating operation `+
				`[coordinating_and_primary_bytes=0, replica_bytes=0, all_bytes=0, coordinating_operation_bytes=%d, max_coordinating_and_primary_bytes=%d]"},"status":429}`,
				len(b), f.maxHeld))
		case f.busy > 0:
			f.busy--
			reply(429, `{"error":{"type":"es_rejected_execution_exception","reason":"rejected execution"},"status":429}`)
		default:
			f.bulk(w, b)
		}
	case op != "" && f.indexes[name] == nil:
		w.WriteHeader(404)
		w.Write(estest.IndexNotFound(name))
	case r.Method == "PUT" && op == "_settings":
		ix := f.indexes[name]
		ix.settings = append(ix.settings, b)
		reply(200, `{"acknowledged":true}`)
	case r.Method == "POST" && op == "_refresh":
		reply(200, `{"_shards":{"total":1,"successful":1,"failed":0}}`)
	case r.Method == "GET" && op == "_count":
		ix := f.indexes[name]
		reply(200, fmt.Sprintf(`{"count":%d,"_shards":{"total":1,"successful":1,"skipped":0,"failed":0}}`, len(ix.ids)-f.lose))
	default:
		reply(405, `{"error":"unexpected request"}`)
	}
}

func (f *fakeES) bulk(w http.ResponseWriter, b []byte) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	var items []string
	failed := false
	for sc.Scan() {
		var action map[string]struct {
			Index string `json:"_index"`
			ID    string `json:"_id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &action); err != nil || len(action) != 1 {
			f.t.Errorf("bulk action line %q: %v", sc.Text(), err)
			w.WriteHeader(400)
			return
		}
		a, ok := action["index"]
		if !ok || !sc.Scan() {
			f.t.Errorf("bulk: want index actions, each followed by a source: %v", action)
			w.WriteHeader(400)
			return
		}
		ix := f.indexes[a.Index]
		switch {
		case ix == nil:
			f.t.Errorf("bulk into %s, which the seed did not create", a.Index)
			w.WriteHeader(400)
			return
		case f.refuse[a.ID]:
			failed = true
			items = append(items, fmt.Sprintf(`{"index":{"_index":%q,"_id":%q,"status":400,"error":{"type":"document_parsing_exception","reason":"[1:2] failed to parse"}}}`, a.Index, a.ID))
			continue
		case f.busyIDs[a.ID] > 0:
			f.busyIDs[a.ID]--
			failed = true
			items = append(items, fmt.Sprintf(`{"index":{"_index":%q,"_id":%q,"status":429,"error":{"type":"es_rejected_execution_exception","reason":"rejected execution"}}}`, a.Index, a.ID))
			continue
		}
		if slices.Contains(ix.ids, a.ID) {
			f.t.Errorf("bulk: %s indexed twice in %s", a.ID, a.Index)
		}
		ix.ids = append(ix.ids, a.ID)
		ix.docs = append(ix.docs, slices.Clone(sc.Bytes()))
		items = append(items, fmt.Sprintf(`{"index":{"_index":%q,"_id":%q,"_version":1,"result":"created","status":201}}`, a.Index, a.ID))
	}
	f.bulks = append(f.bulks, len(items))
	f.sizes = append(f.sizes, len(b))
	fmt.Fprintf(w, `{"took":3,"errors":%t,"items":[%s]}`, failed, strings.Join(items, ","))
}

// state is what the fake holds: per index, its create body and documents.
func (f *fakeES) state() map[string]fakeIndex {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]fakeIndex{}
	for k, v := range f.indexes {
		out[k] = *v
	}
	return out
}

func seedES(t *testing.T, f *fakeES, prefix string) (string, error) {
	t.Helper()
	var log syncBuffer
	err := run(t.Context(), []string{"-targets", "elastic", "-wait", "10s"},
		envOf("ELASTICSEARCH_URL", f.srv.URL, "ELASTICSEARCH_INDEX", prefix), &log)
	return log.String(), err
}

// The seed creates one index per search collection with the mappings of
// sources/elastic and indexes the sample in it as Superdesk does; doing
// it again gives the same state.
func TestSeedElastic(t *testing.T) {
	t.Parallel()
	f := newFakeES(t)
	log, err := seedES(t, f, "newsroom")
	if err != nil {
		t.Fatalf("seed: %v\n%s", err, log)
	}
	first := f.state()
	docs := sampleDocs(t)
	mappings := essrc.IndexMappings()
	var names []string
	for _, c := range []string{"archive", "assignments", "contacts", "events", "planning"} {
		name := "newsroom_" + c
		names = append(names, name)
		ix, ok := first[name]
		if !ok {
			t.Errorf("no index %s", name)
			continue
		}
		// Created with the mapping, but for the settings of the load,
		// which go back to the mapping's after it.
		create, restore, err := loadSettings(mappings[c])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ix.body, create) {
			t.Errorf("%s was created with %s, want %s", name, ix.body, create)
		}
		if len(ix.settings) != 1 || !bytes.Equal(ix.settings[0], restore) {
			t.Errorf("%s: settings put after the load %q, want %s", name, ix.settings, restore)
		}
		if !slices.IsSorted(ix.ids) {
			t.Errorf("%s: documents not indexed in _id order: %v", name, ix.ids)
		}
		// Each _source is the document less _id, plus _resource.
		var got, want []string
		for i, src := range ix.docs {
			d := decodeDoc(t, src)
			if r, _ := d.Get("_resource"); r != c {
				t.Errorf("%s %s: _resource %v, want %s", name, ix.ids[i], r, c)
			}
			if d.Has("_id") {
				t.Errorf("%s %s: _source holds _id", name, ix.ids[i])
			}
			d.Delete("_resource")
			d.Set("_id", ix.ids[i])
			got = append(got, string(codec.AppendCanonicalJSON(nil, d)))
		}
		for _, d := range docs[c] {
			want = append(want, string(codec.AppendCanonicalJSON(nil, d)))
		}
		slices.Sort(got)
		slices.Sort(want)
		if diff := cmp.Diff(got, want); diff != "" {
			t.Errorf("%s documents (-indexed +sample):\n%s", name, diff)
		}
	}
	if diff := cmp.Diff(sortedKeys(first), names); diff != "" {
		t.Errorf("indexes (-got +want):\n%s", diff)
	}
	if !strings.Contains(log, `"msg":"elastic: index loaded","index":"newsroom_archive","documents":41`) {
		t.Errorf("log:\n%s", log)
	}

	f.mu.Lock()
	f.requests = nil
	f.mu.Unlock()
	if log, err := seedES(t, f, "newsroom"); err != nil {
		t.Fatalf("second seed: %v\n%s", err, log)
	}
	if diff := cmp.Diff(f.state(), first, cmp.AllowUnexported(fakeIndex{})); diff != "" {
		t.Errorf("seeding again changed the state (-second +first):\n%s", diff)
	}
	f.mu.Lock()
	requests := slices.Clone(f.requests)
	f.mu.Unlock()
	if diff := cmp.Diff(requests[:7], []string{"GET /_cluster/health", "DELETE /newsroom_archive", "PUT /newsroom_archive",
		"POST /_bulk", "PUT /newsroom_archive/_settings", "POST /newsroom_archive/_refresh", "GET /newsroom_archive/_count"}); diff != "" {
		t.Errorf("requests (-got +want):\n%s", diff)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func decodeDoc(t *testing.T, b []byte) *sources.Doc {
	t.Helper()
	v, err := codec.DecodeJSON(b, codec.DecodeOptions{Strict: true})
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	d, ok := v.(*sources.Doc)
	if !ok {
		t.Fatalf("%s is not a document", b)
	}
	return d
}

// Refused documents and a short count fail the seed, saying which.
func TestSeedElasticFailures(t *testing.T) {
	t.Parallel()
	f := newFakeES(t)
	f.refuse["6af58e98957184d45484e9b5"] = true
	_, err := seedES(t, f, "superdesk")
	if err == nil || !strings.Contains(err.Error(), "superdesk_assignments: bulk: 1 documents refused: 6af58e98957184d45484e9b5 (400)") {
		t.Errorf("a refused document: %v", err)
	}
	f = newFakeES(t)
	f.lose = 1
	_, err = seedES(t, f, "superdesk")
	if err == nil || !strings.Contains(err.Error(), "superdesk_archive: count: 40 documents indexed, want 41") {
		t.Errorf("a lost document: %v", err)
	}
	f = newFakeES(t)
	f.srv.Close()
	var log syncBuffer
	err = run(t.Context(), []string{"-targets", "elastic", "-wait", "1ms"}, envOf("ELASTICSEARCH_URL", f.srv.URL), &log)
	if err == nil || !strings.Contains(err.Error(), "elastic did not answer within 1ms") {
		t.Errorf("no server: %v", err)
	}
}

// What the seed indexes reads back through the Elasticsearch adapter as
// the sandbox answers: every search resource's default list, complete.
func TestSeededIndexesReadAsTheSandbox(t *testing.T) {
	t.Parallel()
	f := newFakeES(t)
	if log, err := seedES(t, f, "superdesk"); err != nil {
		t.Fatalf("seed: %v\n%s", err, log)
	}
	indexed := map[string][]*sources.Doc{}
	for name, ix := range f.state() {
		c := strings.TrimPrefix(name, "superdesk_")
		for i, src := range ix.docs {
			d := decodeDoc(t, src)
			d.Set("_id", ix.ids[i])
			indexed[c] = append(indexed[c], d)
		}
	}
	es := estest.New(t, estest.Options{Docs: indexed})
	client, err := elasticsearch.NewClient(essrc.Config(es.URL, 0))
	if err != nil {
		t.Fatal(err)
	}
	store := essrc.New(client, essrc.Options{Index: "superdesk"})
	readsAsTheSandbox(t, store)
}

// readsAsTheSandbox compares every search resource's default list, read
// through the adapter from seeded indexes, with the sample's in the
// sandbox.
func readsAsTheSandbox(t *testing.T, store *essrc.Store) {
	t.Helper()
	sb, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	readsAs(t, store, sb, true)
}

// readsAs compares every search resource's default list (its first
// 1,000 documents) read through the adapter with the sandbox's: in order,
// or as sets where ties may fall either way.
func readsAs(t *testing.T, store *essrc.Store, sb *sandbox.Store, inOrder bool) {
	t.Helper()
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
		q := &sources.Query{Resource: r, Page: 1, MaxResults: 1000,
			Search: sources.D("query", sources.D("match_all", sources.NewDoc()), "sort", sort, "size", int64(1000), "track_total_hits", int64(10000))}
		got, err := store.Find(t.Context(), q)
		if err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		want, err := sb.Find(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		g, w := canonical(got.Docs), canonical(want.Docs)
		if !inOrder {
			slices.Sort(g)
			slices.Sort(w)
		}
		if diff := cmp.Diff(g, w); diff != "" || got.Total != want.Total {
			t.Errorf("%s: total %d, sandbox %d; documents (-elastic +sandbox):\n%s", r.Name, got.Total, want.Total, diff)
		}
	}
}

func canonical(docs []*sources.Doc) []string {
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i] = string(codec.AppendCanonicalJSON(nil, d))
	}
	return out
}

// A scaled newsroom goes in bulk requests of at most -batch-docs
// documents and -batch-bytes bytes, each index complete, with progress
// lines on the way.
func TestSeedElasticBatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		ok   func(f *fakeES) string // "" when the bulks are right
	}{
		{"by count", []string{"-batch-docs", "7"}, func(f *fakeES) string {
			for _, n := range f.bulks {
				if n > 7 {
					return fmt.Sprintf("a bulk of %d documents", n)
				}
			}
			return ""
		}},
		{"by size", []string{"-batch-bytes", "20000"}, func(f *fakeES) string {
			for i, size := range f.sizes {
				if size > 20000 && f.bulks[i] > 1 {
					return fmt.Sprintf("a bulk of %d bytes", size)
				}
			}
			if len(f.bulks) < 20 {
				return fmt.Sprintf("%d bulks", len(f.bulks))
			}
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeES(t)
			var log syncBuffer
			args := append([]string{"-targets", "elastic", "-wait", "10s", "-scale", "100", "-progress", "0"}, tc.args...)
			if err := run(t.Context(), args, envOf("ELASTICSEARCH_URL", f.srv.URL, "ELASTICSEARCH_INDEX", "big"), &log); err != nil {
				t.Fatalf("seed: %v\n%s", err, log.String())
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if msg := tc.ok(f); msg != "" {
				t.Errorf("%s; bulks: %v", msg, f.bulks)
			}
			if n := len(f.indexes["big_archive"].ids); n != 100 {
				t.Errorf("%d items indexed, want 100", n)
			}
			total := 0
			for _, n := range f.bulks {
				total += n
			}
			want := 100 + 3*13 + 3*10 + 3*8 + 10 // items, assignments, planning, events, contacts
			if total != want || len(f.bulks) < 5*2 {
				t.Errorf("%d documents in %d bulks, want %d in more than one bulk an index", total, len(f.bulks), want)
			}
			if got := strings.Count(log.String(), `"msg":"elastic: indexing","index":"big_archive"`); got < 2 {
				t.Errorf("%d progress lines for big_archive, want several:\n%s", got, log.String())
			}
		})
	}
}

// esFor is an esClient on the fake, whose pauses take no time.
func esFor(t *testing.T, f *fakeES, lim limits, log *syncBuffer) esClient {
	t.Helper()
	client, err := elasticsearch.NewClient(essrc.Config(f.srv.URL, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	now := func(time.Duration) <-chan time.Time {
		c := make(chan time.Time, 1)
		c <- time.Time{}
		return c
	}
	return esClient{c: client, l: loader{lim: lim, logger: jsonLogger(log), after: now}}
}

// A bulk over the server's size limit (413) or its memory for bulks (429
// from indexing pressure) is split until it passes; a request or items
// refused with 429 otherwise go again after a pause; every document ends
// up indexed once.
func TestElasticBulkRetries(t *testing.T) {
	t.Parallel()
	coll := sampleRoom(t).corpus().colls["archive"]
	f := newFakeES(t)
	f.maxBody = 80000
	f.maxHeld = 40000
	f.busy = 2
	var busy []string
	for d := range coll.docs(true) {
		if len(busy) < 5 {
			busy = append(busy, idOf(d))
			f.busyIDs[idOf(d)] = 2
		}
	}
	var log syncBuffer
	es := esFor(t, f, limits{docs: 100, bytes: 1 << 20}, &log)
	if err := es.load(t.Context(), "r_archive", "archive", essrc.IndexMappings()["archive"], coll); err != nil {
		t.Fatalf("load: %v\n%s", err, log.String())
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := len(f.indexes["r_archive"].ids); n != coll.n {
		t.Errorf("%d documents indexed, want %d", n, coll.n)
	}
	if !slices.Contains(f.indexes["r_archive"].ids, busy[0]) {
		t.Errorf("%s, refused twice with 429, is not indexed", busy[0])
	}
	for _, want := range []string{`"status":413,"documents":41`, `"status":429,"documents":21`} {
		if !strings.Contains(log.String(), `"msg":"elastic: bulk too large, splitting it",`+want) {
			t.Errorf("no split logged with %s (%d bulks refused for their size):\n%s", want, f.tooLarge, log.String())
		}
	}
	for i, size := range f.sizes {
		if size > f.maxHeld && f.bulks[i] > 1 {
			t.Errorf("a bulk of %d bytes and %d documents was indexed, over the limit of %d", size, f.bulks[i], f.maxHeld)
		}
	}
	if got := strings.Count(log.String(), "elastic: busy (429)"); got < 2+2 {
		t.Errorf("%d pauses after a 429, want at least 4:\n%s", got, log.String())
	}
}

// What retrying cannot mend fails the load, saying what: a document alone
// over the size limit, a server that stays busy.
func TestElasticBulkGivesUp(t *testing.T) {
	t.Parallel()
	docs := collection{n: 3, docs: func(bool) iter.Seq[*sources.Doc] {
		return slices.Values([]*sources.Doc{sources.D("_id", "a", "x", strings.Repeat("y", 5000)), sources.D("_id", "b"), sources.D("_id", "c")})
	}}
	f := newFakeES(t)
	f.maxBody = 1000
	var log syncBuffer
	err := esFor(t, f, limits{docs: 10, bytes: 1 << 20}, &log).load(t.Context(), "x_archive", "archive", []byte(`{}`), docs)
	if err == nil || !strings.Contains(err.Error(), "POST /_bulk: 413") {
		t.Errorf("a document over the limit: %v", err)
	}
	f = newFakeES(t)
	f.busy = 1000
	err = esFor(t, f, limits{docs: 10, bytes: 1 << 20}, &log).load(t.Context(), "x_archive", "archive", []byte(`{}`), docs)
	if err == nil || !strings.Contains(err.Error(), "bulk: 3 documents still refused with 429 after 10 attempts") {
		t.Errorf("a server always busy: %v", err)
	}
}

// An index loads without refresh and without replicas, and gets the
// mapping's settings for them back however the load ends: complete, with
// a document refused, or interrupted.
func TestSeedElasticRestoresSettings(t *testing.T) {
	t.Parallel()
	const restore = `{"index":{"refresh_interval":null,"number_of_replicas":0}}`
	var item string // an item of the sample
	for d := range sampleRoom(t).corpus().colls["archive"].docs(true) {
		item = idOf(d)
		break
	}
	for _, tc := range []struct {
		name    string
		prepare func(f *fakeES, cancel context.CancelFunc)
		fails   bool
	}{
		{"complete", func(*fakeES, context.CancelFunc) {}, false},
		{"a document refused", func(f *fakeES, _ context.CancelFunc) { f.refuse[item] = true }, true},
		{"interrupted", func(f *fakeES, cancel context.CancelFunc) { f.onBulk = cancel }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeES(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			tc.prepare(f, cancel)
			var log syncBuffer
			err := run(ctx, []string{"-targets", "elastic", "-wait", "10s", "-scale", "100", "-batch-docs", "10"},
				envOf("ELASTICSEARCH_URL", f.srv.URL, "ELASTICSEARCH_INDEX", "s"), &log)
			if (err != nil) != tc.fails {
				t.Fatalf("seed: %v, want failure %t\n%s", err, tc.fails, log.String())
			}
			ix := f.state()["s_archive"]
			create := decodeDoc(t, ix.body)
			settings, _ := create.Doc("settings")
			if r, _ := settings.Get("refresh_interval"); r != "-1" {
				t.Errorf("created with refresh_interval %v, want -1", r)
			}
			if r, _ := settings.Get("number_of_replicas"); r != int64(0) {
				t.Errorf("created with number_of_replicas %v, want 0", r)
			}
			if len(ix.settings) != 1 || string(ix.settings[0]) != restore {
				t.Errorf("settings put after the load %q, want %s", ix.settings, restore)
			}
		})
	}
}

// The settings of the load replace the body's own, written flat, under
// "index" or dotted; what the body did not set goes back as null.
func TestLoadSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, create, restore string
	}{
		{"none", `{"mappings":{}}`,
			`{"mappings":{},"settings":{"refresh_interval":"-1","number_of_replicas":0}}`,
			`{"index":{"refresh_interval":null,"number_of_replicas":null}}`},
		{"flat", `{"settings":{"number_of_shards":1,"number_of_replicas":2,"refresh_interval":"5s"}}`,
			`{"settings":{"number_of_shards":1,"refresh_interval":"-1","number_of_replicas":0}}`,
			`{"index":{"refresh_interval":"5s","number_of_replicas":2}}`},
		{"under index", `{"settings":{"index":{"number_of_replicas":"1","codec":"best_compression"}}}`,
			`{"settings":{"index":{"codec":"best_compression"},"refresh_interval":"-1","number_of_replicas":0}}`,
			`{"index":{"refresh_interval":null,"number_of_replicas":"1"}}`},
		{"dotted", `{"settings":{"index.refresh_interval":"30s"}}`,
			`{"settings":{"refresh_interval":"-1","number_of_replicas":0}}`,
			`{"index":{"refresh_interval":"30s","number_of_replicas":null}}`},
		{"only index", `{"settings":{"index":{"refresh_interval":"2s"}}}`,
			`{"settings":{"refresh_interval":"-1","number_of_replicas":0}}`,
			`{"index":{"refresh_interval":"2s","number_of_replicas":null}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			create, restore, err := loadSettings([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if string(create) != tc.create || string(restore) != tc.restore {
				t.Errorf("loadSettings(%s) =\n%s\n%s\nwant\n%s\n%s", tc.body, create, restore, tc.create, tc.restore)
			}
		})
	}
	if _, _, err := loadSettings([]byte(`[]`)); err == nil {
		t.Error("a body that is no object was taken")
	}
}

// -parallel N keeps N bulk requests in flight at once, never more.
func TestSeedElasticParallel(t *testing.T) {
	t.Parallel()
	const parallel = 3
	f := newFakeES(t)
	var (
		mu       sync.Mutex
		now, top int
		fill     sync.Once
	)
	full := make(chan struct{}) // closed once parallel bulks are in flight
	f.onBulk = func() {
		mu.Lock()
		now++
		top = max(top, now)
		if now == parallel {
			fill.Do(func() { close(full) })
		}
		mu.Unlock()
		// The first bulks wait for one another: they overlap, or the
		// test fails rather than hangs.
		select {
		case <-full:
		case <-time.After(time.Minute):
			t.Error("no three bulk requests at once")
			fill.Do(func() { close(full) })
		}
		mu.Lock()
		now--
		mu.Unlock()
	}
	var log syncBuffer
	args := []string{"-targets", "elastic", "-wait", "10s", "-scale", "100", "-batch-docs", "5", "-parallel", strconv.Itoa(parallel)}
	if err := run(t.Context(), args, envOf("ELASTICSEARCH_URL", f.srv.URL, "ELASTICSEARCH_INDEX", "p"), &log); err != nil {
		t.Fatalf("seed: %v\n%s", err, log.String())
	}
	if top != parallel {
		t.Errorf("at most %d bulk requests at once, want %d", top, parallel)
	}
	if n := len(f.state()["p_archive"].ids); n != 100 {
		t.Errorf("%d items indexed, want 100", n)
	}
}
