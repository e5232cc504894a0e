package elastic

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/elastic/go-elasticsearch/v8"
	"github.com/elastic/go-elasticsearch/v8/esapi"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// Options configure a Store.
type Options struct {
	Index   string           // ELASTICSEARCH_INDEX: the index prefix, e.g. "superdesk"
	Timeout time.Duration    // per request; 0 means DefaultTimeout
	Queries *metrics.Queries // counts backend "elastic", op "search" (and "pit"), and the failures
	Logger  *slog.Logger     // nil discards
	// PITKeepAlive is how long a cursor walk's point in time lives
	// between two pages (Elasticsearch 8 walks of resources without a
	// Tiebreaker); 0 means DefaultPITKeepAlive.
	PITKeepAlive time.Duration
	// Now is the clock a point in time's expiry is told by; nil means
	// time.Now.
	Now func() time.Time
}

// A Store reads lists and enrichment lookups from Superdesk's
// Elasticsearch indexes, <Index>_<collection>. It satisfies
// sources.SearchStore. It is safe for concurrent use.
type Store struct {
	client    *elasticsearch.Client
	prefix    string
	timeout   time.Duration
	queries   *metrics.Queries
	log       *slog.Logger
	keepAlive time.Duration
	now       func() time.Time

	// mapped is, per search collection, the type IndexMappings gives
	// each field ("date", "keyword", ...; dotted paths, multi-fields
	// too, nothing below a nested field): what a walk's range may be
	// built on (walkRange).
	mapped map[string]map[string]string

	// major is the server's major version, once known (GET /).
	major atomic.Int32

	// missing remembers the indexes already reported absent, so a fresh
	// newsroom logs one warning per index, not one per request.
	missing sync.Map // index name → struct{}
}

var _ sources.SearchStore = (*Store)(nil)

// Size bounds on response bodies read into memory. A search page is at
// most 500 documents (size ≤ 500; lookups up to lookupMax small ones);
// 128 MiB allows Superdesk's largest stories, an error body is small.
const (
	maxResponse      = 128 << 20
	maxErrorResponse = 1 << 20
)

// lookupMax is the size of a lookup without a Limit: the most
// Elasticsearch returns in one page (index.max_result_window).
const lookupMax = 10000

