package sandbox

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"time"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/bsonorder"
	"github.com/prodapi/prodapi/sources/codec"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// sample is the bundled newsroom (PRODAPI_SANDBOX=sample).
//
//go:embed sample
var sample embed.FS

// Options configure a Store.
type Options struct {
	// Latency delays every query (PRODAPI_SANDBOX_LATENCY), honouring the
	// context, to make the sandbox behave like a remote backend.
	Latency time.Duration
	// Queries counts queries (prodapi_source_queries_total) and their
	// failures (prodapi_source_errors_total) with backend label
	// "sandbox"; nil counts nothing.
	Queries *metrics.Queries
	// Now anchors ES date math ("now-1d"); nil means time.Now.
	Now func() time.Time
	// Tracer, when set, gets a span per query under the caller's span;
	// nil: none.
	Tracer trace.TracerProvider
}

// A Store is a newsroom held in memory: it answers every sources.Store
// method and sources.AssetStore as MongoDB and Elasticsearch would. Its
// documents never change after loading; it is safe for concurrent use.
type Store struct {
	opts  Options
	colls map[string][]*sources.Doc
	ids   map[string]map[idKey]*sources.Doc
	// search evaluates search bodies; its analyzer caches the analysis of
	// the stored strings for the Store's lifetime.
	an     *analyzer
	assets *assetSet
	tracer trace.Tracer // nil: no spans
}

// idKey identifies an _id: ObjectIDs and strings are different ids.
type idKey struct {
	oid   sources.ObjectID
	str   string
	isOID bool
}

var (
	_ sources.Store      = (*Store)(nil)
	_ sources.AssetStore = (*Store)(nil)
)

// Open opens the sandbox PRODAPI_SANDBOX names: "sample" for the bundled
// newsroom, otherwise a directory of <collection>.json files (and an
// assets/ folder).
func Open(spec string, opts Options) (*Store, error) {
	if spec == "sample" {
		return Sample(opts)
	}
	info, err := os.Stat(spec)
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("sandbox: %s is not a directory", spec)
	}
	return Load(os.DirFS(spec), opts)
}

// Sample opens the bundled sample newsroom.
func Sample(opts Options) (*Store, error) {
	return Load(SampleFS(), opts)
}

// SampleFS is the bundled sample newsroom as files: <collection>.json
// and assets/. Seeding a real stack with the same documents starts here.
func SampleFS() fs.FS {
	sub, err := fs.Sub(sample, "sample")
	if err != nil {
		panic("sandbox: the embedded sample has no sample directory: " + err.Error()) // a build defect
	}
	return sub
}

