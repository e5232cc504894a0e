// Package estest is a fake Elasticsearch for tests: an httptest.Server that
// answers POST /<index>/_search over documents held in memory, GET / and
// GET /_cluster/health, in the formats of Elasticsearch 8.x, 7.17 or
// 7.10, with the X-Elastic-Product header the v8 client's product check
// wants from 7.14 on (7.10 does not send it), or as another product. It
// records every request so tests can assert exactly what was sent, and
// can be told to fail the way real clusters do: error responses in the
// servers' own formats, partial results, slowness, refusal, a connection
// reset. Knowing the index mappings, it refuses sorts and terms
// aggregations on text fields as Elasticsearch does. It takes search_after, and opens points in time
// (POST /<index>/_pit) on a snapshot of the index, searched at
// POST /_search, renewed by each search's keep_alive and lapsing by its
// clock; as 8.x it refuses to sort on _id. sources/elastic's
// TestFakeAnswersAsReal holds it to a real 7.10.2 node's answers.
package estest

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	essrc "github.com/prodapi/prodapi/sources/elastic"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// A Version is the Elasticsearch release the fake imitates.
type Version string

// The versions the adapter supports.
const (
	V8 Version = "8.15.3"
	V7 Version = "7.17.24"
	// V710 is what Superdesk's docker-compose runs (7.10.1; 7.10.2 is
	// the one test/realserver runs): no X-Elastic-Product header.
	V710 Version = "7.10.2"
)

// Major is the version's major number: 7 or 8.
func (v Version) Major() int {
	if strings.HasPrefix(string(v), "7.") {
		return 7
	}
	return 8
}

// sendsProductHeader reports whether the version sends
// X-Elastic-Product: Elasticsearch, as every release since 7.14 does.
func (v Version) sendsProductHeader() bool {
	var major, minor int
	fmt.Sscanf(string(v), "%d.%d", &major, &minor)
	return major > 7 || major == 7 && minor >= 14
}

// OpenSearch is an Options.Product: GET / answers as OpenSearch 1.3 does
// with compatibility.override_main_response_version on (version number
// 7.10.2, its own tagline, no build flavor), without X-Elastic-Product.
const OpenSearch = "OpenSearch"

// A SearchFunc evaluates a search body over the documents of an index,
// as sandbox.SearchSorted does: the page of hits (after search_after,
// from and size, in sort order, _source filtering applied, _id a
// string), the number of matches (exact when the body's track_total_hits
// is true), the aggregations, and each hit's sort values. An error
// wrapping sources.ErrInvalid is answered as Elasticsearch answers a
// query it cannot run (400).
type SearchFunc func(docs []*sources.Doc, body *sources.Doc, now time.Time) (*sources.Result, [][]any, error)

// Options configure a fake.
type Options struct {
	Version Version // V8 when empty
	// Prefix is the index prefix: collection c is served as
	// <Prefix>_<c>. Empty means "superdesk".
	Prefix string
	// Docs are the documents of each collection. An index exists when its
	// collection is a key, even with no documents; others answer 404
	// index_not_found_exception, as a fresh cluster does.
	Docs map[string][]*sources.Doc
	// Search evaluates queries; nil means sandbox.SearchSorted, the
	// sandbox's Elasticsearch evaluator.
	Search SearchFunc
	// Now is the clock for date math; nil means time.Now.
	Now func() time.Time
	// TotalAsInt sends hits.total as a bare number, as Elasticsearch 6
	// did and 7+ does with rest_total_hits_as_int=true.
	TotalAsInt bool
	// NoProductHeader leaves out X-Elastic-Product (which versions from
	// 7.14 on send): what a proxy or another product answers; the v8
	// client refuses it.
	NoProductHeader bool
	// Product, when set (OpenSearch), makes the fake another product
	// speaking the same API: its own GET / and no X-Elastic-Product.
	Product string
	// Mappings are the create-index bodies by collection, from which the
	// fake learns the text fields (Elasticsearch refuses to sort or
	// aggregate on those); nil means essrc.IndexMappings(), what
	// prodapi-seed creates.
	Mappings map[string][]byte
	// Addr is the address to listen on; empty means 127.0.0.1:0. Tests of
	// recovery start a fake where a client already failed to connect.
	Addr string
}

// A Request is one request the fake received, with its body decompressed.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Header http.Header
	Body   []byte
}

