// Package mongo is the MongoDB adapter: details of every resource, lists of
// the document-database resources (desks, users, events_files,
// events_history), enrichment lookups and GridFS media, on the official
// driver v2. Import it as mongosrc; the driver's own package is mongo too.
//
//	client, err := mongo.Connect(mongosrc.ClientOptions(cfg.MongoURI, cfg.MongoMaxPool, cfg.BackendTimeout))
//	db := client.Database(mongosrc.DatabaseName(cfg.MongoURI))
//	store := mongosrc.New(db, mongosrc.Options{Timeout: cfg.BackendTimeout, Queries: metrics.SourceQueries(), Logger: log})
//
// A *Store is a sources.Store and a sources.AssetStore; Ping is for
// readiness.
//
// # Availability
//
// New never talks to the server and mongo.Connect does not dial either, so
// the service starts with MongoDB down; the driver's monitor reconnects
// when it comes back. ClientOptions caps server selection and connection
// set-up at 2 s (the driver's default is 30 s), so with MongoDB down a
// request fails with ErrUnavailable in about 2 s and the cache can serve
// stale. Read preference is primaryPreferred:
// the edge serves what Superdesk just wrote, and still reads from a
// secondary while there is no primary. Options in the URI win.
//
// # Timeouts and retries
//
// Every operation (a find, a count, one round trip of a GridFS stream)
// runs under Options.Timeout (5 s by default) through its context, which
// the driver also sends as maxTimeMS so the server gives up too. Reads are
// retryable. Under a deadline the driver retries a retryable failure
// (network errors, a primary stepping down, a server shutting down) until
// the deadline passes, re-selecting the server each time (the monitor
// re-checks at most every 500 ms), so a server that keeps failing costs a
// request its whole timeout and surfaces as ErrUnavailable.
//
// # Errors
//
// Errors leave the package as sentinels of package sources, with messages
// that name the operation and collection only ("mongo: find users:
// sources: backend unavailable"):
//
//	no document                                      ErrNotFound
//	the caller's context done                        its ctx.Err()
//	deadlines, MaxTimeMSExpired and other time codes ErrTimeout
//	the server refused the query: BadValue (a $type
//	alias, an unknown operator), FailedToParse,
//	TypeMismatch, InvalidOptions, NoQueryExecutionPlans
//	($near without a geo index), NotImplemented (an
//	operator FerretDB lacks), a few more, and the
//	server's assertion codes (codeName Location<n>:
//	a bad regular expression or sort order), unless
//	labelled retryable                               ErrInvalid
//	a where the translator cannot rebuild            ErrInvalid (no query sent)
//	anything else: no selectable server, pool
//	exhausted or cleared, network errors, shutdown,
//	step-down, auth, overload and unknown codes      ErrUnavailable
//
// Refusals are an allow-list (errors.go): a server going away fails in
// more ways than anyone lists, and none of them may tell the client that
// its query is wrong (a 400, which the cache never answers with a stale
// entry). One such way: when an operation's connection fails, the driver
// clears the server's pool, and a request that chose the server just
// before finds the pool cleared; the driver reports that as a command
// error with no code.
//
// The driver's text, which can quote the query and the server's address,
// is kept out of Error() and available for logs through the error's
// Detail method and its slog.LogValuer.
//
// # Details
//
// Get reads res.Collection by _id. A 24-hex id (either case) is looked up
// with one query, {_id: {$in: [ObjectId, "<id>"]}}, and an ObjectId _id
// wins over a string one; other ids are strings. The document is returned
// whole: the datasource projection and excluded fields are the shaping
// layer's business.
//
// # Lists
//
// Find rebuilds q.Where operator by operator from the grammar's allow-list
// (where.go): nothing reaches the server unless it was recognised, and
// documents inside values may not hold $-keys. Values follow the Eve rule
// as this service states it: a 24-hex string matches an ObjectId or the
// string, a date string (DateLayout, as Eve read it, or RFC 3339: see
// sources.ParseWhereDate) a date or the string, so equality becomes
// {$in: [converted, original]}, $ne becomes $nin, $in/$nin/$all carry
// both forms; $gt/$gte/$lt/$lte compare with the converted value. Where
// the two forms cannot be written inside $elemMatch's operator form, Eve's
// own rule (the converted value only) applies. Sorts are the query's keys
// then _id, so pages are stable. The total is countDocuments on the same
// filter, except when the page proves it (a first page, or any page that
// holds documents, short of max_results), which saves the second round
// trip on most small lists. $near and $nearSphere, which the count
// aggregation refuses, are counted as the $geoWithin shapes MongoDB's
// manual gives for that.
//
// A cursor walk (q.Cursor) pages by position instead of skip: a page is
// the client's filter ANDed with the documents that sort after the last
// one served, by the query's keys then _id, and asks for one document
// more than it shows, to know whether another page follows, with no
// skip. The position is the last document's MongoDB sort keys
// (bsonorder.Position). walk.go has the filter, which follows MongoDB's
// cross-type sort exactly: an $or of equalities on the first keys and a
// range ($gt or $lt within a type, $type for whole types, null and
// empty arrays) on the next, each branch bounded by an index on the keys
// then _id (ListNeed's), and a $nor in each that only arrays need.
// The walk counts once, on its first page (countDocuments on the
// client's filter, unless that page holds the whole list); the position
// carries that total, and every later page gives it again without
// counting, so a page after the first is one find. Values the documents decode to other
// types (Decimal128, binary, regular expressions, timestamps) are walked
// by what they decode to, which may not be their own order.
//
// Lookup finds l.Field in l.Values (both forms of 24-hex strings and
// ObjectIDs), sorted by l.Sort then _id, at most l.Limit.
//
// # Documents
//
// Documents are decoded from raw BSON in field order (internal/bsondoc):
// ObjectId to sources.ObjectID, datetime to time.Time in UTC, int32 and
// int64 to int64, double to float64, decimal128 to its string, binary to
// base64 (UUID subtypes to the canonical UUID string), regex to
// "/pattern/options", JavaScript to its code, timestamp to a time,
// null/undefined/MinKey/MaxKey to nil. No field is skipped.
//
// # Media
//
// Asset reads the GridFS bucket "fs": the id loses its last extension,
// as Superdesk's GridFS storage did, and a 24-hex rest matches an ObjectId
// _id (or the string). Size, content type (contentType, else
// metadata.contentType), upload date, md5 and filename come from fs.files.
// Today's drivers write no md5; MD5 is then a stable stand-in derived from
// the _id, length and upload date (see Asset). Content streams fs.chunks a
// few chunks per round trip and seeks by reopening the chunk query at the
// chunk holding the offset, so a range costs what it serves; a failure
// mid-stream surfaces from Read (wrapping ErrUnavailable, ErrTimeout or
// ErrCorrupt), never as a short clean read.
//
// # Platform
//
// For `prodapi check`, read commands only: BuildInfo (the server's
// version, and FerretDB's own), ChangeStreams (a change stream on the
// database opened and closed at once) and Indexes (listIndexes). Need is
// a query the adapter sends in index terms (ListNeed, LookupNeed,
// ChunksNeed: equality fields, then the sort with Find's _id tie-break);
// ServedBy tells whether an index serves it and CreateIndex prints the
// mongosh command of the index that would. Tested reports whether the
// adapter is tested against a version (4.4 to 7; the driver refuses
// anything older).
//
// # Changes
//
// Watch follows the database's change stream (a replica set) for the
// fleet's change feed (package cache/feed): ids, operation types and
// cluster times only, each change's Version a hash of its event's resume
// token, so that a watcher resuming after a takeover reports an event
// again with the version it had. A standalone server or FerretDB has no
// change streams (ErrNoChangeStreams); there the feed polls: Poll
// returns the ids, _updated and _etag of the documents of a collection
// written at or after a time, in order of _updated then _id, a bounded
// batch, and Latest the newest _updated, where polling starts. Without an
// index on _updated, each poll reads the whole collection.
//
// # Metrics
//
// Each query sent increments prodapi_source_queries_total once, backend
// "mongo", resource sources.MetricName(collection): op get for Get, find
// and count for Find, lookup for Lookup, poll for Poll and Latest; op asset, resource "assets", for
// the fs.files read of Asset (the chunk reads of its stream are not
// counted). Ping is not counted. A failed query counts in
// prodapi_source_errors_total{backend="mongo", resource, kind} (see
// sources.FailureKind), which exists at 0 for every resource and assets.
//
// # Testing
//
// mongotest is an in-process server speaking the wire protocol, so tests
// run the real driver; see its package comment for what it speaks and the
// faults it injects. The contract suite (sourcestest) runs against it,
// and again against a real MongoDB when PRODAPI_INTEGRATION is set.
package mongo
