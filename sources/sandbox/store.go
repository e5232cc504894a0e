package sandbox

import (
	"cmp"
	"context"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/bsonorder"

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
	colls map[string]*coll
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
	return load(fsys, opts, nil)
}

// load is Load; prev, when set, is the Store the load replaces, whose
// unchanged documents and collections it keeps (see loadCollection).
func load(fsys fs.FS, opts Options, prev *Store) (*Store, error) {
	s := &Store{
		opts:  opts,
		colls: map[string]*coll{},
		an:    newAnalyzer(),
	}
	if opts.Tracer != nil {
		s.tracer = opts.Tracer.Tracer("github.com/prodapi/prodapi/sources/sandbox")
	}
	files := make([]loaded, len(sources.Collections))
	var wg sync.WaitGroup
	for i, c := range sources.Collections {
		var was *coll
		if prev != nil {
			was = prev.colls[c]
		}
		wg.Go(func() { files[i] = loadCollection(fsys, c+".json", was) })
	}
	wg.Wait()
	var newest time.Time
	for i, c := range sources.Collections {
		if files[i].err != nil {
			return nil, files[i].err
		}
		s.colls[c] = files[i].coll
		if files[i].newest.After(newest) {
			newest = files[i].newest
		}
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

// Counts reports the documents per collection, for the start-up log.
func (s *Store) Counts() map[string]int {
	m := make(map[string]int, len(s.colls))
	for name, c := range s.colls {
		m[name] = c.size()
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

// coll is a collection of sources.Collections; another is empty.
func (s *Store) coll(name string) *coll {
	if c, ok := s.colls[name]; ok {
		return c
	}
	return &coll{}
}

// byID finds a document by _id; a 24-hex id matches an ObjectID and,
// failing that, the string.
func (s *Store) byID(collection, id string) (*sources.Doc, bool, error) {
	c := s.coll(collection)
	i, ok := c.byID(id)
	if !ok {
		return nil, false, nil
	}
	d, err := c.doc(i)
	return d, err == nil, err
}

// Get reads a document by id.
func (s *Store) Get(ctx context.Context, res *sources.Resource, id string) (_ *sources.Doc, err error) {
	end, err := s.query(ctx, sources.MetricName(res.Collection), "get")
	if err != nil {
		return nil, err
	}
	defer func() { end(err) }()
	d, ok, err := s.byID(res.Collection, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("sandbox: %s/%s: %w", res.Name, id, sources.ErrNotFound)
	}
	return d, nil
}

// Find answers a list: the search body of a search resource with ES
// semantics, the where filter of the others with MongoDB semantics.
func (s *Store) Find(ctx context.Context, q *sources.Query) (_ *sources.Result, err error) {
	res := q.Resource
	c := s.coll(res.Collection)
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
			return env.search(c, q.Search)
		}
		return env.walk(c, q)
	}
	done, err := s.query(ctx, sources.MetricName(res.Collection), "find")
	if err != nil {
		return nil, err
	}
	defer func() { done(err) }()
	return findDocs(c, q)
}

// findDocs answers a document list from the collection's order for its
// sort: the matches after the skip or the cursor's position, and how
// many there are in all.
func findDocs(c *coll, q *sources.Query) (*sources.Result, error) {
	m, err := eveRules.compileFilter(q.Where, 0)
	if err != nil {
		return nil, err
	}
	keys := bsonorder.WalkKeys(q.Sort)
	var after []any
	if q.Cursor != nil && q.Cursor.After != nil {
		if after = q.Cursor.After.Values; len(after) != len(keys) {
			return nil, fmt.Errorf("sandbox: walk of %s: a position of %d values for %d sort keys: %w", q.Resource.Name, len(after), len(keys), sources.ErrCursor)
		}
	}
	o, err := documentOrder(c, keys)
	if err != nil {
		return nil, err
	}
	k := len(keys)
	start, skip := 0, max(q.Skip(), 0) // a walk skips nothing
	if after != nil {
		start = sort.Search(len(o.pos), func(p int) bool { return bsonorder.ComparePositionKeys(o.keys[p*k:(p+1)*k], keys, after) > 0 })
	}
	var need fieldSet
	need.filter(q.Where)
	if need.none() && !m(sources.NewDoc()) {
		return &sources.Result{Docs: []*sources.Doc{}}, nil // a filter that reads nothing and takes nothing
	}
	always := need.none() // it takes everything
	size := q.MaxResults
	if size <= 0 {
		size = -1
	}
	// Which documents match, in parts at once.
	parts, err := inParts(len(o.pos), 256, func(lo, hi int) ([]bool, error) {
		out := make([]bool, hi-lo)
		for p := lo; p < hi; p++ {
			if always {
				out[p-lo] = true
				continue
			}
			d, err := need.read(c, int(o.pos[p]))
			if err != nil {
				return nil, err
			}
			out[p-lo] = m(d)
		}
		return out, nil
	})
	if err != nil {
		return nil, err
	}
	pg := pager{start: start, skip: skip, size: size}
	for p, ok := range slices.Concat(parts...) {
		if ok {
			pg.add(p)
		}
	}
	docs, err := decodePage(c, pg.page, o.pos, func(d *sources.Doc) *sources.Doc { return d })
	if err != nil {
		return nil, err
	}
	result := &sources.Result{Total: pg.total, Docs: docs}
	if q.Cursor != nil && len(pg.page) > 0 && pg.more {
		last := pg.page[len(pg.page)-1]
		result.Next = bsonorder.KeysPosition(o.keys[last*k : (last+1)*k])
	}
	return result, nil
}

// walk answers a page of a cursor walk of a search list as the
// Elasticsearch adapter asks 7.x for one (sources.WalkBody): ties broken
// by the resource's tiebreaker field, or the document id.
func (env *searchEnv) walk(set docSet, q *sources.Query) (*sources.Result, error) {
	var after []any
	if q.Cursor.After != nil {
		after = q.Cursor.After.Values
	}
	size := sources.WalkSize(q.Search)
	res, values, err := env.searchSorted(set, sources.WalkBody(q.Search, cmp.Or(q.Resource.Tiebreaker, "_id"), after))
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
	c := s.coll(l.Collection)
	if l.Search {
		return s.searchLookup(c, l)
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
	head, _, _ := strings.Cut(l.Field, ".")
	var out []*sources.Doc
	for _, i := range c.candidates(l.Field, l.Values) {
		d, err := c.linking(fieldSet{names: []string{head}}, i)
		if err != nil {
			return nil, err
		}
		if !m(d) {
			continue
		}
		if d, err = c.doc(i); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	if len(l.Sort) > 0 {
		bsonorder.SortDocs(out, l.Sort)
	}
	if l.Limit > 0 && len(out) > l.Limit {
		out = out[:l.Limit]
	}
	return out, nil
}

// linking reads what a lookup reads of document i: its _id (or another
// indexed field) from its span, the field it links by from the column of
// that field the collection keeps, since enrichment looks up the same
// few fields over and over, and other fields (lookups name none) from
// the text.
func (c *coll) linking(need fieldSet, i int) (*sources.Doc, error) {
	if need.all || len(need.names) != 1 || allIndexed(need.names) {
		return need.read(c, i)
	}
	name := need.names[0]
	col, err := c.orders.get("column "+name, func() (any, error) {
		parts, err := inParts(c.size(), 4096, func(lo, hi int) ([]*sources.Doc, error) {
			out := make([]*sources.Doc, 0, hi-lo)
			for j := lo; j < hi; j++ {
				d, err := need.read(c, j)
				if err != nil {
					return nil, err
				}
				out = append(out, d)
			}
			return out, nil
		})
		return slices.Concat(parts...), err
	})
	if err != nil {
		return nil, err
	}
	return col.([]*sources.Doc)[i], nil
}

// candidates are the documents a lookup on field may match, in load
// order: by _id, those of the values' ids, strings or ObjectIDs, in
// either form (the lookup's matcher decides); otherwise every one.
func (c *coll) candidates(field string, values []any) []int {
	if field != "_id" {
		out := make([]int, c.size())
		for i := range out {
			out[i] = i
		}
		return out
	}
	var out []int
	add := func(k idKey) {
		if i, ok := c.ids[k]; ok && !slices.Contains(out, int(i)) {
			out = append(out, int(i))
		}
	}
	for _, v := range values {
		var str string
		switch v := v.(type) {
		case sources.ObjectID:
			str = v.Hex()
		case string:
			str = v
		default:
			continue // an _id is a string or an ObjectID
		}
		add(idKey{str: str})
		if oid, ok := sources.ParseObjectID(str); ok {
			add(idKey{oid: oid, isOID: true})
		}
	}
	slices.Sort(out)
	return out
}

func (s *Store) searchLookup(c *coll, l sources.Lookup) ([]*sources.Doc, error) {
	env := &searchEnv{now: s.now(), an: s.an, resource: l.Collection}
	want := map[string]bool{}
	var ids []any
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
		ids = append(ids, str)
	}
	fr, err := newFieldRef(l.Field)
	if err != nil {
		return nil, err
	}
	var need fieldSet
	need.ref(fr)
	cx := &evalCtx{env: env}
	var hits []hit
	for _, i := range c.candidates(l.Field, ids) {
		d, err := c.linking(need, i)
		if err != nil {
			return nil, err
		}
		ok := cx.visit(d, &fr, func(v any, _, _ bool) bool {
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
		if !ok {
			continue
		}
		if d, err = c.doc(i); err != nil {
			return nil, err
		}
		hits = append(hits, hit{i: i, doc: d, score: 0})
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
	if err := cx.sortHits(hits, specs); err != nil {
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