// Load reads every <collection>.json of sources.Collections at the root
// of fsys (a JSON array of documents in MongoDB Extended JSON, as
// mongoexport --jsonArray writes them) and the files under assets/.
// A missing file is an empty collection; other files are ignored.
func Load(fsys fs.FS, opts Options) (*Store, error) {
	s := &Store{
		opts:  opts,
		colls: map[string][]*sources.Doc{},
		ids:   map[string]map[idKey]*sources.Doc{},
		an:    newAnalyzer(),
	}
	if opts.Tracer != nil {
		s.tracer = opts.Tracer.Tracer("github.com/prodapi/prodapi/sources/sandbox")
	}
	var newest time.Time
	for _, c := range sources.Collections {
		docs, err := loadCollection(fsys, c+".json")
		if err != nil {
			return nil, err
		}
		ids := make(map[idKey]*sources.Doc, len(docs))
		for i, d := range docs {
			id, _ := d.Get("_id")
			k, ok := keyOf(id)
			if !ok {
				return nil, fmt.Errorf("sandbox: %s.json: document %d: _id must be a string or an ObjectID, not %s", c, i, describe(id))
			}
			if _, dup := ids[k]; dup {
				return nil, fmt.Errorf("sandbox: %s.json: document %d: duplicate _id %s", c, i, describe(id))
			}
			ids[k] = d
			if t, ok := d.Get("_updated"); ok {
				if t, ok := t.(time.Time); ok && t.After(newest) {
					newest = t
				}
			}
		}
		s.colls[c] = docs
		s.ids[c] = ids
	}
	if newest.IsZero() {
		newest = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	assets, err := loadAssets(fsys, newest)
	if err != nil {
		return nil, err
	}
	s.assets = assets
	for _, r := range sources.Resources() {
		opts.Queries.Declare(backend, r.Name)
	}
	opts.Queries.Declare(backend, "assets")
	return s, nil
}

// backend is this adapter's value of the backend label of the source
// metrics.
const backend = "sandbox"

func keyOf(id any) (idKey, bool) {
	switch id := id.(type) {
	case sources.ObjectID:
		return idKey{oid: id, isOID: true}, true
	case string:
		return idKey{str: id}, true
	}
	return idKey{}, false
}

func loadCollection(fsys fs.FS, name string) ([]*sources.Doc, error) {
	data, err := fs.ReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	v, err := codec.DecodeJSON(data, codec.DecodeOptions{Extended: true})
	if err != nil {
		return nil, fmt.Errorf("sandbox: %s: %w", name, err)
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("sandbox: %s: want a JSON array of documents", name)
	}
	docs := make([]*sources.Doc, len(list))
	for i, e := range list {
		d, ok := e.(*sources.Doc)
		if !ok {
			return nil, fmt.Errorf("sandbox: %s: element %d is not a document", name, i)
		}
		if !d.Has("_id") {
			return nil, fmt.Errorf("sandbox: %s: document %d has no _id", name, i)
		}
		docs[i] = d
	}
	return docs, nil
}

// Counts reports the documents per collection, for the start-up log.
func (s *Store) Counts() map[string]int {
	m := make(map[string]int, len(s.colls))
	for c, docs := range s.colls {
		m[c] = len(docs)
	}
	return m
}

func (s *Store) now() time.Time {
	if s.opts.Now != nil {
		return s.opts.Now()
	}
	return time.Now()
}

// query counts one backend query, starts its span when tracing, and
// waits out the configured latency. The caller calls end with the
// query's error when it is answered: it times the query, counts a
// failure and ends the span.
func (s *Store) query(ctx context.Context, resource, op string) (end func(error), err error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	timed := s.opts.Queries.Start(backend, resource, op)
	var span trace.Span
	if s.tracer != nil && trace.SpanContextFromContext(ctx).IsValid() {
		_, span = s.tracer.Start(ctx, "sandbox "+op+" "+resource, trace.WithSpanKind(trace.SpanKindClient),
			trace.WithAttributes(attribute.String("db.system.name", "sandbox"), attribute.String("db.operation.name", op),
				attribute.String("db.collection.name", resource)))
	}
	end = func(err error) {
		timed(sources.FailureKind(err))
		if span != nil {
			span.End()
		}
	}
	if s.opts.Latency <= 0 {
		return end, nil
	}
	t := time.NewTimer(s.opts.Latency)
	defer t.Stop()
	select {
	case <-t.C:
		return end, nil
	case <-ctx.Done():
		end(ctx.Err())
		return nil, ctx.Err()
	}
}

// byID finds a document by _id; a 24-hex id matches an ObjectID and,
// failing that, the string.
func (s *Store) byID(collection, id string) (*sources.Doc, bool) {
	ids := s.ids[collection]
	if oid, ok := sources.ParseObjectID(id); ok {
		if d, ok := ids[idKey{oid: oid, isOID: true}]; ok {
			return d, true
		}
	}
	d, ok := ids[idKey{str: id}]
	return d, ok
}

// Get reads a document by id.
func (s *Store) Get(ctx context.Context, res *sources.Resource, id string) (_ *sources.Doc, err error) {
	end, err := s.query(ctx, sources.MetricName(res.Collection), "get")
	if err != nil {
		return nil, err
	}
	defer func() { end(err) }()
	d, ok := s.byID(res.Collection, id)
	if !ok {
		return nil, fmt.Errorf("sandbox: %s/%s: %w", res.Name, id, sources.ErrNotFound)
	}
	return d.Clone(), nil
}

// Find answers a list: the search body of a search resource with ES
// semantics, the where filter of the others with MongoDB semantics.
func (s *Store) Find(ctx context.Context, q *sources.Query) (_ *sources.Result, err error) {
	res := q.Resource
	docs := s.colls[res.Collection]
	if res.Search {
		if q.Search == nil {
			return nil, fmt.Errorf("sandbox: search list of %s without a search body: %w", res.Name, sources.ErrInvalid)
		}
		end, qerr := s.query(ctx, sources.MetricName(res.Collection), "search")
		if qerr != nil {
			return nil, qerr
		}
		defer func() { end(err) }() // the result's error, not qerr
		env := &searchEnv{now: s.now(), an: s.an, resource: res.Collection}
		if q.Cursor == nil {
			return env.search(docs, q.Search)
		}
		return env.walk(docs, q)
	}
	done, err := s.query(ctx, sources.MetricName(res.Collection), "find")
	if err != nil {
		return nil, err
	}
	defer func() { done(err) }()
	m, err := eveRules.compileFilter(q.Where, 0)
	if err != nil {
		return nil, err
	}
	var matched []*sources.Doc
	for _, d := range docs {
		if m(d) {
			matched = append(matched, d)
		}
	}
	bsonorder.SortDocs(matched, q.Sort)
	result := &sources.Result{Total: len(matched)}
	start := min(max(q.Skip(), 0), len(matched))
	keys := bsonorder.WalkKeys(q.Sort)
	if q.Cursor != nil && q.Cursor.After != nil {
		after := q.Cursor.After.Values
		if len(after) != len(keys) {
			return nil, fmt.Errorf("sandbox: walk of %s: a position of %d values for %d sort keys: %w", res.Name, len(after), len(keys), sources.ErrCursor)
		}
		start = sort.Search(len(matched), func(i int) bool { return bsonorder.ComparePosition(matched[i], keys, after) > 0 })
	}
	end := len(matched)
	if q.MaxResults > 0 {
		end = min(start+q.MaxResults, end)
	}
	result.Docs = make([]*sources.Doc, 0, end-start)
	for _, d := range matched[start:end] {
		result.Docs = append(result.Docs, d.Clone())
	}
	if q.Cursor != nil && end > start && end < len(matched) {
		result.Next = bsonorder.Position(matched[end-1], keys)
	}
	return result, nil
}

// walk answers a page of a cursor walk of a search list as the
// Elasticsearch adapter asks 7.x for one (sources.WalkBody): ties broken
// by the resource's tiebreaker field, or the document id.
func (env *searchEnv) walk(docs []*sources.Doc, q *sources.Query) (*sources.Result, error) {
	var after []any
	if q.Cursor.After != nil {
		after = q.Cursor.After.Values
	}
	size := sources.WalkSize(q.Search)
	res, values, err := env.searchSorted(docs, sources.WalkBody(q.Search, cmp.Or(q.Resource.Tiebreaker, "_id"), after))
	if err != nil {
		return nil, err
	}
	if len(res.Docs) > size {
		res.Docs = res.Docs[:size]
		if size > 0 {
			res.Next = &sources.Position{Values: values[size-1]}
		}
	}
	return res, nil
}

// Lookup runs an enrichment batch: the documents of l.Collection whose
// l.Field equals one of l.Values. On the document database a 24-hex
// value (string or ObjectID) matches an ObjectID or the hex string; on
// the search index values compare as strings, exactly (Superdesk maps
// the linking fields as keywords).
func (s *Store) Lookup(ctx context.Context, l sources.Lookup) (_ []*sources.Doc, err error) {
	op := "lookup"
	if l.Search {
		op = "search"
	}
	end, err := s.query(ctx, sources.MetricName(l.Collection), op)
	if err != nil {
		return nil, err
	}
	defer func() { end(err) }()
	docs := s.colls[l.Collection]
	if l.Search {
		return s.searchLookup(docs, l)
	}
	values := make([]any, len(l.Values))
	for i, v := range l.Values {
		if id, ok := v.(sources.ObjectID); ok {
			v = id.Hex() // matches the ObjectID or the string, like a hex string
		}
		values[i] = v
	}
	m, err := eveRules.compileFilter(sources.D(l.Field, sources.D("$in", values)), 0)
	if err != nil {
		return nil, err
	}
	var out []*sources.Doc
	for _, d := range docs {
		if m(d) {
			out = append(out, d)
		}
	}
	if len(l.Sort) > 0 {
		bsonorder.SortDocs(out, l.Sort)
	}
	if l.Limit > 0 && len(out) > l.Limit {
		out = out[:l.Limit]
	}
	for i, d := range out {
		out[i] = d.Clone()
	}
	return out, nil
}

func (s *Store) searchLookup(docs []*sources.Doc, l sources.Lookup) ([]*sources.Doc, error) {
	env := &searchEnv{now: s.now(), an: s.an, resource: l.Collection}
	want := map[string]bool{}
	for _, v := range l.Values {
		str, ok := sources.IDString(normalize(v))
		if !ok {
			tv, err := newTermVal(v, env.now)
			if err != nil {
				return nil, err
			}
			str = tv.s
		}
		want[str] = true
	}
	fr, err := newFieldRef(l.Field)
	if err != nil {
		return nil, err
	}
	c := &evalCtx{env: env}
	var hits []hit
	for i, d := range docs {
		ok := c.visit(d, &fr, func(v any, _, _ bool) bool {
			switch v := v.(type) {
			case string:
				return want[v]
			case sources.ObjectID:
				return want[v.Hex()]
			case nil, *sources.Doc:
				return false
			}
			tv, err := newTermVal(v, env.now)
			return err == nil && want[tv.s]
		})
		if ok {
			hits = append(hits, hit{i: i, doc: d, score: 0})
		}
	}
	specs := make([]sortSpec, 0, len(l.Sort))
	for _, k := range l.Sort {
		fr, err := newFieldRef(k.Field)
		if err != nil {
			return nil, err
		}
		specs = append(specs, sortSpec{kind: sortField, f: fr, desc: k.Desc})
	}
	if len(specs) == 0 {
		specs = []sortSpec{{kind: sortDoc}}
	}
	if err := c.sortHits(hits, specs); err != nil {
		return nil, err
	}
	if l.Limit > 0 && len(hits) > l.Limit {
		hits = hits[:l.Limit]
	}
	out := make([]*sources.Doc, len(hits))
	for i, h := range hits {
		out[i] = sourceFilter{}.apply(h.doc)
	}
	return out, nil
}