// A Reply replaces the fake's answer to a request.
type Reply struct {
	// Status and Body, when Status is set, are sent as they are.
	Status int
	Body   string
	// Hang holds the request until the client gives up (or the fake is
	// closed): a server slower than any deadline.
	Hang bool
	// Held, when set, receives a value (if it has room) as the fake
	// starts holding a Hang or Delay request, so a test can act while
	// the request is in flight without sleeping.
	Held chan<- struct{}
	// Delay holds the request this long (or until the client gives up),
	// then answers normally or with Status/Body.
	Delay time.Duration
	// StallBody sends the headers and half the answer, then holds the rest
	// until the client gives up: a response that starts but never ends.
	StallBody bool
	// Reset drops the connection without answering, with a TCP reset:
	// a node going away under the request.
	Reset bool
	// TimedOut and FailedShards answer the search normally but mark the
	// response partial: "timed_out": true, or that many shards failed
	// (with their failures listed).
	TimedOut     bool
	FailedShards int
}

// A Server is a running fake.
type Server struct {
	URL  string
	opts Options
	srv  *httptest.Server
	stop chan struct{} // closed at cleanup: releases held requests

	text map[string]map[string]bool // index -> its text fields (no fielddata)

	mu       sync.Mutex
	indexes  map[string][]*sources.Doc
	pits     map[string]*pointInTime
	pitSeq   int
	requests []Request
	faults   []fault
}

// A pointInTime is an open point in time: the documents of its index as
// they were when it opened, until it expires.
type pointInTime struct {
	index   string
	docs    []*sources.Doc
	expires time.Time
}

type fault struct {
	times int // 0: until Clear
	reply Reply
}

// New starts a fake for the duration of the test.
func New(t testing.TB, opts Options) *Server {
	t.Helper()
	if opts.Version == "" {
		opts.Version = V8
	}
	if opts.Prefix == "" {
		opts.Prefix = "superdesk"
	}
	if opts.Search == nil {
		opts.Search = sandbox.SearchSorted
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Mappings == nil {
		opts.Mappings = essrc.IndexMappings()
	}
	s := &Server{opts: opts, stop: make(chan struct{}), indexes: map[string][]*sources.Doc{}, text: map[string]map[string]bool{},
		pits: map[string]*pointInTime{}}
	for c, body := range opts.Mappings {
		fields, err := textFields(body)
		if err != nil {
			t.Fatalf("estest: mapping of %s: %v", c, err)
		}
		s.text[opts.Prefix+"_"+c] = fields
	}
	for c, docs := range opts.Docs {
		s.indexes[opts.Prefix+"_"+c] = docs
	}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if opts.Addr != "" {
		l, err := net.Listen("tcp", opts.Addr)
		if err != nil {
			t.Fatalf("estest: listen on %s: %v", opts.Addr, err)
		}
		s.srv.Listener.Close()
		s.srv.Listener = l
	}
	s.srv.Start()
	s.URL = s.srv.URL
	t.Cleanup(func() {
		close(s.stop)
		s.srv.Close()
	})
	return s
}

// RefusedURL returns the URL of a port nothing listens on: connections to
// it are refused.
func RefusedURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// Fail makes the next n requests (every request, until Clear, when n is
// 0) get r.
func (s *Server) Fail(n int, r Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{times: n, reply: r})
}

// Clear drops the pending faults and the recorded requests.
func (s *Server) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
	s.requests = nil
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Searches returns the requests to a _search endpoint.
func (s *Server) Searches() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if strings.HasSuffix(r.Path, "/_search") {
			out = append(out, r)
		}
	}
	return out
}