// New returns a Store that uses client. It does no I/O: a Store made while
// Elasticsearch is down works once it is back.
func New(client *elasticsearch.Client, opts Options) *Store {
	s := &Store{client: client, prefix: opts.Index, timeout: opts.Timeout, queries: opts.Queries, log: opts.Logger,
		keepAlive: cmp.Or(opts.PITKeepAlive, DefaultPITKeepAlive), now: opts.Now, mapped: fieldTypes()}
	if s.timeout <= 0 {
		s.timeout = DefaultTimeout
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	// The lists of the search resources are read here.
	for _, r := range sources.Resources() {
		if r.Search {
			s.queries.Declare(backend, r.Name)
		}
	}
	return s
}

// backend is this adapter's value of the backend label of the source
// metrics.
const backend = "elastic"

// IndexName is the index (in Superdesk, an alias) holding a collection:
// "<prefix>_<collection>", or the collection alone without a prefix.
func IndexName(prefix, collection string) string {
	if prefix == "" {
		return collection
	}
	return prefix + "_" + collection
}

// Find runs q.Search, the complete validated search body, on the
// resource's index and maps the hits to documents (see the package
// documentation for the mapping and the errors).
func (s *Store) Find(ctx context.Context, q *sources.Query) (*sources.Result, error) {
	if q.Search == nil {
		return nil, fmt.Errorf("elastic: search %s: no search body", q.Resource.Name)
	}
	if q.Cursor != nil {
		return s.walk(ctx, q)
	}
	r, err := s.search(ctx, "search", q.Resource.Collection, codec.AppendJSON(nil, q.Search), false)
	if err != nil {
		return nil, err
	}
	return r.result(q.Search), nil
}

// result is the page a response gives.
func (r *searchResponse) result(body *sources.Doc) *sources.Result {
	total := r.total
	if !r.hasTotal {
		// track_total_hits was off: count what we can see.
		from, _ := body.Get("from")
		n, _ := from.(int64)
		total = min(int(n)+len(r.docs), sources.MaxTotal)
	}
	return &sources.Result{Docs: r.docs, Total: total, Aggregations: r.aggregations}
}

// Lookup finds the documents of l.Collection whose l.Field is one of
// l.Values with one search:
//
//	{"query": {"bool": {"filter": [{"terms": {F: ["v1", "v2"]}}]}},
//	 "sort": [{S: {"order": "asc"}}], "size": Limit, "track_total_hits": false}
//
// Values go as strings (ObjectIDs as hex, as Superdesk indexes them);
// duplicates are dropped. Limit 0 means the most one search returns,
// 10000; a lookup that fills it is logged, as it may be cut short.
func (s *Store) Lookup(ctx context.Context, l sources.Lookup) ([]*sources.Doc, error) {
	body, n := lookupBody(l)
	if n == 0 {
		return []*sources.Doc{}, nil
	}
	r, err := s.search(ctx, "lookup", l.Collection, body, false)
	if err != nil {
		return nil, err
	}
	if l.Limit <= 0 && len(r.docs) >= lookupMax {
		s.log.WarnContext(ctx, "elastic: lookup may be cut short at the result window",
			slog.String("index", s.index(l.Collection)), slog.String("field", l.Field), slog.Int("docs", len(r.docs)))
	}
	return r.docs, nil
}

// lookupBody builds a lookup's search body; n is the number of values.
func lookupBody(l sources.Lookup) (body []byte, n int) {
	values := make([]any, 0, len(l.Values))
	seen := make(map[string]bool, len(l.Values))
	for _, v := range l.Values {
		s, ok := termString(v)
		if !ok || seen[s] {
			continue
		}
		seen[s] = true
		values = append(values, s)
	}
	if len(values) == 0 {
		return nil, 0
	}
	size := l.Limit
	if size <= 0 {
		size = lookupMax
	}
	terms := sources.D("terms", sources.D(l.Field, values))
	doc := sources.D("query", sources.D("bool", sources.D("filter", []any{terms})))
	if len(l.Sort) > 0 {
		sort := make([]any, len(l.Sort))
		for i, k := range l.Sort {
			order := "asc"
			if k.Desc {
				order = "desc"
			}
			sort[i] = sources.D(k.Field, sources.D("order", order))
		}
		doc.Set("sort", sort)
	}
	doc.Set("size", int64(size))
	doc.Set("track_total_hits", false)
	return codec.AppendJSON(nil, doc), len(values)
}

// termString renders a lookup value as the string the index holds.
func termString(v any) (string, bool) {
	switch v := v.(type) {
	case string:
		return v, true
	case sources.ObjectID:
		return v.Hex(), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case int:
		return strconv.Itoa(v), true
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), true
	case bool:
		return strconv.FormatBool(v), true
	case time.Time:
		return v.UTC().Format(sources.DateLayout), true
	}
	return "", false // nil, documents, arrays: match nothing
}

func (s *Store) index(collection string) string { return IndexName(s.prefix, collection) }

// search POSTs body to /<index>/_search under the store's timeout and
// reads the answer. op names the caller for errors ("search", "lookup").
// A search of a point in time (pit) goes to /_search: the point in time
// names its index.
func (s *Store) search(ctx context.Context, op, collection string, body []byte, pit bool) (*searchResponse, error) {
	return s.searchSeen(ctx, op, collection, body, pit, nil)
}

