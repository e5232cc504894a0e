// Package redistier is the cache's Redis tier: what a replica keeps in,
// and learns from, the Redis its fleet shares. It deals in keys and
// bytes, never in entries, queries or documents: package cache encodes
// what it stores and names the tags whose generations it reads.
//
// cmd/prodapi builds one Tier per process (New), hands it to the cache
// (entries, generations, invalidations, one load per fleet) and to the
// change feed (cache/feed: its lease and resume token), and closes it
// after the cache. Without Redis a Tier is a fleet of one: reads find
// nothing, writes and messages go nowhere, its replica holds every lease,
// and tokens live in memory.
//
// A Tier is a few kinds of call on one client, each bounded, timed,
// traced and judged by one breaker. A new use of the fleet's Redis (a
// change log's stream and its watermark, say) belongs here, as a file of
// its own beside these, with the same helpers: span and endSpan for
// tracing, controlCtx for a control call's deadline, the breaker where a
// failure should make the replica stop asking.
//
// # Keys
//
// Every key starts with Prefix:
//
//	prodapi:v1:<...>                  values (Set, Get; package cache names them)
//	prodapi:v1:gen:<tag>              a tag's generation (Gens, NewGens)
//	prodapi:v1:lease:<key>            the load lease of key (TryLoadLease)
//	prodapi:v1:feed:<name>:lease      a change feed's watcher lease (Lease)
//	prodapi:v1:{changes}:feed:<name>:token  its resume token (Token, SaveToken)
//	prodapi:v1:{changes}:...          the change log's stream (stream.go)
//	prodapi:v1:invalidations          the pub/sub channel (Publish, Subscribe)
//	prodapi:v1:{changes}:refs:<c>:<id>  a document's links at its last change (Refs, SaveRefs)
//	prodapi:v1:{changes}:known:<c>      the ids the feed's poll knows, by round (MarkKnown, Unmarked)
//	rate:prodapi:v1:<client>          a rate limit's GCRA bucket (Charge; redis_rate puts "rate:" first)
//	prodapi:v1:waiters:<client>       a client's waiters, by lease end (JoinWaiter, RenewWaiters, LeaveWaiter)
//
// # A request's budget
//
// Everything a request waits on Redis, over all its calls, fits in one
// budget: Options.Timeout (50ms by default). The cache gives a request
// its budget when the in-process tier cannot answer (WithBudget); each
// call made with it (Get, Gens, TryLoadLease, the wait of SetAndWait)
// waits at most what is left, and takes what it waited; once it is spent
// a call is not made, and answers as when Redis cannot be asked. So a miss
// on a Redis that died or hangs costs one budget, not one timeout per
// call. What the request does not wait for keeps its own bound: queued
// writes (sickAfter), lease releases (Timeout), background refreshes
// (WithoutBudget: Timeout per call).
//
// # Reads
//
// Get waits for a reply at most Timeout, or what is left of the request's
// budget, less if the request's context ends sooner; an error or a timeout
// is a miss, never an error to the request. Concurrent reads share round
// trips through go-redis's auto-pipeliner. The read itself goes on,
// detached, and counts against Redis only when Redis errs or no reply came
// within sickAfter (a second, or four timeouts): a reply late because the
// process was short of CPU is a success.
//
// # Writes
//
// Writes never happen on the request path. Set and Delete queue them,
// four writers with 256 writes each (a key always uses the same one, so
// its writes keep their order); a write is dropped and counted when its
// queue is full or the breaker is open. SetAndWait queues a write and
// waits for it, within the request's budget (a fleet load's value, which
// the other replicas poll for).
// Close drains the queues until its context ends.
//
// # The breaker
//
// When 5 calls in a row failed (whatever the traffic: a replica that asks
// Redis now and then learns as soon as a busy one), or at least half of
// 10 or more calls over the last 10s, the breaker skips Redis for 2s, then
// lets one call through as a probe (one at a time): its success closes the
// breaker, its failure opens it for another 2s. Reply errors (out of
// memory, read-only) count as successes: Redis is there, so reads go on
// when only writes fail. A refusal of the client's credentials (NOAUTH,
// WRONGPASS: AuthError) counts as a failure: every call would dial a
// connection only to be refused. A read the request stopped waiting for counts
// only once sickAfter has passed without a reply; another call cut short
// by its deadline is no verdict.
//
// # Generations
//
// A generation names the state of a tag: a random 63-bit number that
// NewGens sets (never a counter, so a key that expired or was evicted
// reads as 0 and cannot come back to a value an old reader recorded),
// kept Options.GenTTL (24h by default) after it was last set. Gens reads
// those of many tags in one pipelined round trip (one GET per tag, so
// that a Cluster can route each). A value that records generations must
// not live longer than GenTTL.
//
// # Pub/sub
//
// Publish sends a payload to the other replicas on the channel; the
// message is the sender's replica id, a newline, the payload. Subscribe
// hands a Listener the other replicas' payloads, and says when the
// subscription is lost and when it is back (and whether messages may have
// been missed meanwhile). go-redis reconnects a lost subscription; a
// silent one is pinged every 5s, so that a cut shows.
//
// # Leases and tokens
//
// A load lease (TryLoadLease, ReleaseLoadLease) lets one replica load a
// key for the fleet: SET NX PX, released (off the request path) by a
// compare-and-delete script, so that a lease that lapsed and was taken by
// another is not touched. A
// feed lease (Lease, ReleaseLease) lets one replica watch a change feed:
// taken, or extended by its holder only, with a script. A feed's resume
// token (Token, SaveToken) is kept a week after it was last saved, in the
// change log's hash slot, so that a Cluster replicates it in order with
// the entries appended before it was saved.
//
// # Rate limits
//
// Charge takes events from a GCRA bucket the fleet shares
// (go-redis/redis_rate: one script call, on Redis's clock), all or none,
// or as many as it holds: the fair-share limiter (server/fairshare)
// charges each backend load before it starts, and the hits it served in
// batches. It waits like a read (Timeout, or what is left of the
// request's budget) and is judged by the breaker; ok false means the
// limiter counts on this replica alone meanwhile.
//
// # Waiters
//
// JoinWaiter, RenewWaiters and LeaveWaiter count each client's /changes
// streams, long polls and min_position waits across the fleet
// (server/changes's Fleet): a sorted set per client of waiter ids, each
// scored by the end of its lease on Redis's clock. A join drops the
// members whose leases ended, then adds its own unless the client is at
// its cap, in one script; each replica renews all of its waiters' leases
// in one pipelined round trip every third of a lease; so the waiters of
// a replica that died leave the count when their leases end. Each call
// waits as a control call does and is judged by the breaker; an error
// means the replica counts on its own meanwhile.
//
// # Clients and REDIS_URL
//
// A client for New must have ContextTimeoutEnabled set, or go-redis
// ignores the per-call deadline; NewClient sets it, dials once per
// attempt (go-redis would try five times, 100ms apart, spending every
// call's budget on a Redis that refuses connections), speaks RESP2 unless
// the URL asks otherwise, and turns off the Redis Enterprise
// maintenance-notification handshake. go-redis logs dial failures through
// its own process-wide logger (redis.SetLogger). NewClient accepts:
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
// failed-over master's slots to the dead master. Ports default to 6379,
// 26379 for sentinels. In a Sentinel URL the userinfo authenticates to
// the master and replicas; sentinel_username and sentinel_password
// authenticate to the sentinels.
//
// # Metrics
//
// Registered on Options.Metrics, under the cache's names (package cache
// lists them all):
//
//	prodapi_cache_redis_errors_total{op}             get, set, del, lease, invalidate, rate, waiters
//	prodapi_cache_redis_duration_seconds{op}         get, set, del, gens, lease, rate
//	prodapi_cache_redis_breaker_state                0 closed, 0.5 half-open, 1 open
//	prodapi_cache_writes_dropped_total{reason}       queue_full, breaker_open, closed
//	prodapi_cache_invalidations_received_total       messages on the channel, own included
//	prodapi_cache_invalidation_subscribed            1 subscribed, 0 not
//	prodapi_cache_invalidation_subscriptions_total   subscriptions
package redistier
