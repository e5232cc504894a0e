package elastic

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// A searchResponse is the part of a search response we use.
type searchResponse struct {
	docs         []*sources.Doc
	sorts        [][]any // each hit's sort values; nil for an unsorted hit
	total        int
	hasTotal     bool
	aggregations *sources.Doc
	pitID        string // the point in time to search next, when one was searched
	missing      bool   // the index does not exist: an empty answer
}

// parseSearch reads a 200 search response: documents from hits.hits in
// order, the total and the aggregations. A response that reports a
// timeout or failed shards is partial and is refused: the documents of
// the shards that answered are not the page the client asked for.
func parseSearch(data []byte) (*searchResponse, error) {
	v, err := codec.DecodeJSON(data, codec.DecodeOptions{})
	if err != nil {
		return nil, fmt.Errorf("malformed search response: %w", err)
	}
	root, ok := v.(*sources.Doc)
	if !ok {
		return nil, fmt.Errorf("malformed search response: not an object")
	}
	if partial := partialReason(root); partial != "" {
		return nil, &partialError{reason: partial}
	}
	hits, _ := root.Doc("hits")
	if hits == nil {
		return nil, fmt.Errorf("malformed search response: no hits")
	}
	r := &searchResponse{}
	r.total, r.hasTotal = totalOf(hits)
	list, _ := hits.Get("hits")
	arr, ok := list.([]any)
	if !ok && list != nil {
		return nil, fmt.Errorf("malformed search response: hits.hits is not an array")
	}
	r.docs = make([]*sources.Doc, 0, len(arr))
	r.sorts = make([][]any, 0, len(arr))
	for _, h := range arr {
		hit, ok := h.(*sources.Doc)
		if !ok || hit == nil {
			return nil, fmt.Errorf("malformed search response: a hit is not an object")
		}
		r.docs = append(r.docs, docOf(hit))
		sort, _ := hit.Get("sort")
		values, _ := sort.([]any)
		r.sorts = append(r.sorts, values)
	}
	r.aggregations, _ = root.Doc("aggregations")
	r.pitID, _ = root.String("pit_id")
	return r, nil
}

// A partialError is a 200 response with partial results.
type partialError struct{ reason string }

func (e *partialError) Error() string { return e.reason }

// partialReason says why a response is partial, or "" when it is whole.
func partialReason(root *sources.Doc) string {
	if to, _ := root.Get("timed_out"); to == true {
		return "timed_out"
	}
	shards, _ := root.Doc("_shards")
	failed, _ := shards.Get("failed")
	if n, ok := failed.(int64); ok && n > 0 {
		reason := fmt.Sprintf("%d of %v shards failed", n, valueOr(shards, "total"))
		if first := firstShardFailure(shards); first != "" {
			reason += ": " + first
		}
		return reason
	}
	return ""
}

func valueOr(d *sources.Doc, key string) any {
	v, ok := d.Get(key)
	if !ok {
		return "?"
	}
	return v
}

func firstShardFailure(shards *sources.Doc) string {
	failures, _ := shards.Get("failures")
	arr, _ := failures.([]any)
	if len(arr) == 0 {
		return ""
	}
	f, _ := arr[0].(*sources.Doc)
	reason, _ := f.Doc("reason")
	t, _ := reason.String("type")
	r, _ := reason.String("reason")
	return strings.TrimPrefix(t+": "+r, ": ")
}

// totalOf reads hits.total: {"value": n, "relation": "eq"|"gte"} since
// Elasticsearch 7, a bare number before (and with rest_total_hits_as_int).
// It saturates at sources.MaxTotal, as track_total_hits=10000 made the
// original's totals.
func totalOf(hits *sources.Doc) (int, bool) {
	v, ok := hits.Get("total")
	if !ok {
		return 0, false
	}
	if d, isDoc := v.(*sources.Doc); isDoc {
		v, ok = d.Get("value")
	}
	var n int64
	switch x := v.(type) {
	case int64:
		n = x
	case float64:
		n = int64(x)
	default:
		return 0, false
	}
	return int(max(0, min(n, sources.MaxTotal))), ok
}