func (s *Server) nextFault() (Reply, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.faults) == 0 {
		return Reply{}, false
	}
	f := &s.faults[0]
	r := f.reply
	if f.times > 0 {
		if f.times--; f.times == 0 {
			s.faults = s.faults[1:]
		}
	}
	return r, true
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := readBody(r)
	rec := Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header.Clone(), Body: body}
	s.mu.Lock()
	s.requests = append(s.requests, rec)
	s.mu.Unlock()

	if !s.opts.NoProductHeader && s.opts.Product == "" && s.opts.Version.sendsProductHeader() {
		w.Header().Set("X-Elastic-Product", "Elasticsearch")
	}
	if err != nil {
		s.writeError(w, r, 400, "parse_exception", "request body is required", nil)
		return
	}
	if refusal := s.checkMediaTypes(r); refusal != nil {
		s.write(w, r, 400, refusal)
		return
	}

	reply, faulted := s.nextFault()
	if reply.Held != nil && (reply.Hang || reply.Delay > 0) {
		select {
		case reply.Held <- struct{}{}:
		default:
		}
	}
	if reply.Reset {
		reset(w)
		return
	}
	if reply.Hang {
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
		return
	}
	if reply.Delay > 0 {
		t := time.NewTimer(reply.Delay)
		defer t.Stop()
		select {
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		case <-t.C:
		}
	}
	if reply.StallBody {
		r = r.WithContext(context.WithValue(r.Context(), stallKey{}, true))
	}
	if faulted && reply.Status != 0 {
		s.write(w, r, reply.Status, []byte(reply.Body))
		return
	}

	path := strings.Trim(r.URL.Path, "/")
	switch {
	case path == "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		s.write(w, r, 200, s.rootInfo())
	case path == "_cluster/health" && r.Method == http.MethodGet:
		s.write(w, r, 200, []byte(clusterHealth))
	case path == "_search" && (r.Method == http.MethodPost || r.Method == http.MethodGet):
		s.search(w, r, "", body, reply)
	case strings.HasSuffix(path, "/_search") && (r.Method == http.MethodPost || r.Method == http.MethodGet):
		s.search(w, r, strings.TrimSuffix(path, "/_search"), body, reply)
	case strings.HasSuffix(path, "/_pit") && r.Method == http.MethodPost:
		s.openPIT(w, r, strings.TrimSuffix(path, "/_pit"))
	default:
		s.writeError(w, r, 405, "", fmt.Sprintf("Incorrect HTTP method for uri [%s] and method [%s]", r.URL.Path, r.Method), nil)
	}
}

func readBody(r *http.Request) ([]byte, error) {
	var rd io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			return nil, err
		}
		rd = zr
	}
	return io.ReadAll(rd)
}

// checkMediaTypes refuses versioned media types as the real servers do:
// a server accepts compatible-with its own major or the one before (8.x:
// 8 or 7, as its message says; 7.17: 7, the 6 in its message is our
// guess), and answers anything else with 400 media_type_header_exception.
func (s *Server) checkMediaTypes(r *http.Request) []byte {
	major := s.opts.Version.Major()
	for _, h := range []string{"Accept", "Content-Type"} {
		v := r.Header.Get(h)
		_, after, ok := strings.Cut(v, "compatible-with=")
		if !ok {
			continue
		}
		var n int
		fmt.Sscanf(after, "%d", &n)
		if n != major && n != major-1 {
			return ErrorBody(400, "media_type_header_exception", "Invalid media-type value on headers [Accept, Content-Type]",
				sources.D("caused_by", sources.D("type", "status_exception",
					"reason", fmt.Sprintf("%s version must be either version %d or %d, but found %d. %s=%s", h, major, major-1, n, h, v))))
		}
	}
	return nil
}

func (s *Server) rootInfo() []byte {
	if s.opts.Product == OpenSearch {
		return []byte(openSearchInfo)
	}
	lucene, wire, index := "9.11.1", "7.17.0", "7.0.0"
	switch {
	case s.opts.Version == V710:
		lucene, wire, index = "8.7.0", "6.8.0", "6.0.0-beta1"
	case s.opts.Version.Major() == 7:
		lucene, wire, index = "8.11.3", "6.8.0", "6.0.0-beta1"
	}
	return fmt.Appendf(nil, `{
  "name" : "es01",
  "cluster_name" : "docker-cluster",
  "cluster_uuid" : "sJ1YqzGsQ-iHLXBGM0u5mw",
  "version" : {
    "number" : %q,
    "build_flavor" : "default",
    "build_type" : "docker",
    "build_hash" : "f97532e680b555c3a05e73a74c28afb666923018",
    "build_date" : "2024-10-09T22:08:00.328917561Z",
    "build_snapshot" : false,
    "lucene_version" : %q,
    "minimum_wire_compatibility_version" : %q,
    "minimum_index_compatibility_version" : %q
  },
  "tagline" : "You Know, for Search"
}
`, s.opts.Version, lucene, wire, index)
}

const openSearchInfo = `{
  "name" : "opensearch-node1",
  "cluster_name" : "opensearch-cluster",
  "cluster_uuid" : "Jv0sQ3WQS0S8r2cOlhXKkg",
  "version" : {
    "distribution" : "opensearch",
    "number" : "7.10.2",
    "build_type" : "tar",
    "build_hash" : "9a5b4a6d8e9b8bd8f5bd6c59cb6fbb6c42ce8f32",
    "build_date" : "2023-12-14T21:26:03.530979Z",
    "build_snapshot" : false,
    "lucene_version" : "8.10.1",
    "minimum_wire_compatibility_version" : "6.8.0",
    "minimum_index_compatibility_version" : "6.0.0-beta1"
  },
  "tagline" : "The OpenSearch Project: https://opensearch.org/"
}
`

