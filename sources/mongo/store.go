package mongo

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/bsonorder"
	"github.com/prodapi/prodapi/sources/mongo/internal/bsondoc"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
)

// Backend is this adapter's value of the backend label of
// prodapi_source_queries_total.
const Backend = "mongo"

// DefaultTimeout bounds each operation when Options.Timeout is zero.
const DefaultTimeout = 5 * time.Second

// selectionTimeout caps server selection and connection set-up, so that an
// unreachable MongoDB fails a request in seconds rather than the driver's
// 30 s.
const selectionTimeout = 2 * time.Second

// Options are the Store's knobs; the zero value works.
type Options struct {
	// Timeout bounds each operation (a find and its count are two); 0
	// means DefaultTimeout. The caller's context may end it sooner.
	Timeout time.Duration
	// Queries counts every query sent (prodapi_source_queries_total)
	// and its failures (prodapi_source_errors_total), with backend
	// "mongo"; nil counts nothing.
	Queries *metrics.Queries
	// Logger receives what is worth knowing but is not an error of the
	// caller's; nil discards.
	Logger *slog.Logger
}

// A Store reads Superdesk's MongoDB database: details of every resource,
// lists of the document-database resources, enrichment lookups, media from
// GridFS. It is safe for concurrent use. It satisfies sources.Store and
// sources.AssetStore.
type Store struct {
	db      *mongodriver.Database
	timeout time.Duration
	queries *metrics.Queries
	log     *slog.Logger
}

var (
	_ sources.Store      = (*Store)(nil)
	_ sources.AssetStore = (*Store)(nil)
)

// New returns a Store over db. It does not talk to the server: the client
// connects lazily and reconnects by itself, so the service starts with
// MongoDB down and recovers when it comes back.
func New(db *mongodriver.Database, opts Options) *Store {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	// Details of every resource and the media are read here.
	for _, r := range sources.Resources() {
		opts.Queries.Declare(Backend, r.Name)
	}
	opts.Queries.Declare(Backend, assetLabel)
	return &Store{db: db, timeout: opts.Timeout, queries: opts.Queries, log: opts.Logger}
}

// ClientOptions returns driver options fit for an edge, for
// mongo.Connect(ClientOptions(...)): server selection and connect timeouts
// of 2 s (or timeout, when shorter) instead of the driver's 30 s, so an
// unreachable database fails fast; maxPool connections at most (0: the
// driver's 100); app name "prodapi" for the server's logs; retryable reads.
//
// Read preference is primaryPreferred: reads go to the primary, so a
// document Superdesk has just written is what the edge serves (and
// caches), and fall back to a secondary only while there is no primary.
// secondaryPreferred would offload the primary but serve replication lag,
// which the cache would then keep for its TTL.
//
// Options in the URI win over these defaults (readPreference, appName,
// maxPoolSize, serverSelectionTimeoutMS, connectTimeoutMS, retryReads).
// Errors in the URI are reported by mongo.Connect.
func ClientOptions(uri string, maxPool uint64, timeout time.Duration) *options.ClientOptions {
	sel := selectionTimeout
	if timeout > 0 && timeout < sel {
		sel = timeout
	}
	o := options.Client().
		SetAppName("prodapi").
		SetServerSelectionTimeout(sel).
		SetConnectTimeout(sel).
		SetRetryReads(true).
		SetReadPreference(readpref.PrimaryPreferred())
	if maxPool > 0 {
		o.SetMaxPoolSize(maxPool)
	}
	return o.ApplyURI(uri)
}

// DatabaseName returns the database named in the URI's path, as the
// original read it from MONGO_URI, or "superdesk" when there is none. It
// does not validate the URI (mongo.Connect does) nor resolve SRV records.
func DatabaseName(uri string) string {
	const fallback = "superdesk"
	_, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return fallback
	}
	rest, _, _ = strings.Cut(rest, "?")
	_, path, ok := strings.Cut(rest, "/")
	if !ok || path == "" {
		return fallback
	}
	name, err := url.PathUnescape(path)
	if err != nil || name == "" {
		return fallback
	}
	return name
}

// Ping checks that a server is selectable and answers, for readiness.
func (s *Store) Ping(ctx context.Context) error {
	octx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.db.Client().Ping(octx, nil); err != nil {
		return wrapErr(ctx, "ping", s.db.Name(), err)
	}
	return nil
}

