// Package cache is prodapi's read-through cache: an in-process tier in
// front of Redis (shared by the replicas), in front of a Loader, with one
// load per key at a time. The cache knows queries and finished
// representations (sources.Representation), never documents or how they
// are rendered: cmd/prodapi hands it the renderer (server/render) as its
// Loader.
//
// A Cache wraps a Loader and is one: the server checks auth and
// scope on every request, hits included, and parses the query before it
// calls Load. The cache never sees a token.
//
// # Shape
//
// A lookup reads as groupcache's does: the in-process tier, then the
// Redis tier, then the key's flight (x/sync/singleflight), whose one
// request calls the Loader. Each part is a type of its own:
//
//	Cache            the lookup, the flights, storing, invalidation (cache.go, flight.go, tags.go)
//	local            the in-process tier: entries by key, bounded in bytes (local.go)
//	redistier.Tier   the Redis tier: reads, the write queue, the breaker,
//	                 generations, pub/sub, leases and tokens (package cache/redistier)
//	background       refreshes of stale entries and second invalidations, which Close stops (background.go)
//
// The Redis tier deals in keys and bytes; this package encodes what it
// stores there (entry.go, tags.go) and decides what a value read back is
// worth (shared.go, gens.go). cmd/prodapi builds the tier once per
// process, hands it to the cache and to the change feed (cache/feed,
// whose lease and resume token it keeps), and closes it after the cache.
//
// One memo only saves work on the hit path: the hit memo (hitmemo.go)
// keeps a local hit's representation for a second. A hit builds its key
// in a buffer on its stack and asks the in-process tier with it in place.
//
// # The change feed and the change log
//
// Two packages below this one import nothing of it, and are the cache's
// all the same:
//
//	cache/feed       the change feeds: the database's, one watcher (or poller) for the fleet;
//	                 a sandbox directory's, on every replica
//	cache/changelog  the log of those changes, which every replica follows and /changes serves
//
// They import nothing of package cache because each declares the little
// it uses, as Go's consumers do: the feed applies changes to an Applier,
// which *Cache is, and keeps its lease and token in a Coordinator, which
// the Redis tier is; the log appends to a Stream, the Redis tier again.
// What makes them the cache's is what they are for and where they keep
// their state. The feed exists to keep entries true: it applies every
// change to the cache before it logs it, the cache tells the other
// replicas, and the feed's mode (Mode) picks the entries' lifetimes: the
// longer feed TTLs while a stream watches, the plain TTLs while a poll
// runs, which sees deletions only once per reconcile. Both keep their state in the cache's
// Redis tier (the lease, the resume token, the mode, the stream: keys of
// cache/redistier's table), which cmd/prodapi builds once and hands to
// the cache, the feed and the log. /changes (server/changes) reads the
// log through an interface of its own. Neither package reaches the server, the enricher
// or a driver, and the feed nothing of the cache (the dependency test).
//
// # Keys
//
// Key is the only function that builds a key:
//
//	prodapi:v1:<resource>:<list|detail>:<canonical request>
//
// The canonical request is the detail id, or the page and page size of a
// list, then "pretty=1" when indented JSON was asked for, then the query's
// Params sorted by name. server/query has already made Params canonical:
// known parameters only, defaults elided, JSON values parsed and
// re-encoded with sorted keys. Equivalent requests therefore share an
// entry, and two resources never do. Values are percent-escaped where they
// could run into each other. A canonical request longer than 128 bytes is
// replaced by "#" and its SHA-256 in hex; the readable prefix stays. Asset
// redirects live under prodapi:v1:assets:redirect:<media id>. The "v1"
// changes whenever the key scheme or the stored format does.
//
// # Tiers
//
// The in-process tier is bounded in bytes (Options.LocalBytes, 64 MiB by
// default) and evicts least recently used entries first (CLOCK, so a hit
// takes no lock: a sync.Map lookup; only puts and evictions take the
// tier's mutex). It serves an entry for LocalTTL (2s by
// default) after taking it from Redis or a load, never past the entry's
// freshness, so replicas converge on what Redis holds within LocalTTL.
// After that it keeps the entry, room allowing, only as a fallback for
// when Redis cannot be asked or the backend fails. Without Redis the tier
// is the cache and serves entries for their whole freshness.
//
// Redis (any go-redis UniversalClient: standalone, Sentinel, Cluster,
// through the Redis tier) holds one value per key: a versioned binary
// header (status, flags, a hash of the key, stored-at, freshness, stale
// window, last modified, total, ETag), the body, and a CRC-32C. A value
// that does not decode, belongs to another key or another format version,
// or is not a string is a miss: it is deleted and counted
// (prodapi_cache_corrupt_values_total), never an error. Every key is
// written with a TTL: freshness plus the stale window.
//
// # Entries
//
// An entry is the finished, enriched response: status, strong ETag (the
// loader's, or one computed from the body), total, last modified, stored
// at, and the body stored once, gzip-compressed (level 5) when it is 1 KiB
// or more and as it is below that, where gzip gains nothing.
// Representations served from an entry carry Gzip for compressed entries
// (and Body too right after a load, when the uncompressed body is at hand)
// or Body for small ones; the server decompresses for clients without
// gzip. A 304 needs only the ETag: the cache never decompresses. Every
// representation carries StoredAt (for Age), an RFC 9211 Cache-Status and
// an Outcome:
//
//	prodapi; hit; ttl=42                                     hit
//	prodapi; hit; ttl=-3                                     stale (served while a refresh runs)
//	prodapi; fwd=stale; fwd-status=503; ttl=-3               stale (the backend failed)
//	prodapi; fwd=miss; fwd-status=200; stored; ttl=60        miss
//	prodapi; fwd=miss; fwd-status=200; collapsed; stored; …  collapsed (another request's load)
//	prodapi; fwd=miss; fwd-status=200                        miss, not storable
//	prodapi; fwd=miss; fwd-status=200; detail="incomplete: planning"
//	                                                         miss, incomplete (below)
//	prodapi; fwd=bypass                                      bypass (the resource's TTL is 0)
//
// ttl is the remaining freshness in seconds, negative once stale. The key
// never appears in it.
//
// # TTLs
//
// Options.TTL gives the freshness per resource, list or detail (10s and
// 60s without it; 0 turns caching off for the resource). Options.Stale is
// the serve-stale window after it. 404s are kept for Options.NotFoundTTL,
// with no stale window; without it they are not kept. Asset redirects are
// kept for the TTL given to Assets, never past the presigned URL's expiry
// less a margin (a tenth of its remaining life, at most 30s).
//
// # Loads and stale serving
//
// A request the in-process tier cannot answer joins the flight of its key
// (x/sync/singleflight): the first request's flight looks in the
// in-process tier again (a flight that just ended may have filled it),
// reads Redis unless its request already did, then loads; the others
// wait for it (outcome collapsed when it
// loaded). The flight runs on a context that keeps the first request's
// values but not its cancellation, bounded by LoadTimeout; each waiter
// still gives up when its own context ends, and the load goes on for the
// others. A panic in a load is an error (logged with its stack), never a
// crash. Background refreshes run the same way, and Close cancels them.
//
// The request that is about to load asks its gate first (the one
// LoadGated was given: the server's is its client's share of the
// fair-share limiter, which charges the load to the client and caps the
// loads each client has in flight; else Options.Gate), with its own
// context: after the tiers and the fleet had nothing, so that a
// hit, a stale answer, a request answered by another's load or a
// background refresh is never charged a load. A refused load fails its
// request with the gate's error (a 429), and the requests that waited
// for it join the key's flight again, one of them asking the gate for
// its own load. Loads of resources whose TTL is 0 ask it too.
//
// An entry past its freshness but within the stale window is served at
// once, and one background refresh per key and process starts
// (stale-while-revalidate). When a load or refresh fails (unavailable,
// timeout, partial results, a panic; not a refused query), the last good
// entry within the window is served (stale-if-error) with fwd=stale and
// the failure's status: the one the server answers it with
// (sources.Classify), 503 unavailable or partial, 504 timed out, 499 a
// cancelled load, 500 anything else; no refresh of that key starts for a second after
// a failure, and its stale responses say fwd=stale for 30s. An error never
// replaces an entry. Only 200 and 404 responses are stored; incomplete
// ones, partial results, every other status and a walk's pages read
// ahead (sources.Representation.Early: read before the fill's fence
// began) are served once and never stored.
//
// Complete or marked: a load whose optional enrichment failed comes back
// incomplete (sources.Representation.Missing names the steps). It is
// treated as a failure with fwd-status=200: a complete entry within its
// stale window, in either tier, answers instead, and a refresh that comes
// back incomplete leaves the stale entry in place. Without one, the
// incomplete response is served, never stored, with a Cache-Status detail
// naming what it lacks (the server adds Cache-Control: no-store), and
// counted in prodapi_partial_responses_total{resource}.
//
// # Invalidation
//
// Every stored entry knows what it was built from. sources.Representation
// names its documents ("resource/id": a detail's own id and the ids its
// _links point to; a list's ids on the page and theirs), and the entry
// carries them as tags, with the key's own:
//
//	all              every entry
//	res:<resource>   every entry of the resource
//	list:<resource>  every list of the resource (lists only)
//	doc:<res>/<id>   every entry including the document
//
// Changed(resource, ids...) (a change feed: the documents were written)
// obsoletes the doc tags and list:<resource>, since a write can move any
// list's membership or order; PurgeDocs, PurgeResource and PurgeAll obsolete
// doc tags, res:<resource> and all. Asset redirects carry no tags.
//
// Redis: each tag has a generation (redistier.Tier's Gens and NewGens,
// under prodapi:v1:gen:<tag>), a random 63-bit number set by every
// invalidation (never a counter, so a key that expired or was evicted
// reads as 0 and cannot come back to a value an old entry recorded), kept
// the tier's GenTTL (24h) after its last invalidation. An entry stores the generation of each of its tags when it was built
// (a "PDT" prefix before the value; at most 1024 tags, beyond which
// the entry is served and not stored). A Redis hit is current only if
// all of its tags still have those generations. A replica remembers the
// generations it reads (at most 16384 tags) while it is subscribed to
// the invalidation channel, whose messages make it forget the tags they
// name, and for no longer than LocalTTL: a Redis hit whose tags it knows
// costs the GET alone. Otherwise it reads them in one more pipelined
// round trip (one GET per tag, so a Cluster can route each); so does a
// hit whose generations differ from what it remembers, before it counts
// as obsolete. An obsolete entry is never served as fresh or while a refresh runs: the
// request loads, and the obsolete entry is the stale-if-error fallback.
// Entries are written for at most GenTTL, so none outlives a generation
// it predates.
//
// In process: the tier indexes its records by tag (the index is charged
// to the records' sizes, so the byte bound holds) and an invalidation
// removes exactly the records carrying one of its tags; "all" empties the
// tier. A hit is one map lookup, as before: no generation check, no
// Redis. Invalidations reach the other replicas through the Redis tier's
// pub/sub channel (prodapi:v1:invalidations; the message is the sender's
// replica id, then its tags, one per line): each replica applies the
// others' messages to its own tier. go-redis reconnects a lost
// subscription; the confirmation that follows a failure empties the tier,
// because messages may have been missed. A silent subscription is pinged
// every 5s so that a cut shows. Until it knows it is unsubscribed, a replica can serve an
// in-process entry, or check a Redis hit against a remembered
// generation, for at most LocalTTL; after that, Redis hits are exact.
//
// Fills are fenced. Before its load a fill reads the generations of the
// key's own tags (all, res:, and doc:<id> or list:<resource>) and notes
// the in-process invalidation sequence; after it, it reads the
// generations of the tags the load revealed. An invalidation that
// arrives (locally or by pub/sub) during the load and touches one of the
// entry's tags keeps the result out of both tiers: it is served to the
// requests that waited and stored nowhere
// (prodapi_cache_fenced_fills_total). One that reaches Redis but not yet
// this replica leaves the key's own tags with generations older than
// Redis's, so the stored entry is obsolete on its first read; for tags
// only the load revealed (linked documents), the window is the pub/sub
// delay. The in-process sequence remembers the last 1024
// invalidations; a fill that spans more is not stored.
//
// Without Redis the same index serves the in-process tier alone.
//
// Apply takes a change feed's events (sources.Change): for each resource
// served from the changed collection, Changed with the documents' ids, or
// PurgeResource for OpFlush; a change to content_types, which shapes
// every item, purges items. The lists of a search resource are
// invalidated once more after Options.SearchLag (2s): Elasticsearch shows
// a write about a second after MongoDB reports it, and a list loaded in
// between would keep the old version until its TTL.
//
// # Reads at least as new as the change log
//
// A query with Freshness (sources.Query.Fresh: a request naming a
// position of the change log, which the server has waited for this
// replica to apply, and so every invalidation up to it) is answered as
// any other but from nothing older than the position: a fresh entry
// that is current (in process, or in Redis with its generations), never
// a stale one (neither while a refresh runs nor as the fallback of a
// failed load: the failure answers), never one stored before
// Freshness.StoredAfter (a search list loaded before the index showed
// the change), and never another request's load begun before its own:
// it joins only the flights of queries with Freshness that came after
// the same in-process invalidations, and takes no fleet lease (one held
// by a load begun before the position would be waited for in vain).
// Freshness is not part of the key: such a load is stored for everyone.
//
// LoadMany answers several details at once in the same terms (the
// documents of a page of /changes, include=doc): the hits from the
// tiers, the misses loaded together through the Loader's LoadMany when
// it is a BatchLoader (the renderer: one lookup by ids per resource),
// each stored under its own key, fenced as a load is.
//
// # One load per fleet
//
// Replicas sharing Redis that miss the same key send one backend load
// between them. Before loading, a flight takes the key's load lease from
// the Redis tier (prodapi:v1:lease:<key>, SET NX PX, half the load
// timeout). The winner loads, writes the value through the key's write
// queue but waits for it (within its request's Redis budget), and
// releases the lease off the request path (a compare-and-delete
// script, so a lease that lapsed and was taken by another is not
// touched). The others poll Redis for the value (5ms, doubling to 50ms)
// and serve it, outcome collapsed, once it is there and current. A lease
// that goes without a value (the load failed or was not storable, or the
// holder died and the lease lapsed) is taken by one waiter, which loads.
// A replica that cannot ask Redis (its request's Redis budget spent
// included), or whose load timeout ends while it waits, loads without a
// lease. Background refreshes of stale entries do
// not take leases: they are one per key and replica, and the stale entry
// is served meanwhile.
//
// # Failure policy
//
// Redis is optional at run time, and no request fails because Redis
// failed. A request the in-process tier cannot answer gets one Redis
// budget (the tier's Timeout, 50ms by default) for all the calls made on
// its behalf: its read, and in its flight the generations, the load lease,
// the polls for another replica's load and the wait for its own write.
// Each waits at most what is left; once it is spent the calls are not
// made, as when the breaker is open. So a miss on a Redis that died or
// hangs costs one budget more than a miss without Redis. A request that
// shares another's read takes its wait from its own budget; one that waits
// for another's load waits on that load's calls, within that request's
// budget. Background refreshes do not use the request's budget. The tier
// turns an error, a timeout, a spent budget or an open circuit breaker
// into a miss; it keeps writes off the request path, in bounded queues,
// and drops them (counted) when a queue is full or the breaker is open
// (see package cache/redistier). While Redis is out, the in-process tier
// and the flights keep the backends from a stampede.
//
// # Metrics
//
// Registered on Options.Metrics; those marked (tier) the Redis tier
// registers on its own Options.Metrics, the same registry in prodapi:
//
//	prodapi_cache_requests_total{resource,outcome}   hit, stale, miss, collapsed, bypass, error
//	prodapi_cache_hits_total{resource,tier}          hits and stale answers by the tier that held them: local, redis
//	prodapi_partial_responses_total{resource}        incomplete responses served, marked and not stored
//	prodapi_cache_redis_errors_total{op}             (tier) get, set, del, lease, invalidate, rate, waiters
//	prodapi_cache_redis_duration_seconds{op}         (tier) get, set, del, gens, lease, rate
//	prodapi_cache_redis_breaker_state                (tier) 0 closed, 0.5 half-open, 1 open
//	prodapi_cache_corrupt_values_total
//	prodapi_cache_writes_dropped_total{reason}       (tier) queue_full, breaker_open, closed
//	prodapi_cache_refreshes_total{result}            ok, error
//	prodapi_cache_local_bytes, prodapi_cache_local_entries
//	prodapi_cache_local_evictions_total
//	prodapi_cache_invalidations_received_total       (tier) messages on the channel, own included
//	prodapi_cache_invalidations_applied_total        invalidations applied to the in-process tier
//	prodapi_cache_fenced_fills_total                 loads not stored: invalidated while they ran
//	prodapi_cache_invalidation_subscribed            (tier) 1 subscribed, 0 not
//	prodapi_cache_invalidation_subscriptions_total   (tier) subscriptions (each after a failure empties the tier)
//	prodapi_cache_known_generation_checks_total      Redis hits checked without a second round trip
//	prodapi_cache_changes_total{op}                  change-feed events applied (insert, update, replace, delete, flush)
//	prodapi_cache_change_lag_seconds                 from the latest change's write to its application
//	prodapi_cache_fleet_leases_total{result}         won, waited, timeout
//
// Asset redirects count under resource "assets" (content is a bypass).
package cache