const clusterHealth = `{"cluster_name":"docker-cluster","status":"green","timed_out":false,"number_of_nodes":1,"number_of_data_nodes":1,"active_primary_shards":5,"active_shards":5,"relocating_shards":0,"initializing_shards":0,"unassigned_shards":0,"delayed_unassigned_shards":0,"number_of_pending_tasks":0,"number_of_in_flight_fetch":0,"task_max_waiting_in_queue_millis":0,"active_shards_percent_as_number":100.0}`

// write sends a JSON body, gzipped when the client accepts it (as
// Elasticsearch does with http.compression on).
func (s *Server) write(w http.ResponseWriter, r *http.Request, status int, body []byte) {
	ct := "application/json"
	if s.opts.Version.Major() == 7 {
		ct = "application/json; charset=UTF-8"
	}
	if v := r.Header.Get("Accept"); strings.Contains(v, "compatible-with=") {
		ct = v
	}
	w.Header().Set("Content-Type", ct)
	if strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		zw.Write(body)
		zw.Close()
		body = b.Bytes()
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	if stall, _ := r.Context().Value(stallKey{}).(bool); stall {
		w.Write(body[:len(body)/2])
		http.NewResponseController(w).Flush()
		select {
		case <-r.Context().Done():
		case <-s.stop:
		}
		return
	}
	w.Write(body)
}

type stallKey struct{}

// writeError sends an error in Elasticsearch's format. extra are fields
// of the error object after type and reason.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, status int, typ, reason string, extra *sources.Doc) {
	s.write(w, r, status, ErrorBody(status, typ, reason, extra))
}

// ErrorBody is an error response as Elasticsearch writes it:
// {"error": {"root_cause": [{type, reason, ...}], "type", "reason", ...},
// "status": N}.
func ErrorBody(status int, typ, reason string, extra *sources.Doc) []byte {
	cause := sources.D("type", typ, "reason", reason)
	for k, v := range extra.All() {
		if k != "caused_by" { // root causes are the innermost errors
			cause.Set(k, v)
		}
	}
	e := sources.D("root_cause", []any{cause.Clone()}, "type", typ, "reason", reason)
	for k, v := range extra.All() {
		e.Set(k, v)
	}
	return codec.AppendJSON(nil, sources.D("error", e, "status", int64(status)))
}

// search answers a search of an index, or of the point in time the
// body names (index "": POST /_search).
func (s *Server) search(w http.ResponseWriter, r *http.Request, index string, body []byte, reply Reply) {
	var req *sources.Doc
	if len(bytes.TrimSpace(body)) > 0 {
		v, err := codec.DecodeJSON(body, codec.DecodeOptions{})
		d, isDoc := v.(*sources.Doc)
		if err != nil || !isDoc {
			s.writeError(w, r, 400, "x_content_parse_exception", "[1:1] Unexpected character: was expecting a JSON object", nil)
			return
		}
		req = d
	}
	docs, index, pitID, refusal := s.searched(index, req)
	if refusal != nil {
		s.write(w, r, refusal.status, refusal.body)
		return
	}
	if s.opts.Version.Major() >= 8 && slices.ContainsFunc(sortKeys(req), func(k sortKey) bool { return k.field == "_id" }) {
		s.write(w, r, 400, IDFieldData(index))
		return
	}
	if after, ok := req.Get("search_after"); ok {
		if a, _ := after.([]any); len(a) != len(sortKeys(req)) {
			s.write(w, r, 400, shardFailure(index, 400, sources.D("type", "illegal_argument_exception",
				"reason", fmt.Sprintf("search_after has %d value(s) but sort has %d.", len(a), len(sortKeys(req))))))
			return
		}
	}
	if pitID == "" && slices.ContainsFunc(sortKeys(req), func(k sortKey) bool { return k.field == "_shard_doc" }) {
		s.write(w, r, 400, ErrorBody(400, "illegal_argument_exception", "[_shard_doc] sort field cannot be used without [point in time]", nil))
		return
	}
	if field := textField(s.text[index], req); field != "" {
		s.write(w, r, 400, FieldData(index, field))
		return
	}
	if field := unmappedSort(docs, req); field != "" {
		s.write(w, r, 400, NoMapping(index, field))
		return
	}
	// Evaluate with an exact count; track_total_hits is applied when
	// rendering, so the response can say "gte" as Elasticsearch does.
	exact := req.Clone()
	if exact == nil {
		exact = sources.NewDoc()
	}
	exact.Set("track_total_hits", true)
	exact.Delete("pit")
	res, sorts, err := s.opts.Search(docs, exact, s.opts.Now())
	if err != nil {
		s.write(w, r, 400, ParsingError(err.Error()))
		return
	}
	resp := s.response(index, req, res, sorts, reply)
	if pitID != "" {
		resp.Set("pit_id", pitID)
	}
	s.write(w, r, 200, codec.AppendJSON(nil, resp))
}

