// Package sandbox is the embedded backend: a newsroom held in memory that
// answers every sources.Store method, and sources.AssetStore, as MongoDB
// and Elasticsearch would for the validated query grammar. `make run` and
// the tests use it (PRODAPI_SANDBOX=sample, or a directory); the Mongo and
// Elasticsearch adapters' protocol-level fakes use its evaluator
// (MatchLiteral, SearchSorted).
//
// # Data
//
// A newsroom is one <collection>.json per collection of
// sources.Collections (a JSON array of documents in MongoDB Extended JSON,
// as `mongoexport --jsonArray` writes them) and an assets/ folder of media
// files. Every document needs an _id, a string or an ObjectID, unique in
// its collection. Documents are never modified after loading; callers get
// documents of their own. Details and document-database lists read the
// documents as they are. Search hits are what ES would return: ObjectIDs
// become their hex strings (an ES _source has no ObjectIDs), _resource is
// removed and _source filtering applies. Documents without a _resource
// field are treated as holding the name of their collection, as
// Superdesk's indexer stores it.
//
// Assets are read into memory when the newsroom loads (the sandbox is for
// small newsrooms), with their MD5. A media id finds the file of that
// name under assets/ or, failing that, a file with the same name but
// another extension ("<media>.png" finds "<media>.jpg", as GridFS's
// get_by_filename ignored the extension). Files of the embedded sample
// have no modification time: they carry the newest _updated of the
// newsroom.
//
// Lookups on the document database match values with the Eve rule, an
// ObjectID value like its hex string (so it also finds a string-stored
// id, as the Mongo adapter does); lookups on the search index compare
// the values' string forms with whole stored values (Superdesk maps the
// linking fields as keywords), not with tokens.
//
// # MongoDB semantics (Match, and package bsonorder's sort)
//
// Every operator of the where grammar: $and $or $nor, equality, $eq $ne
// $gt $gte $lt $lte $in $nin $all $exists $type $size $mod $not
// $elemMatch $bitsAllClear $bitsAllSet $bitsAnyClear $bitsAnySet, and the
// geo operators. Dotted paths traverse sub-documents and arrays of
// documents (numeric segments index arrays); equality with an array field
// matches an element or the whole array; null matches null and missing
// fields; comparisons only hold within a BSON type bracket (null <
// numbers < strings < documents < arrays < ObjectId < bool < date), and
// sorts follow that order, an array sorting by its smallest element
// ascending and its largest descending, [] before null. Eve's rule for
// strings: a 24-hex string matches an ObjectID or that string, a date
// string (sources.DateLayout or RFC 3339, sources.ParseWhereDate) matches
// an equal date or that string (equality, $in, $nin, $ne, $all); for
// $gt/$gte/$lt/$lte they compare as the ObjectID or date Eve converted
// them to. Integers are BSON int (16) when they fit in
// 32 bits and long (18) otherwise, for $type.
//
// Approximations: geo operators are evaluated on the plane of [lng, lat]
// pairs (legacy pairs, {lng, lat} documents, GeoJSON Points; other GeoJSON
// geometries by their vertices): $box, $center and $polygon are planar,
// $centerSphere and distances of GeoJSON $near/$nearSphere are
// great-circle (radius 6378100 m), $geometry polygons have straight edges
// in degrees (MongoDB uses geodesics). $near and $nearSphere only filter
// by $minDistance/$maxDistance; they do not order by distance. Scalars
// met in the middle of a path are treated as missing.
//
// # Elasticsearch semantics (Search)
//
// Queries: bool (should is required when there is no must or filter;
// minimum_should_match as an integer, a negative integer or a
// percentage), term, terms, match (operator, minimum_should_match,
// zero_terms_query), match_phrase (slop counts in-order gaps only;
// transpositions are not found), match_phrase_prefix, match_bool_prefix,
// multi_match (best_fields, most_fields, phrase, phrase_prefix,
// bool_prefix: any field matches; cross_fields: query tokens may come from
// different fields), match_all, match_none, range (numbers, dates, strings;
// date math now, now-1d, now/d, 2019-01-01||+1M/d; format with java.time
// patterns such as yyyy-MM-dd, epoch_millis, epoch_second; time_zone;
// missing date components and /unit rounding fill up for gt and lte as ES
// does), exists (null, [] and objects without a value are missing), ids,
// prefix, wildcard (* ?, \ escapes), query_string and simple_query_string
// (below), nested (the inner query sees the elements of the array at
// path, with full field paths; fields outside the path have no value
// there, as in ES), constant_score and dis_max.
//
// Text analysis, the mapping-dependent part: the sandbox has no mappings,
// so every string field behaves as a text field with a .keyword
// sub-field, as ES's dynamic mapping makes them. Analysis is: strip HTML
// tags and decode entities for fields named body_html, then split on
// anything that is not a Unicode letter or digit, and lower-case. So:
//
//   - term, terms, prefix and wildcard on a string field match when the
//     value equals the whole stored string (case-sensitive) or one of its
//     tokens (lower-case; "Brett" finds nothing among tokens, "brett"
//     finds "Brett"); with case_insensitive both sides are lower-cased.
//   - On F.keyword or F.raw they match the whole stored string only; so
//     does _id.
//   - match, match_phrase, multi_match and query_string analyse both the
//     query and the stored strings; on F.keyword the query must equal the
//     whole string.
//   - Numbers and booleans compare as such; a numeric or "true"/"false"
//     string query matches them (ES coerces), and a number matches a
//     string field holding its text.
//   - Strings that are full datetimes with a zone (2019-09-10T15:00:00.000Z,
//     2019-09-10T15:00:00+0000) are dates to term, range, sort and terms
//     aggregations, as Superdesk's date mappings make them, unless meant
//     exactly (.keyword). A date term without a time ("2019-09-10")
//     matches the whole day; dates compare at millisecond precision.
//
// Where this differs from Superdesk's real mappings: fields Superdesk maps
// as keyword (state, type, guid, task.desk...) are also tokenised here,
// so a term for one word of a multi-word keyword value matches in the
// sandbox but not in ES; ES's standard tokenizer keeps "in_progress" and
// "5.0" as one token where the sandbox splits them; fields Superdesk maps
// as nested (planning coverages, _planning_schedule) are also searchable
// outside a nested query here; sorting and aggregating on a text field
// work here (by the whole value) where ES refuses them.
//
// query_string (Lucene's classic syntax, lexed by sources/grammar as the
// server's validator lexes it; lenient): terms, "phrases" with ~slop,
// field:value, field:(a b), field:"phrase", field:[a TO b] and {a TO b}
// (with * for open ends), field:>x >= < <=, AND OR NOT && || !, + and -
// modifiers, parentheses, * and ? wildcards (lower-cased for text
// fields), field name wildcards, _exists_:field, \ escapes, ^boost
// (ignored), default_operator, default_field and fields; without them all
// fields (a multi-token word across several fields may take its tokens
// from different fields). Clauses combine by Lucene's addClause rules; a
// purely negative query matches everything else. Not supported: regular
// expressions (/.../ is one literal term), fuzziness (~ on a term is
// ignored), proximity beyond in-order slop. simple_query_string: +
// (AND), | (OR), - (NOT), "phrases", word* prefixes and parentheses, with
// the same clause rules; note that ES reads "a -b" with the OR operator
// as "a OR NOT b" where the sandbox reads "a AND NOT b".
//
// Sort: fields (a .keyword or .raw suffix sorts by the whole string),
// order, missing _last (default), _first or a value, mode (min for asc
// and max for desc by default; avg, sum, median on numbers), nested
// path and filter, _score, _doc and _shard_doc (load order); numbers and
// dates before strings; ties by _id ascending, then load order.
// search_after starts after the hit of those sort values (SearchSorted
// gives each hit's: dates as epoch milliseconds, null for no value). Sorting on a field no document
// has is not an error (ES may say "No mapping found"). from and size
// (default 10) page; Total counts hits after post_filter, saturated at
// sources.MaxTotal. post_filter filters hits but not aggregations.
// _source: false, includes and excludes with * wildcards (_id is always
// kept).
//
// Scores are crude: a matching leaf query scores its boost (match: boost
// times the number of query tokens found), bool sums its must and should
// clauses, dis_max takes the best plus tie_breaker times the rest,
// nested follows score_mode, constant_score and filters score their
// boost; no term statistics. The default sort is _score descending.
//
// Aggregations: terms only (on scalar and array fields; each document
// counts once per distinct term), with size (default 10), order by _count
// or _key (default _count descending, then _key ascending), min_doc_count
// (0 lists the terms of every document of the collection), missing,
// include and exclude (arrays of terms, or a regular expression matched
// against the whole term), and sub-aggregations. Buckets are shaped as ES
// shapes them: {"key", ["key_as_string" for dates and booleans],
// "doc_count", ...sub-aggregations}; doc_count_error_upper_bound is 0 and
// sum_other_doc_count counts the documents of the buckets left out.
//
// The evaluator receives validated input but never panics on any
// document: what it cannot evaluate is an error wrapping
// sources.ErrInvalid.
//
// # Cursor walks
//
// A list with q.Cursor pages by position. Document lists: the documents
// that sort after the position in MongoDB's order (bsonorder.SortDocs:
// the sort's keys, then _id), the position being the last one's keys
// (bsonorder.Position), as the Mongo adapter's filter selects them. Search lists: as the
// Elasticsearch adapter asks 7.x (sources.WalkBody), ties broken by the
// resource's Tiebreaker or _id.
//
// # Memory and time
//
// A Store keeps each document as the JSON text its file holds, in large
// blocks that on Linux are outside the Go heap (the collector neither
// scans nor counts them), with its _id and where a few fields are in the
// text (_updated and the fields of the resources' default sorts and walk
// tiebreakers): some 200 bytes a document beside the text. Loading checks
// the text as the decoder would read it, one file per processor, and
// decodes only those values; a document is decoded when it is read, whole
// or only the top-level fields a query, a sort or a lookup reads.
//
// Lists, walks and searches sorted on fields (not _score, no nested
// filter, no aggregations) page through the collection's order for their
// sort: its documents sorted once with their keys, on the sort's first
// use, and kept (six a collection at most, lookup columns included). A
// page is the documents after the position or the skip that match the
// query, in that order; a query that reads no field (no where, an empty
// bool, match_all) reads no document but the page's, so its pages cost the
// same however large the collection. A query that reads fields reads them
// of every document to count its total (exact on document lists, up to the
// search's track_total_hits), and a query over all fields (query_string
// without fields, multi_match on *), a _score sort and aggregations decode
// every document: those scan. Details and lookups by _id read only their
// documents; lookups by another field test that field of every document,
// from a column of its values the collection keeps once it is asked for.
//
// A Live store's reload reads every file again: a document whose text has
// not changed keeps its text, a collection none of whose documents
// changed is kept whole with its orders, and the rest is new. A reload
// costs the changed documents' text and the new collections' indexes; the
// text of replaced documents is freed with the last document of its block.
//
// Match applies the Eve rule to strings, as client filters need;
// MatchLiteral does not, as MongoDB itself matches what a driver sends
// (the Mongo adapter's fake uses it).
//
// # Queries
//
// Every Store method counts one query in Options.Queries (backend
// "sandbox"; resource sources.MetricName of the collection, "assets" for
// assets; op get, find, search, lookup or asset) and then waits
// Options.Latency, returning the context's error if it ends first. A
// query that fails counts in prodapi_source_errors_total by the kind
// sources.FailureKind names; those series exist at 0 for every resource
// and assets from the start.
package sandbox
