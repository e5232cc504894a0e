// Package elastic is the Elasticsearch adapter: lists of the search
// resources (items, contacts, events, planning, assignments) and the
// enrichment lookups marked Search, read from Superdesk's indexes
// <ELASTICSEARCH_INDEX>_<collection> (superdesk_archive, ...). Import it
// as essrc. Details never come here: they read the document database.
//
// # Wiring
//
//	client, err := elasticsearch.NewClient(essrc.Config(cfg.ElasticURL, cfg.BackendTimeout))
//	store := essrc.New(client, essrc.Options{Index: cfg.ElasticIndex, Timeout: cfg.BackendTimeout,
//		Queries: metrics.SourceQueries(), Logger: logger})
//	platform := sources.Split{Docs: mongoStore, Search: store}
//
// Neither call does I/O: the service starts with Elasticsearch down, its
// lists answer 503 until it is back, and then work without a restart.
// Store.Ping (GET /) is for /readyz; Node (GET /, described even when the
// product check refuses it) and Count (a search of no documents, which
// tells a missing index from an empty one) are for `prodapi check`.
//
// # Elasticsearch 8.x, 7.17 and 7.10
//
// The v8 client (go-elasticsearch v8.19) works against all three, with
// the settings Config returns:
//
//   - Product check. The v8 client accepts the first successful response
//     only if it carries the header X-Elastic-Product: Elasticsearch; it
//     makes no separate request for it. Elasticsearch sends that header
//     since 7.14, so 7.17 and 8.x pass. 7.10 (what Superdesk's
//     docker-compose runs) does not: for an answer without the header,
//     an interceptor Config installs asks that node for GET / once per
//     client and accepts it the way the 7.x client did (tagline "You
//     Know, for Search", version 7.0 to 7.13, build flavor default or
//     oss), adding the header for the client. Anything else at the URL
//     (OpenSearch, a 7.14+ node without the header, a proxy's error
//     page) still fails the check: ErrUnavailable.
//   - Media types. By default the client sends Content-Type:
//     application/json and no Accept header, which both versions read as
//     "this server's own API version". In compatibility mode it sends
//     application/vnd.elasticsearch+json;compatible-with=8 instead; 8.x
//     accepts that (it accepts compatible-with 7 or 8), 7.17 refuses it
//     with 400 media_type_header_exception. The client turns that mode on
//     by itself when ELASTIC_CLIENT_APIVERSIONING=true is in the
//     environment, so Config installs an interceptor that puts plain
//     application/json back whatever that variable says. If a refusal
//     happens anyway (a proxy adding headers), it is reported as
//     ErrUnavailable, not as the client's 400.
//   - Bodies. Everything we send is in both versions' grammar (typeless
//     _search, track_total_hits, hits.total as {"value","relation"});
//     7.17's hits also carry "_type": "_doc", which we ignore. A bare
//     number for hits.total (rest_total_hits_as_int, Elasticsearch 6) is
//     read too.
//
// So running against 7.10 or 7.17 needs nothing but ELASTICSEARCH_URL.
// The fake in estest answers in each version's formats (and as
// OpenSearch, which must be refused) and refuses versioned media types as
// each real server does; the tests run in all three modes, and against a
// real 7.10.2 node (test/realserver) where Java and Maven are installed.
//
// # Requests
//
// Find POSTs q.Search, the complete validated body (it already has size,
// from, sort and track_total_hits: 10000), to /<index>/_search, byte for
// byte as codec.AppendJSON encodes it, with no query parameters. Lookup
// sends
//
//	{"query": {"bool": {"filter": [{"terms": {F: ["v1", ...]}}]}},
//	 "sort": [{S: {"order": "asc"}}], "size": Limit, "track_total_hits": false}
//
// with values as strings (ObjectIDs as hex, as Superdesk indexes them),
// duplicates dropped, no sort key when Sort is empty, and size 10000 (the
// result window) when Limit is 0; a lookup with no usable values makes no
// request. Each Find or Lookup counts one query in
// prodapi_source_queries_total{backend="elastic", resource, op="search"},
// retries included, and a failed one counts in
// prodapi_source_errors_total{backend="elastic", resource, kind} (see
// sources.FailureKind), which exists at 0 for every search resource.
//
// A page of a cursor walk (q.Cursor, sources.WalkBody) is q.Search with
// a tiebreaker unique to each document appended to its sort, size one
// more than the page's (to know whether another page follows) and, past
// the first page, search_after the last hit's sort values. Only the
// first page counts (its track_total_hits, 10000): the position carries
// its total (sources.Position.Total), and every later page sends
// track_total_hits false and reports that total. Past the first page,
// the query becomes {"bool": {"must": [query], "filter": [range]}}, a
// range on the primary sort key from the position's value (gte
// ascending, lte descending, with format epoch_millis on dates), so that
// the node collects only what follows the position rather than every
// match: on a field IndexMappings maps as a date or a keyword (_updated,
// versioncreated, guid, type, last_name.keyword...), with a sort value of
// that kind (not null, nor the extreme number a missing date sorts as),
// without aggregations, a nested sort, a mode of avg, sum or median, or
// a missing value other than _first and _last. A range leaves out the
// documents without the field; they sort after all the others (unless
// missing: _first, when they come first and the range never needs
// them), so when a bounded page comes back short, a second search asks
// for those documents after the position (must_not exists) and ends the
// walk with them. The
// tiebreaker is the resource's Tiebreaker (guid: items, planning,
// events); otherwise _id on 7.x, and on 8.x, which refuses to sort on
// _id, _shard_doc in a point in time: the first page opens one
// (POST /<index>/_pit?keep_alive=..., op "pit"), each page searches it at
// POST /_search with "pit": {"id", "keep_alive"}, renewing it for
// Options.PITKeepAlive (an hour by default), and the position carries the
// newest id and when it lapses, so the server refuses a cursor past that
// before asking. The major version comes from GET / (Ping, or a walk's
// first need), once. Points in time are never closed: a cached page may
// still hand out a next link into one; each lapses on its own.
// On 7.x no point in time is opened: with 7.10's (x-pack, basic license;
// the OSS distribution has none), a walk of 100,000 full-size items cost
// the node the same CPU per page as without (38-40 ms a page of 500 on
// the test node, either way), a walk whose order is total needs none for
// its guarantee, and each would pin segments the node merges away.
//
// Every request runs under Options.Timeout (default 5s). The transport's
// dial, TLS and response-header timeouts fit inside it, connections per
// node are capped at 64 (a bulkhead: a slow cluster queues requests
// rather than exhausting sockets), request bodies are gzipped and
// responses asked for uncompressed (a walk's page is megabytes of JSON:
// deflating and inflating it cost more CPU than the bytes cost a
// datacenter link). The client retries once at most: on 502,
// 503 and 504, and after a connection failure (to the next node when
// there are several), never after a timeout or a cancellation. Bodies are
// read with a bound (128 MiB for a search answer, 1 MiB for an error).
//
// # Responses
//
// Hits map to documents as eve-elastic mapped them: the _source in its
// own field order, then the hit's _id when the source has none
// (appended, as Python's setdefault does: Elasticsearch 7+ keeps _id out
// of sources, so list documents end with _id while details start with
// it, as in the original), without _resource, the marker eve-elastic
// stores. _updated and _created become datetimes (eve-elastic parsed those
// two); other fields stay as stored, and Superdesk stores dates in the
// API's own format, so they render the same. Total is hits.total.value
// (or the bare number), saturating at sources.MaxTotal; without a total
// (track_total_hits false) it is from + the hits seen. Aggregations are
// the raw "aggregations" object.
//
// # Errors
//
// Every failure is an *Error wrapping the sentinel the server answers by
// (errors.Is works), or the caller's context error:
//
//	404 index_not_found_exception          empty result (see below)
//	400 "No mapping found for [f] in order to sort on"   empty result, as eve-elastic did
//	search_context_missing_exception (a lapsed point in time)  ErrCursor
//	400 naming only errors of the query (parsing_exception, x_content_parse_exception,
//	  json_parse_exception, query_shard_exception, parse_exception,
//	  number_format_exception, illegal_argument_exception,
//	  action_request_validation_exception)  ErrInvalid
//	413                                     ErrInvalid
//	408, 504, a deadline (ours or the caller's), a net timeout   ErrTimeout
//	429, 5xx, 401/403 (our credentials), other statuses, any other 400
//	  (index_closed_exception, task_cancelled_exception, media_type_header_exception,
//	  a proxy's page, an error type not listed), connection refused, DNS,
//	  reset, TLS, failed product check, malformed 200   ErrUnavailable
//	200 with "timed_out": true or _shards.failed > 0                 ErrPartial
//	a 200 answer larger than 128 MiB                                 ErrInvalid
//	the caller cancelled                                             context.Canceled
//
// What counts as the query's fault is an allow-list (errors.go): the error
// types are the ones the top of the answer, its root causes and its shard
// failures name (search_phase_execution_exception only wraps the shards'),
// and a 400 is a refusal only when every one of them is listed. A node
// going away or overloaded fails in more ways than anyone lists, and none
// of them may tell the client that its query is wrong (a 400, which the
// cache never answers with a stale entry).
//
// A missing index reads as empty rather than failing: a fresh newsroom has
// no index until Superdesk first writes to it, and "no items" is the true
// answer. A wrong ELASTICSEARCH_INDEX would look the same, so the first
// miss of each index is logged at Warn (once per index per Store; those
// are the only log lines the package writes, with the warning for a
// lookup that fills the 10000-document window).
//
// Partial results are never returned as a result, so they are never
// served or cached as complete; the server answers 503 and the cache may
// serve stale.
//
// No Elasticsearch text reaches a client. The server writes a message of
// its own chosen by the sentinel and hands the error to the access log.
// An Error's message is written for that log: the operation, the index,
// the status, Elasticsearch's error type and reason (root causes and shard
// failures, whitespace-collapsed and cut at 512 bytes), then the
// sentinel. Its fields (Status, Type, Reason, Kind) are there for callers
// that inspect it with errors.As.
//
// # Mappings
//
// IndexMappings returns create-index bodies close to Superdesk's for the
// fields the API queries (keyword ids and codes, text with keyword
// sub-fields, dates, nested planning coverages), for the compose seed job.
package elastic