// A refusal is an error answer, status and body.
type refusal struct {
	status int
	body   []byte
}

// searched returns the documents a search reads: its index's, or those
// of the point in time its body names, whose keep-alive it renews.
func (s *Server) searched(index string, req *sources.Doc) (docs []*sources.Doc, in, pitID string, r *refusal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	spec, _ := req.Doc("pit")
	if spec == nil {
		docs, ok := s.indexes[index]
		if !ok {
			return nil, "", "", &refusal{404, IndexNotFound(index)}
		}
		return slices.Clone(docs), index, "", nil
	}
	if index != "" {
		return nil, "", "", &refusal{400, ErrorBody(400, "action_request_validation_exception",
			"Validation Failed: 1: [indices] cannot be used with point in time. Do not specify any index with point in time.;", nil)}
	}
	id, _ := spec.String("id")
	p, ok := s.pits[id]
	if !ok || !s.opts.Now().Before(p.expires) {
		delete(s.pits, id)
		return nil, "", "", &refusal{404, SearchContextMissing(id)}
	}
	if ka, ok := spec.String("keep_alive"); ok {
		d, err := parseKeepAlive(ka)
		if err != nil {
			return nil, "", "", &refusal{400, ParsingError(err.Error())}
		}
		p.expires = s.opts.Now().Add(d)
	}
	return p.docs, p.index, id, nil
}

// openPIT opens a point in time on an index (POST /<index>/_pit).
func (s *Server) openPIT(w http.ResponseWriter, r *http.Request, index string) {
	d, err := parseKeepAlive(r.URL.Query().Get("keep_alive"))
	if err != nil {
		s.write(w, r, 400, ParsingError(err.Error()))
		return
	}
	s.mu.Lock()
	docs, ok := s.indexes[index]
	var id string
	if ok {
		s.pitSeq++
		id = base64.URLEncoding.EncodeToString(fmt.Appendf(nil, "pit-%d-%s", s.pitSeq, index))
		s.pits[id] = &pointInTime{index: index, docs: slices.Clone(docs), expires: s.opts.Now().Add(d)}
	}
	s.mu.Unlock()
	if !ok {
		s.write(w, r, 404, IndexNotFound(index))
		return
	}
	s.write(w, r, 200, codec.AppendJSON(nil, sources.D("id", id)))
}

// ExpirePITs forgets every open point in time, as a node restart does.
func (s *Server) ExpirePITs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.pits)
}

// OpenPITs returns the number of points in time open (expired or not).
func (s *Server) OpenPITs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pits)
}

// parseKeepAlive reads a keep-alive in Elasticsearch's time units (ms, s,
// m, h, d).
func parseKeepAlive(v string) (time.Duration, error) {
	for _, u := range []struct {
		suffix string
		unit   time.Duration
	}{{"ms", time.Millisecond}, {"s", time.Second}, {"m", time.Minute}, {"h", time.Hour}, {"d", 24 * time.Hour}} {
		if n, ok := strings.CutSuffix(v, u.suffix); ok {
			if i, err := strconv.ParseInt(n, 10, 64); err == nil && i > 0 {
				return time.Duration(i) * u.unit, nil
			}
		}
	}
	return 0, fmt.Errorf("failed to parse setting [keep_alive] with value [%s] as a time value", v)
}