// Get reads the document of res with _id id. A 24-hex id matches an
// ObjectId _id and, failing that, the string: one query asks for both and
// the ObjectId wins.
func (s *Store) Get(ctx context.Context, res *sources.Resource, id string) (*sources.Doc, error) {
	coll := res.Collection
	var filter *sources.Doc
	if oid, ok := sources.ParseObjectID(id); ok {
		filter = sources.D("_id", sources.D("$in", []any{oid, id}))
	} else {
		filter = sources.D("_id", id)
	}
	docs, err := s.find(ctx, "get", sources.MetricName(coll), coll, filter, options.Find().SetLimit(2).SetBatchSize(2))
	if err != nil {
		return nil, err
	}
	d := preferObjectID(docs)
	if d == nil {
		return nil, &opError{op: "get", coll: coll, kind: sources.ErrNotFound}
	}
	return d, nil
}

// preferObjectID returns the document whose _id is an ObjectID, else the
// first, else nil.
func preferObjectID(docs []*sources.Doc) *sources.Doc {
	for _, d := range docs {
		if id, _ := d.Get("_id"); id != nil {
			if _, ok := id.(sources.ObjectID); ok {
				return d
			}
		}
	}
	if len(docs) > 0 {
		return docs[0]
	}
	return nil
}

// Find answers a list of a document-database resource: q.Where (see
// translateWhere) on q.Resource.Collection, sorted by q.Sort then _id (so
// pages are stable), skipping q.Skip() and returning q.MaxResults at most.
// The total comes from countDocuments, unless the page itself proves it:
// a page short of MaxResults that holds documents, or the first page,
// ends the list. A walk counts on its first page only: its position
// carries that total, and the pages after it give it again without
// counting, so that each is one find.
func (s *Store) Find(ctx context.Context, q *sources.Query) (*sources.Result, error) {
	coll := q.Resource.Collection
	if q.MaxResults <= 0 || q.Page <= 0 {
		return nil, fmt.Errorf("mongo: find %s: page %d, max_results %d", coll, q.Page, q.MaxResults)
	}
	filter, err := translateWhere(q.Where)
	if err != nil {
		return nil, fmt.Errorf("mongo: find %s: %w", coll, err)
	}
	sort, err := sortDoc(q.Sort)
	if err != nil {
		return nil, fmt.Errorf("mongo: find %s: %w", coll, err)
	}
	skip, limit := q.Skip(), q.MaxResults
	find, fetch := filter, limit
	keys := bsonorder.WalkKeys(q.Sort)
	if q.Cursor != nil {
		fetch++ // one more tells whether another page follows
		if q.Cursor.After != nil {
			after, err := walkFilter(keys, q.Cursor.After.Values)
			if err != nil {
				return nil, fmt.Errorf("mongo: find %s: %w", coll, err)
			}
			find = conjoin(filter, after)
		}
	}
	fo := options.Find().SetSort(sort).SetLimit(int64(fetch)).SetBatchSize(int32(fetch))
	if skip > 0 { // never on a walk, whose position is in the filter
		fo.SetSkip(int64(skip))
	}
	label := sources.MetricName(coll)
	docs, err := s.find(ctx, "find", label, coll, find, fo)
	if err != nil {
		return nil, err
	}
	res := &sources.Result{Docs: docs}
	if len(docs) > limit {
		res.Docs = docs[:limit]
		res.Next = bsonorder.Position(res.Docs[limit-1], keys)
	}
	switch {
	case q.Cursor != nil && q.Cursor.After != nil && q.Cursor.After.Total > 0:
		res.Total = q.Cursor.After.Total // counted by the walk's first page
	case pageProvesTotal(q, len(docs), res.Next != nil):
		res.Total = skip + len(res.Docs)
	default:
		if res.Total, err = s.count(ctx, label, coll, countFilter(filter)); err != nil {
			return nil, err
		}
	}
	if res.Next != nil {
		res.Next.Total = res.Total
	}
	return res, nil
}

// pageProvesTotal reports whether a page of n documents is the whole
// list from where it starts: a first page or a page that holds documents,
// short of max_results; a walk's first page without a next. A later page
// of a walk proves nothing of the documents before it.
func pageProvesTotal(q *sources.Query, n int, next bool) bool {
	switch {
	case q.Cursor != nil && q.Cursor.After != nil:
		return false
	case q.Cursor != nil:
		return !next
	}
	return n < q.MaxResults && (n > 0 || q.Skip() == 0)
}

// conjoin ANDs a walk's position with the client's filter.
func conjoin(filter, after *sources.Doc) *sources.Doc {
	if filter.Len() == 0 {
		return after
	}
	return sources.D("$and", []any{filter, after})
}

