// Package query turns a request's query string into a validated
// sources.Query, deciding every 400 and 414 before any cache or backend
// call. The server calls Parse once per request; nothing downstream sees
// a client's parameters unchecked.
//
// # Reading the query string
//
// The raw query is parsed once, with net/url's rules, strictly: a bad
// %-escape or a raw ";" is a 400 (a ";" would split parameters
// differently in other parsers). A request target over MaxTarget (16 KiB)
// or any single value over it is a 414. Of a repeated parameter the first
// value counts (Eve's request.args.get). Parameters this package does not
// know are ignored: not validated, not keyed, not echoed in links. Names
// are case-sensitive (Where is not where). An empty value is the same as
// no parameter, except for pretty. Values of known parameters must be
// valid UTF-8.
//
// # Parameters
//
//	page          Eve's abs(int(page)) or 1: garbage and 0 give 1, -2 gives 2.
//	max_results   int(float(x)); 0, negatives, garbage, nan and ±inf give 25;
//	              above 500 gives 500. Never an error.
//	where         document lists: a MongoDB filter (below). Search lists:
//	              {"field": scalar, ...}, each a term filter. Either way
//	              JSON first, then Eve's Python syntax (below).
//	sort          [("f", 1), ("g", -1)], [["f", 1]], or -f,g; at most 32 keys,
//	              directions 1 or -1. Default: the resource's default sort.
//	projection    {"f": 1, ...} or {"f": 0, ...} (0, 1, true, false only);
//	              anything but an object (an array too) is a 400. Any 1
//	              makes it inclusive (0s then ignored). projections
//	              (eve-elastic's list, ["f", ...]) is its alias on search
//	              lists when projection is absent. The answer applies it
//	              inside the resource's own projection (Query.Project).
//	source        search lists: an Elasticsearch body (below).
//	filter        search lists: one query, added to query.bool.filter.
//	q, df, default_operator
//	              search lists: q becomes a lenient query_string (default
//	              field df, operator AND or OR, default OR); a q wrapped in
//	              double quotes with df becomes match_phrase on df.
//	cursor        lists: pages by cursor instead of page (below); empty
//	              starts a walk. Details ignore it.
//	embedded      must be a JSON object (else "Unable to parse `embedded`
//	              clause"); otherwise ignored.
//	pretty        present: indented output.
//	aggregations, version, show_deleted, es_highlight: ignored.
//
// Every list paged by page must stay within the 10000 results
// Elasticsearch pages through: page × max_results above 10000 is a 400,
// and so is a search whose from + size (source may set either) is. A
// cursor walk has no such wall. Details read projection,
// pretty and the parameters their links echo (page, max_results, where,
// sort), validated the same way, and build nothing for the backend.
//
// JSON parameters are decoded strictly (codec.DecodeJSON with Strict):
// duplicate keys, trailing data, invalid UTF-8, NaN and numbers out of
// range are 400, and so is nesting deeper than 32.
//
// # where on document lists
//
// The operators are the table in sources/grammar (grammar.MongoOps: each
// with its place and the kind of argument it takes), which the MongoDB
// adapter and the sandbox are tested against. A filter is: $and, $or,
// $nor at the top of a filter (non-empty arrays of filters); per field,
// a value to equal or a document of operators ($eq $ne $gt $gte $lt $lte
// $in $nin $all $exists $type $size $mod $not $elemMatch, the $bits
// operators and the geo operators), each argument's shape checked.
// $where, $regex, $expr, $function, $accumulator, $text, $options,
// $search, $language, $caseSensitive and $diacriticSensitive are refused
// by name ("operator "$where" is not allowed"); any other $ key is an
// "unknown operator". Operators inside values to compare, a document that
// mixes operators and fields, and field paths that are empty, have empty
// segments, a segment starting with $, a NUL, or more than 256 bytes are
// 400. Values are left as typed: 24-hex strings and dates are not
// converted here (backends match both forms).
//
// # Python-syntax where
//
// A where that is not JSON is read as Eve's eve/io/mongo/parser.py read
// it (pywhere.go has the grammar): comparisons field op value (== != <
// <= > >=; the field a dotted name or a string), joined with and / or,
// grouped with parentheses; values are strings (u and r prefixes),
// numbers, True, False, None, lists, bare names (their text, as in Eve),
// ObjectId("<24 hex>") and datetime(y, m, d[, H[, M[, S]]]). It becomes
// the JSON filter it spells: a == 1 is {"a": 1}, a != 1 {"a": {"$ne":
// 1}}, a chain of and (or) one {"$and": [...]} ({"$or"}), ObjectId its
// hex string, datetime its 2006-01-02T15:04:05+0000 text. That filter
// then goes through JSON text and the JSON path, so limits, checks,
// hidden fields and the canonical key are the JSON form's. not, in, is,
// chained comparisons, arithmetic, other calls, several statements and
// a leading indent are 400s. When neither form parses, the error is the
// JSON one if the value starts with { or [ (after white space), else the
// Python one.
//
// # source, filter and q on search lists
//
// The body is rewritten as eve-elastic did (its fix_query) and then held
// to the long forms of sources/grammar's query types: every key of source.query
// other than bool becomes a clause of bool.must (where the original
// dropped a bool that had siblings, we keep it and merge); filtered
// becomes bool filter + must, and must, or should with
// minimum_should_match 1, not must_not, a nested query's {"query": X}
// wrapper bool.must; a nested filter becomes query.bool.filter (it stays a
// filter in a sort's nested); the top-level filter moves into
// query.bool.filter; the key _type becomes _resource; query_string gets
// lenient: true unless set. Short forms are expanded: term and prefix
// {f: v} to {f: {value: v}}, match and match_phrase to {f: {query: v}},
// range's from/to/include_lower/include_upper to gt/gte/lt/lte, bool
// clauses to arrays, wildcard's "wildcard" to "value", sorts to
// [{f: {"order": ...}}], _source to {includes, excludes} or false,
// aggregations to aggs, terms aggregation size filled in (10).
// Output objects are built in a fixed key order, so equivalent requests
// give identical bodies.
//
// Allowed top-level keys: query, sort, size, from, aggs/aggregations,
// post_filter, _source, track_total_hits (and the legacy filter). size
// clamps at 500; from must be a non-negative integer; track_total_hits is
// accepted and always sent as 10000. Refused anywhere with a message
// naming them, because they run scripts, read stored or computed fields,
// return data that bypasses excluded-field removal, or reach other
// indices: script, script_score, function_score, runtime_mappings,
// script_fields, stored_fields, docvalue_fields, highlight, inner_hits,
// suggest, collapse, rescore, percolate, more_like_this, wrapper, _script
// sorts and terms lookups. The query types are grammar.QueryTypes; any
// other query type, option or key is
// "unsupported"; aggregations are terms only (with sub-aggregations,
// sizes 1-500 and at most 10000 buckets in all). Queries nest at most 24
// deep. When clauses are added to a bool of only should clauses,
// minimum_should_match 1 is made explicit so the should clauses keep
// their meaning (the original silently widened such queries).
//
// # Hidden fields
//
// No field a resource excludes from output (sources.Resource.Hidden:
// users' password and preferences, items' lock fields, ...), nor any
// path below one, may be filtered, sorted, aggregated or projected on, at
// any depth, however spelt: an all-digit segment may be an array index
// and is also read as skipped (update.0._etag is update._etag), and
// names compare case-free. One function, hiddenField, decides for every
// parameter: where paths
// (joined through $elemMatch and into values compared as documents), sort
// keys (URL and body, nested paths too), projections of either kind,
// _source patterns, aggregation fields, the fields of every query, df,
// and field references inside q, query_string and simple_query_string
// text ("field:value", escaped names, _exists_:field; quoted phrases,
// /regular expressions/ and ranges are lexed as Lucene lexes them, so no
// reference hides behind them). A wildcard pattern (lock_*, *.name) is
// refused when it could match a hidden field, a document holding one, or
// anything inside one; as in Elasticsearch, * also matches dots.
// Unqualified text (q without df, a query_string without fields) searches
// Elasticsearch's default fields, as it always did.
//
// # Cursors
//
// A list with a cursor parameter is a walk: Query.Cursor is set, Page is
// 1 and the backend pages by position (keyset), so a walk has no 10000
// wall and is not shifted by writes between its pages. cursor= (empty)
// starts one; each page's next link carries the cursor of the next.
// Cursors.Parse opens them and gives the query the Seal that makes the
// next one; Parse, without Cursors, refuses the parameter.
//
// A cursor is the URL-safe base64 of a version byte, a random salt and
// an AES-256-GCM box (cursor.go) sealed under a key derived from the
// server's secret and the salt with HKDF-SHA256; it holds the expiry
// (CursorLifetime, 24 hours, or sooner when the backend's position lapses
// sooner: an Elasticsearch point in time), a hash of the resource and
// the canonical parameters but cursor and pretty (the binding), and the
// backend's Position. Refused, as a 400 naming cursor, before any cache or
// backend call: a cursor that does not open (damaged, made up, sealed
// under another secret, over 4 KiB), an expired one, one bound to other
// parameters, cursor with page, and on search lists cursor with source's
// from or a _score or _doc sort (scores and _doc order move as the index
// changes). The parameters of a walk must leave room in a link for the
// next cursor (4 KiB) or the request is a 414; a position too long to
// seal is a 400 for the page.
//
// # Canonical parameters
//
// Query.Params holds the keyed parameters (everything but page and
// max_results) in link order: where, sort, then the rest by name. Cache
// keys and _links hrefs are built from them, so equivalent requests must
// produce identical Params and a canonical value must parse back to the
// same Query. Values:
//
//	where         document lists: the validated filter with filter and
//	              operator keys sorted and values in their order (MongoDB
//	              compares embedded documents in order, so sorting them
//	              would merge different queries); search lists: the
//	              field/value object, sorted.
//	sort          [["f",1],["g",-1]]; elided when it is the default.
//	projection    {"f":1,...} or {"f":0,...}, sorted (projections folds in).
//	source        the rewritten, normalised, clamped body, keys sorted,
//	              without track_total_hits; elided when empty.
//	filter        the normalised query, keys sorted.
//	q, df         as given (df only with q).
//	default_operator  AND (OR is the default and elided; only with q).
//	pretty        "".
//	cursor        as given ("" on a walk's first page).
//
// Long forms are longer than short ones: a request whose canonical
// parameters would no longer fit in a followable link is a 414.
package query