// response renders a search response as a real node does (checked
// against one by TestFakeAnswersAsReal): hits with _index, _type on 7.x,
// _id, _score (null when sorted, unless by _score), _source (the
// document without _id, plus _resource as eve-elastic stores it unless
// the _source filter leaves it out; none when the body says "_source":
// false) and, when sorted, sort; the total as track_total_hits asks;
// max_score null when sorted or empty; the aggregations.
func (s *Server) response(index string, req *sources.Doc, res *sources.Result, sorts [][]any, reply Reply) *sources.Doc {
	shards := sources.D("total", int64(1), "successful", int64(1), "skipped", int64(0), "failed", int64(0))
	if n := int64(reply.FailedShards); n > 0 {
		shards = sources.D("total", n+1, "successful", int64(1), "skipped", int64(0), "failed", n)
		var failures []any
		for i := range n {
			failures = append(failures, sources.D("shard", i+1, "index", index, "node", "dKzpvp0QTNqKlPOs8xBOrw",
				"reason", sources.D("type", "node_not_connected_exception", "reason", "[es02][172.18.0.3:9300] Node not connected")))
		}
		shards.Set("failures", failures)
	}
	sorted, scored := req.Has("sort"), sortsByScore(req)
	srcSpec, _ := req.Get("_source")
	withResource := keepsResource(srcSpec)
	list := make([]any, 0, len(res.Docs))
	for i, h := range res.Docs {
		hit := sources.D("_index", index)
		if s.opts.Version.Major() == 7 {
			hit.Set("_type", "_doc")
		}
		id, _ := h.Get("_id")
		idStr, _ := sources.IDString(id)
		hit.Set("_id", idStr)
		if sorted && !scored {
			hit.Set("_score", nil)
		} else {
			hit.Set("_score", 1.0)
		}
		if srcSpec != false {
			src := sources.NewDoc()
			for k, v := range h.All() {
				if k != "_id" {
					src.Set(k, v)
				}
			}
			if withResource {
				src.Set("_resource", collectionOf(index, s.opts.Prefix))
			}
			hit.Set("_source", src)
		}
		if sorted && i < len(sorts) {
			hit.Set("sort", sorts[i])
		}
		list = append(list, hit)
	}
	hitsDoc := sources.NewDoc()
	if t := totalOf(req, res.Total, s.opts.TotalAsInt); t != nil {
		hitsDoc.Set("total", t)
	}
	if sorted || len(list) == 0 { // sorted: even by _score
		hitsDoc.Set("max_score", nil) // NaN, written as null
	} else {
		hitsDoc.Set("max_score", 1.0)
	}
	hitsDoc.Set("hits", list)
	resp := sources.D("took", int64(3), "timed_out", reply.TimedOut, "_shards", shards, "hits", hitsDoc)
	if res.Aggregations != nil {
		resp.Set("aggregations", res.Aggregations)
	}
	return resp
}

// sortsByScore reports whether the body's sort has a _score key: then
// hits keep their scores.
func sortsByScore(req *sources.Doc) bool {
	return slices.ContainsFunc(sortKeys(req), func(k sortKey) bool { return k.field == "_score" })
}

// A sortKey is one key of a body's sort: its field, and its order or
// options ("asc", "desc", {"order": ..., "unmapped_type": ...}; nil for a
// bare field name).
type sortKey struct {
	field string
	opts  any
}

// sortKeys are the keys of the body's sort, one or a list; an object
// naming more than one field is not a key and is skipped.
func sortKeys(req *sources.Doc) []sortKey {
	spec, _ := req.Get("sort")
	var keys []sortKey
	for _, k := range asList(spec) {
		switch k := k.(type) {
		case string:
			keys = append(keys, sortKey{field: k})
		case *sources.Doc:
			if k.Len() == 1 {
				f := k.Fields()[0]
				keys = append(keys, sortKey{field: f.Key, opts: f.Value})
			}
		}
	}
	return keys
}

// keepsResource reports whether a _source filter keeps _resource, the
// field eve-elastic stores in every document: the fake adds it after the
// evaluator filtered the source, so it applies the filter to it here.
func keepsResource(spec any) bool {
	var includes, excludes []any
	switch x := spec.(type) {
	case nil:
		return true
	case bool:
		return x
	case string:
		includes = []any{x}
	case []any:
		includes = x
	case *sources.Doc:
		for _, k := range []string{"includes", "include"} {
			if v, ok := x.Get(k); ok {
				includes = asList(v)
			}
		}
		for _, k := range []string{"excludes", "exclude"} {
			if v, ok := x.Get(k); ok {
				excludes = asList(v)
			}
		}
	}
	matches := func(patterns []any) bool {
		return slices.ContainsFunc(patterns, func(p any) bool {
			ps, _ := p.(string)
			ok, _ := path.Match(ps, "_resource")
			return ok
		})
	}
	return (len(includes) == 0 || matches(includes)) && !matches(excludes)
}