// docOf maps a hit to a document as eve-elastic did: the _source (empty
// when _source was filtered away), then the hit's _id when the source has
// none (appended, as Python's setdefault does; Elasticsearch 7+ refuses
// an _id inside a source, so stored documents never have one), and
// without _resource, the resource marker eve-elastic stores. _updated and
// _created become datetimes, as eve-elastic parsed them; every other field
// stays as stored (Superdesk writes dates in sources.DateLayout, so they
// render the same either way).
func docOf(hit *sources.Doc) *sources.Doc {
	doc, _ := hit.Doc("_source")
	if doc == nil {
		doc = sources.NewDoc()
	}
	if !doc.Has("_id") {
		if id, ok := hit.Get("_id"); ok {
			doc.Set("_id", id)
		}
	}
	doc.Delete("_resource")
	for _, key := range [...]string{"_updated", "_created"} {
		if s, ok := doc.String(key); ok {
			if t, ok := parseTime(s); ok {
				doc.Set(key, t)
			}
		}
	}
	return doc
}

// parseTime reads the date forms Superdesk's documents carry in the index.
func parseTime(s string) (time.Time, bool) {
	if t, ok := sources.ParseDate(s); ok {
		return t, true
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// An esError is the "error" object of an Elasticsearch error response:
//
//	{"error": {"root_cause": [{"type", "reason", ...}], "type", "reason",
//	 "failed_shards": [{"reason": {"type", "reason"}}], "caused_by": {...}},
//	 "status": 400}
//
// Old versions and proxies may send a string or HTML instead; then only
// the status counts.
type esError struct {
	typ, reason string
	causes      []string // "type: reason" of root causes and shard failures
	// kinds are the error types that decide whose fault it is: the top
	// one (but search_phase_execution_exception, a wrapper), the root
	// causes' and the shard failures'.
	kinds     []string
	noMapping bool // a sort on a field the index does not map
	// contextMissing: a search context (a point in time) is no more.
	contextMissing bool
}

// parseError reads an error body, as much as it can.
func parseError(data []byte) esError {
	var e esError
	v, err := codec.DecodeJSON(data, codec.DecodeOptions{MaxDepth: 64})
	if err != nil {
		return e
	}
	root, _ := v.(*sources.Doc)
	errv, _ := root.Get("error")
	switch x := errv.(type) {
	case string:
		e.reason = x
		return e
	case *sources.Doc:
		e.typ, _ = x.String("type")
		e.reason, _ = x.String("reason")
		e.cause(x)
		if e.typ != "search_phase_execution_exception" {
			e.kind(x)
		}
		rc, _ := x.Get("root_cause")
		for _, c := range asDocs(rc) {
			e.cause(c)
			e.kind(c)
		}
		fs, _ := x.Get("failed_shards")
		for _, f := range asDocs(fs) {
			r, _ := f.Doc("reason")
			e.cause(r)
			e.kind(r)
		}
		for c, depth := x, 0; c != nil && depth < 8; depth++ {
			c, _ = c.Doc("caused_by")
			e.cause(c)
		}
	}
	return e
}

// cause records one cause and notices the one error eve-elastic turned
// into an empty result: "No mapping found for [field] in order to sort
// on", which Elasticsearch raises for a sort on an unmapped field.
func (e *esError) cause(d *sources.Doc) {
	if d == nil {
		return
	}
	t, _ := d.String("type")
	r, _ := d.String("reason")
	if strings.HasPrefix(r, "No mapping found for [") && strings.HasSuffix(r, "] in order to sort on") {
		e.noMapping = true
	}
	if t == "search_context_missing_exception" {
		e.contextMissing = true
	}
	if c := strings.TrimPrefix(t+": "+r, ": "); c != "" && len(e.causes) < 4 && !slices.Contains(e.causes, c) {
		e.causes = append(e.causes, c)
	}
}

// kind records the error type of d; a cause without one is recorded as
// "", a type no list knows.
func (e *esError) kind(d *sources.Doc) {
	var t string
	if d != nil {
		t, _ = d.String("type")
	}
	if !slices.Contains(e.kinds, t) {
		e.kinds = append(e.kinds, t)
	}
}

func asDocs(v any) []*sources.Doc {
	arr, _ := v.([]any)
	docs := make([]*sources.Doc, 0, len(arr))
	for _, x := range arr {
		if d, ok := x.(*sources.Doc); ok && d != nil {
			docs = append(docs, d)
		}
	}
	return docs
}

// text is the reason an Error keeps for the log.
func (e esError) text() string {
	parts := []string{}
	if e.reason != "" {
		parts = append(parts, e.reason)
	}
	for _, c := range e.causes {
		if !strings.HasSuffix(c, ": "+e.reason) || e.reason == "" {
			parts = append(parts, c)
		}
	}
	return clip(strings.Join(parts, "; "))
}
