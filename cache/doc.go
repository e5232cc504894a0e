// Package cache is prodapi's read-through cache: an in-process tier in
// front of Redis (shared by the replicas), in front of the renderer
// (server/render), with one backend load per key at a time.
//
// A Cache wraps a render.Loader and is one: the server checks auth and
// scope on every request, hits included, and parses the query before it
// calls Load. The cache never sees a token.
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
// takes only a read lock). It serves an entry for LocalTTL (2s by
// default) after taking it from Redis or a load, never past the entry's
// freshness, so replicas converge on what Redis holds within LocalTTL.
// After that it keeps the entry, room allowing, only as a fallback for
// when Redis cannot be asked or the backend fails. Without Redis the tier
// is the cache and serves entries for their whole freshness.
//
// Redis (any go-redis UniversalClient: standalone, Sentinel, Cluster)
// holds one value per key: a versioned binary header (status, flags, a
// hash of the key, stored-at, freshness, stale window, last modified,
// total, ETag), the body, and a CRC-32C. A value that does not decode,
// belongs to another key or another format version, or is not a string
// is a miss: it is deleted and counted
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
// (x/sync/singleflight): the first request's flight looks in both tiers
// again, then loads; the others wait for it (outcome collapsed when it
// loaded). The flight runs on a context that keeps the first request's
// values but not its cancellation, bounded by LoadTimeout; each waiter
// still gives up when its own context ends, and the load goes on for the
// others. A panic in a load is an error (logged with its stack), never a
// crash. Background refreshes run the same way, and Close cancels them.
//
// An entry past its freshness but within the stale window is served at
// once, and one background refresh per key and process starts
// (stale-while-revalidate). When a load or refresh fails (unavailable,
// timeout, partial results, a panic; not a refused query), the last good
// entry within the window is served (stale-if-error) with fwd=stale and
// the failure's status; no refresh of that key starts for a second after
// a failure, and its stale responses say fwd=stale for 30s. An error never
// replaces an entry. Only 200 and 404 responses are stored; NoStore
// (degraded enrichment), partial results and every other status are
// served once and never stored.
//
// # Failure policy
//
// Redis is optional at run time. A request waits RedisTimeout (50ms by
// default) for a read; an error or timeout is a miss. The read itself goes
// on, detached, and counts against Redis only when Redis errs or no reply
// came within a second: a reply late because the process was short of CPU
// is a success. When at least half of 10 or more calls over the last 10s
// failed, a circuit breaker skips Redis for 2s, then lets one call through
// as a probe. Reply errors (out of memory, read-only) count as successes:
// Redis is there, so reads go on when only writes fail. Writes
// never happen on the request path: they go through bounded queues (four
// writers; a key always uses the same one, so its writes keep their
// order), are dropped and counted when a queue is full or the breaker is
// open, and are drained by Close. While Redis is out, the in-process tier
// and the flights keep the backends from a stampede. No request fails
// because Redis failed.
//
// A client for New must have ContextTimeoutEnabled set, or go-redis
// ignores the per-call deadline; NewRedis sets it, dials once per attempt
// (go-redis would try five times, 100ms apart, spending every call's
// budget on a Redis that refuses connections) and turns off the Redis
// Enterprise maintenance-notification handshake. go-redis logs dial
// failures through its own process-wide logger (redis.SetLogger).
//
// # REDIS_URL
//
// NewRedis accepts:
//
//	redis://[[user]:pass@]host[:port][/db][?option=value...]     standalone
//	rediss://...                                                 standalone over TLS
//	redis+cluster://[[user]:pass@]host:port[,host:port...][?addr=host:port...]
//	rediss+cluster://...                                         Cluster (over TLS)
//	redis-sentinel://[[user]:pass@]host:port[,host:port...]/mastername[/db][?sentinel_password=...]
//	rediss-sentinel://...                                        Sentinel (over TLS)
//
// Options are go-redis's URL options (dial_timeout, pool_size, ...), and
// for a Cluster cluster_state_reload_interval (default 1s): how often the
// client re-reads the slots, which bounds how long it keeps sending a
// failed-over master's slots to the dead master.
// Ports default to 6379, 26379 for sentinels. In a Sentinel URL the
// userinfo authenticates to the master and replicas; sentinel_username and
// sentinel_password authenticate to the sentinels.
//
// # Metrics
//
// Registered on Options.Metrics:
//
//	prodapi_cache_requests_total{resource,outcome}   hit, stale, miss, collapsed, bypass, error
//	prodapi_cache_redis_errors_total{op}             get, set, del
//	prodapi_cache_redis_breaker_state                0 closed, 0.5 half-open, 1 open
//	prodapi_cache_corrupt_values_total
//	prodapi_cache_writes_dropped_total{reason}       queue_full, breaker_open, closed
//	prodapi_cache_refreshes_total{result}            ok, error
//	prodapi_cache_local_bytes, prodapi_cache_local_entries
//	prodapi_cache_local_evictions_total
//
// Asset redirects count under resource "assets" (content is a bypass).
package cache