func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

// textFields returns the paths of the text fields of a create-index body
// that have no fielddata.
func textFields(body []byte) (map[string]bool, error) {
	v, err := codec.DecodeJSON(body, codec.DecodeOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	root, _ := v.(*sources.Doc)
	m, _ := root.Doc("mappings")
	var walk func(prefix string, props *sources.Doc)
	walk = func(prefix string, props *sources.Doc) {
		for name, p := range props.All() {
			p, ok := p.(*sources.Doc)
			if !ok {
				continue
			}
			if typ, _ := p.Get("type"); typ == "text" {
				if fd, _ := p.Get("fielddata"); fd != true {
					out[prefix+name] = true
				}
			}
			if sub, ok := p.Doc("properties"); ok {
				walk(prefix+name+".", sub)
			}
		}
	}
	if props, ok := m.Doc("properties"); ok {
		walk("", props)
	}
	return out, nil
}

// textField returns the first text field the body sorts or aggregates
// on (terms aggregations, at any depth), which Elasticsearch refuses.
func textField(text map[string]bool, req *sources.Doc) string {
	if len(text) == 0 {
		return ""
	}
	for _, k := range sortKeys(req) {
		if text[k.field] {
			return k.field
		}
	}
	var aggs func(d *sources.Doc) string
	aggs = func(d *sources.Doc) string {
		for _, key := range []string{"aggs", "aggregations"} {
			a, _ := d.Doc(key)
			for _, agg := range a.All() {
				agg, ok := agg.(*sources.Doc)
				if !ok {
					continue
				}
				terms, _ := agg.Doc("terms")
				if f, _ := terms.Get("field"); f != nil {
					if f, ok := f.(string); ok && text[f] {
						return f
					}
				}
				if f := aggs(agg); f != "" {
					return f
				}
			}
		}
		return ""
	}
	return aggs(req)
}

// unmappedSort returns the first sort field without unmapped_type that
// no document of the index has: with dynamic mappings, a field no
// document ever had is unmapped, and Elasticsearch refuses to sort on it.
// A .keyword or .raw suffix names a sub-field of its parent.
func unmappedSort(docs []*sources.Doc, req *sources.Doc) string {
	for _, k := range sortKeys(req) {
		if opts, ok := k.opts.(*sources.Doc); ok && opts.Has("unmapped_type") {
			continue
		}
		field := k.field
		if field == "" || field == "_score" || field == "_doc" || field == "_shard_doc" {
			continue
		}
		path := strings.TrimSuffix(strings.TrimSuffix(field, ".keyword"), ".raw")
		if !slices.ContainsFunc(docs, func(d *sources.Doc) bool { return has(d, strings.Split(path, ".")) }) {
			return field
		}
	}
	return ""
}

// has reports whether a path reaches a non-null value, through arrays.
func has(v any, path []string) bool {
	switch x := v.(type) {
	case nil:
		return false
	case []any:
		return slices.ContainsFunc(x, func(e any) bool { return has(e, path) })
	case *sources.Doc:
		if len(path) == 0 {
			return true
		}
		next, _ := x.Get(path[0])
		return has(next, path[1:])
	}
	return len(path) == 0
}

func collectionOf(index, prefix string) string { return strings.TrimPrefix(index, prefix+"_") }

// totalOf renders hits.total as track_total_hits asks: exact when true, up
// to N (then "gte") when a number, 10000 by default, absent when false.
func totalOf(req *sources.Doc, total int, asInt bool) any {
	limit := int64(10000)
	switch v, _ := req.Get("track_total_hits"); v := v.(type) {
	case bool:
		if !v {
			return nil
		}
		limit = -1
	case int64:
		limit = v
	}
	n, rel := int64(total), "eq"
	if limit >= 0 && n > limit {
		n, rel = limit, "gte"
	}
	if asInt {
		return n
	}
	return sources.D("value", n, "relation", rel)
}

// reset closes the request's connection with a TCP reset.
func reset(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		panic("estest: cannot take over the connection: " + err.Error())
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	conn.Close()
}

// Canned error bodies, as Elasticsearch 7.17 and 8.x write them.

// IndexNotFound is the 404 body for a missing index.
func IndexNotFound(index string) []byte {
	return ErrorBody(404, "index_not_found_exception", "no such index ["+index+"]",
		sources.D("resource.type", "index_or_alias", "resource.id", index, "index_uuid", "_na_", "index", index))
}

// ParsingError is the 400 body for a query Elasticsearch cannot parse.
func ParsingError(reason string) []byte {
	return ErrorBody(400, "parsing_exception", reason, sources.D("line", int64(1), "col", int64(42)))
}

// ShardError is a 400 search_phase_execution_exception: every shard
// failed with a query_shard_exception carrying reason.
func ShardError(index, reason string) []byte {
	cause := sources.D("type", "query_shard_exception", "reason", reason, "index_uuid", "mJ0kJqXnS1W6Dkd4iQm7bQ", "index", index)
	e := sources.D("root_cause", []any{cause},
		"type", "search_phase_execution_exception", "reason", "all shards failed", "phase", "query", "grouped", true,
		"failed_shards", []any{sources.D("shard", int64(0), "index", index, "node", "dKzpvp0QTNqKlPOs8xBOrw", "reason", cause.Clone())})
	return codec.AppendJSON(nil, sources.D("error", e, "status", int64(400)))
}

// NoMapping is Elasticsearch's answer to a sort on an unmapped field.
func NoMapping(index, field string) []byte {
	return ShardError(index, "No mapping found for ["+field+"] in order to sort on")
}

// FieldData is Elasticsearch's answer to a sort or terms aggregation on
// a text field without fielddata.
func FieldData(index, field string) []byte {
	reason := "Text fields are not optimised for operations that require per-document field data like aggregations and sorting, " +
		"so these operations are disabled by default. Please use a keyword field instead. Alternatively, set fielddata=true on [" +
		field + "] in order to load field data by uninverting the inverted index. Note that this can use significant memory."
	return shardFailure(index, 400, sources.D("type", "illegal_argument_exception", "reason", reason))
}

// IDFieldData is Elasticsearch 8's answer to a sort on _id, whose
// fielddata it no longer loads by default.
func IDFieldData(index string) []byte {
	cause := sources.D("type", "illegal_argument_exception", "reason", "Fielddata access on the _id field is disallowed, "+
		"you can re-enable it by updating the dynamic cluster setting: indices.id_field_data.enabled")
	return shardFailure(index, 400, cause)
}

// SearchContextMissing is the 404 of a search of a point in time that
// has expired, or that no node knows.
func SearchContextMissing(id string) []byte {
	cause := sources.D("type", "search_context_missing_exception", "reason", "No search context found for id ["+id+"]")
	return shardFailure("", 404, cause)
}

// shardFailure is a search_phase_execution_exception of status whose
// every shard failed with cause.
func shardFailure(index string, status int64, cause *sources.Doc) []byte {
	var in any = index
	if index == "" {
		in = nil
	}
	e := sources.D("root_cause", []any{cause},
		"type", "search_phase_execution_exception", "reason", "all shards failed", "phase", "query", "grouped", true,
		"failed_shards", []any{sources.D("shard", int64(0), "index", in, "node", "dKzpvp0QTNqKlPOs8xBOrw", "reason", cause.Clone())},
		"caused_by", cause.Clone())
	return codec.AppendJSON(nil, sources.D("error", e, "status", status))
}

// Rejected is the 429 of a full search queue.
func Rejected() []byte {
	return ErrorBody(429, "es_rejected_execution_exception",
		"rejected execution of org.elasticsearch.common.util.concurrent.TimedRunnable@5f1d6a3 on QueueResizingEsThreadPoolExecutor[name = es01/search, queue capacity = 1000, min queue capacity = 1000, max queue capacity = 1000, frame size = 2000, targeted response rate = 1s, task execution EWMA = 1.2ms, adjustment amount = 50, org.elasticsearch.common.util.concurrent.QueueResizingEsThreadPoolExecutor@3c4d2b1a[Running, pool size = 13, active threads = 13, queued tasks = 1000, completed tasks = 1033]]",
		nil)
}

// NoShards is the 503 of a search no shard could serve (the cluster is
// recovering or the index's primaries are unassigned).
func NoShards() []byte {
	e := sources.D("root_cause", []any{}, "type", "search_phase_execution_exception", "reason", "all shards failed",
		"phase", "query", "grouped", true, "failed_shards", []any{})
	return codec.AppendJSON(nil, sources.D("error", e, "status", int64(503)))
}

// Indexes returns the names of the indexes the fake holds.
func (s *Server) Indexes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.indexes))
}
