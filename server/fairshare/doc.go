// Package fairshare is the API's fair-share limiter: a rate limit per
// client, shared by the fleet, a limit per address before
// authentication, and a cap on the backend loads each client has in
// flight. No client, authenticated or not, takes more than its share, and
// each one reads its share, and what is left of it, in the IETF RateLimit
// headers (draft-ietf-httpapi-ratelimit-headers-11).
//
// # Where it sits
//
// The server asks it in this order: routing (404, 405), then the address
// limit (CheckAddress: 429), then authentication (401, which the address
// pays for: Unauthenticated), then the token's scope (403, which its
// client pays for: Charge), then the client's limit (Admit: 429), then
// the request's parameters (400). The cache asks it once more before a
// request starts a backend load (AdmitLoad, through the context the
// server hands the cache: WithShare): the load's cost, and a slot of the
// client's loads in flight.
//
// # Costs
//
// Every request a client makes costs 1 (a 4xx too). The request that
// starts a backend load costs MissCost more, charged before the load
// starts; the requests that waited for another's load (collapsed), stale
// answers and hits, in process or from Redis, cost 1. A request
// authentication refuses costs its address 1. With authentication off,
// the address is the client.
//
// # One count for the fleet
//
// A limit is a GCRA bucket (a token bucket in time: Events per Per,
// Events at once) whose count the replicas share in Redis (the Fleet:
// cmd/prodapi's is the cache's Redis tier, through go-redis/redis_rate).
// A hit must never wait on Redis for it, so each replica keeps its own
// view of every bucket it serves (an x/time/rate Limiter) and decides
// there; it charges what it served to the fleet's count in a batch every
// Options.Flush (100ms), and takes the fleet's answer as its new view,
// less what it served meanwhile. What the fleet could not take then
// (another replica spent it first) is owed, charged again at the next
// batch, and taken from this replica's view at once: so the fleet as a
// whole keeps to the limit, and a client overshoots by one batch per
// replica at most. A load, which waits on a backend anyway, is charged to
// the fleet before it starts, all of its cost or none.
//
// When the fleet cannot be asked (Redis down, its circuit breaker open),
// each replica's view goes on alone: the limits hold per replica, so the
// fleet allows each client its limit once per replica until Redis is
// back. Alone reports it; /readyz says so.
//
// # Answers
//
// Over a limit: 429 in the API's error envelope, with Retry-After (whole
// seconds, at least 1) and the RateLimit headers. Under it, the same
// headers on the answer, whatever its status:
//
//	RateLimit-Policy: "client";q=600;w=1
//	RateLimit: "client";r=587;t=1
//
// q is the limit's Events and w its Per in seconds; r is what the bucket
// holds now, t the seconds until it is full again (on a 429: until
// Retry-After). The policy is "client" for a client's limit and
// "address" for an address's. Over the cap of loads in flight: 429 with
// Retry-After: 1.
//
// A 429 costs a replica about what a hit does, so a client that asks
// again at once, in a loop, would still take the CPU its 429s cost from
// everyone else. So a client refused at a rate limit again before its
// last 429's Retry-After had passed is held a second (Options.Hold)
// before its 429 goes out (Hold; the server leaves held requests out of
// its latency histogram): a loop gets an answer per connection and
// second, while what its rate still pays for goes on being served. A
// client that waits as Retry-After says is never held. At most maxHolds
// requests of one client are held at once on a replica.
//
// # Memory
//
// A replica keeps a share per client it served and per address that sent
// a request authentication refused, and forgets one idle for a minute
// whose bucket is full again. Addresses are bounded (maxAddresses):
// beyond, a new address's refusals go uncounted until old ones are
// forgotten. An IPv6 address counts by its /64, what one host is usually
// given.
//
// # Metrics
//
//	prodapi_rate_limited_total{client}   429s at a rate limit: the clients with a limit of their own by name, all others "other"
//	prodapi_cap_refusals_total{cap}      429s at a cap: client_loads here (metrics.CapRefusals declares every cap)
package fairshare