// Lookup returns the documents of l.Collection whose l.Field is one of
// l.Values (a 24-hex string or an ObjectID matches both forms), in l.Sort
// order then _id, at most l.Limit of them. No values, no query.
func (s *Store) Lookup(ctx context.Context, l sources.Lookup) ([]*sources.Doc, error) {
	if err := checkPath(l.Field); err != nil {
		return nil, fmt.Errorf("mongo: lookup %s: %w", l.Collection, err)
	}
	values := make([]any, 0, len(l.Values))
	for _, v := range l.Values {
		switch v := v.(type) {
		case string:
			if oid, ok := sources.ParseObjectID(v); ok {
				values = append(values, oid)
			}
			values = append(values, v)
		case sources.ObjectID:
			values = append(values, v, v.Hex())
		default:
			lit, err := literal(v, 0)
			if err != nil {
				return nil, fmt.Errorf("mongo: lookup %s: %w", l.Collection, err)
			}
			values = append(values, lit)
		}
	}
	if len(values) == 0 {
		return []*sources.Doc{}, nil
	}
	sort, err := sortDoc(l.Sort)
	if err != nil {
		return nil, fmt.Errorf("mongo: lookup %s: %w", l.Collection, err)
	}
	fo := options.Find().SetSort(sort)
	if l.Limit > 0 {
		fo.SetLimit(int64(l.Limit)).SetBatchSize(int32(min(l.Limit, 1000)))
	}
	filter := sources.D(l.Field, sources.D("$in", values))
	return s.find(ctx, "lookup", sources.MetricName(l.Collection), l.Collection, filter, fo)
}

// sortDoc returns the sort document: the keys in order, then _id
// ascending unless a key names it (stableSort), so equal keys never
// shuffle pages.
func sortDoc(keys []sources.SortKey) (bson.Raw, error) {
	d := sources.NewDoc()
	for _, k := range stableSort(keys) {
		if err := checkPath(k.Field); err != nil {
			return nil, err
		}
		if d.Has(k.Field) {
			continue // the first mention decides, as in MongoDB's own parser
		}
		dir := int64(1)
		if k.Desc {
			dir = -1
		}
		d.Set(k.Field, dir)
	}
	b, err := bsondoc.FromDoc(d)
	return bson.Raw(b), err
}

// find runs one find, counted as op, under the operation timeout, and
// converts the documents.
func (s *Store) find(ctx context.Context, op, label, coll string, filter *sources.Doc, fo *options.FindOptionsBuilder) ([]*sources.Doc, error) {
	docs := []*sources.Doc{}
	err := s.each(ctx, op, label, coll, filter, fo, func(raw bson.Raw) error {
		d, err := bsondoc.ToDoc(raw)
		if err == nil {
			docs = append(docs, d)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return docs, nil
}

// each runs one find, counted as op, under the operation timeout, and
// calls fn with each document; raw is valid only during the call.
func (s *Store) each(ctx context.Context, op, label, coll string, filter *sources.Doc, fo *options.FindOptionsBuilder, fn func(raw bson.Raw) error) (err error) {
	fb, err := bsondoc.FromDoc(filter)
	if err != nil {
		return fmt.Errorf("mongo: %s %s: %w", op, coll, err)
	}
	done := s.queries.Start(Backend, label, op)
	defer func() { done(sources.FailureKind(err)) }()
	octx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cur, err := s.db.Collection(coll).Find(octx, bson.Raw(fb), fo)
	if err != nil {
		return wrapErr(ctx, op, coll, err)
	}
	defer cur.Close(octx)
	for cur.Next(octx) {
		if err := fn(cur.Current); err != nil {
			return fmt.Errorf("mongo: %s %s: %w", op, coll, err)
		}
	}
	if err := cur.Err(); err != nil {
		return wrapErr(ctx, op, coll, err)
	}
	return nil
}

// count runs countDocuments, counted as op "count".
func (s *Store) count(ctx context.Context, label, coll string, filter *sources.Doc) (_ int, err error) {
	fb, err := bsondoc.FromDoc(filter)
	if err != nil {
		return 0, fmt.Errorf("mongo: count %s: %w", coll, err)
	}
	done := s.queries.Start(Backend, label, "count")
	defer func() { done(sources.FailureKind(err)) }()
	octx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	n, err := s.db.Collection(coll).CountDocuments(octx, bson.Raw(fb))
	if err != nil {
		return 0, wrapErr(ctx, "count", coll, err)
	}
	return int(n), nil
}