// searchSeen is search; seen, when set, is shown a 200 answer's bytes
// before they are decoded.
func (s *Store) searchSeen(ctx context.Context, op, collection string, body []byte, pit bool, seen func([]byte)) (_ *searchResponse, err error) {
	index := s.index(collection)
	if !validIndex(index) {
		return nil, fmt.Errorf("elastic: %s: invalid index name %q", op, index)
	}
	done := s.queries.Start(backend, sources.MetricName(collection), "search")
	defer func() { done(sources.FailureKind(err)) }()

	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	// Instrument: a span per search when the client was given
	// OpenTelemetry instrumentation (main does so when tracing).
	req := esapi.SearchRequest{Body: bytes.NewReader(body), Instrument: s.client.InstrumentationEnabled()}
	if !pit {
		req.Index = []string{index}
	}
	res, err := req.Do(tctx, s.client)
	if err != nil {
		return nil, transportError(ctx, tctx, op, index, err)
	}
	defer res.Body.Close()

	if res.StatusCode != http.StatusOK {
		data, err := readBounded(res.Body, maxErrorResponse)
		if err != nil && !errors.Is(err, errTooLarge) {
			return nil, transportError(ctx, tctx, op, index, err)
		}
		return s.statusError(ctx, op, index, res.StatusCode, data)
	}
	data, err := readBounded(res.Body, maxResponse)
	if errors.Is(err, errTooLarge) {
		return nil, &Error{Op: op, Index: index, Status: res.StatusCode,
			Reason: fmt.Sprintf("response over %d bytes; ask for fewer or smaller documents", maxResponse), Kind: sources.ErrInvalid}
	}
	if err != nil {
		return nil, transportError(ctx, tctx, op, index, err)
	}
	if seen != nil {
		seen(data)
	}
	r, err := parseSearch(data)
	if pe, ok := errors.AsType[*partialError](err); ok {
		return nil, &Error{Op: op, Index: index, Status: res.StatusCode, Reason: clip(pe.reason), Kind: sources.ErrPartial}
	}
	if err != nil {
		return nil, &Error{Op: op, Index: index, Status: res.StatusCode, Reason: clip(err.Error()), Kind: sources.ErrUnavailable}
	}
	return r, nil
}

// statusError handles an error response. Two are answers, not failures,
// as they were in the original: a missing index (a fresh newsroom has
// none until Superdesk first writes) and a sort on a field the index does
// not map (eve-elastic's "No mapping found for" rule) are empty results.
func (s *Store) statusError(ctx context.Context, op, index string, status int, data []byte) (*searchResponse, error) {
	e := parseError(data)
	switch {
	case status == http.StatusNotFound && e.typ == "index_not_found_exception":
		if _, seen := s.missing.LoadOrStore(index, struct{}{}); !seen {
			s.log.WarnContext(ctx, "elastic: index not found; its lists read as empty", slog.String("index", index))
		}
		return &searchResponse{docs: []*sources.Doc{}, hasTotal: true, missing: true}, nil
	case status == http.StatusBadRequest && e.noMapping:
		return &searchResponse{docs: []*sources.Doc{}, hasTotal: true}, nil
	case e.contextMissing:
		// A cursor walk's point in time has expired (or its node has
		// restarted): the client starts the walk again.
		return nil, &Error{Op: op, Index: index, Status: status, Type: e.typ, Reason: e.text(), Kind: sources.ErrCursor}
	}
	return nil, &Error{Op: op, Index: index, Status: status, Type: e.typ, Reason: e.text(), Kind: statusKind(status, e)}
}

// Ping asks the cluster for its root document (GET /), for readiness: it
// fails with ErrUnavailable or ErrTimeout when Elasticsearch cannot be
// reached, answers with an error or is not Elasticsearch.
func (s *Store) Ping(ctx context.Context) error {
	_, err := s.info(ctx, "ping")
	return err
}

// info asks the cluster for its root document and remembers the
// server's major version from it.
func (s *Store) info(ctx context.Context, op string) ([]byte, error) {
	tctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req := esapi.InfoRequest{}
	res, err := req.Do(tctx, s.client)
	if err != nil {
		return nil, transportError(ctx, tctx, op, "", err)
	}
	defer res.Body.Close()
	data, _ := readBounded(res.Body, maxErrorResponse)
	if res.IsError() {
		e := parseError(data)
		return nil, &Error{Op: op, Status: res.StatusCode, Type: e.typ, Reason: e.text(), Kind: sources.ErrUnavailable}
	}
	var root struct {
		Version struct{ Number string } `json:"version"`
	}
	if json.Unmarshal(data, &root) == nil {
		if major, _, ok := sources.MajorMinor(root.Version.Number); ok && major > 0 {
			s.major.Store(int32(major))
		}
	}
	return data, nil
}

var errTooLarge = errors.New("response too large")

// readBounded reads at most limit bytes of r.
func readBounded(r io.Reader, limit int64) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return data[:limit], errTooLarge
	}
	return data, nil
}

// validIndex refuses names that would change the request path: a
// collection comes from the resource table or enrichment, never from a
// client, so this only guards against programming errors.
func validIndex(name string) bool {
	return name != "" && !strings.ContainsAny(name, "/\\?#*,:\" <>|") && !strings.HasPrefix(name, "_")
}
