package sources

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// A Representation is a finished response for a query: what the renderer
// produces, the cache stores and the server writes. It lives here, beneath
// all three, so that none of them imports another to name it, and a
// cache hit hands the server the very value it stored.
type Representation struct {
	// Status is 200, or 404 for a detail that does not exist (a
	// deterministic answer the cache keeps briefly). Other failures are
	// errors, never representations.
	Status int
	// Body is the JSON body; it may be nil when Gzip is set.
	Body []byte
	// Gzip is the gzip-compressed body, when the producer has it.
	Gzip []byte
	// ETag is the strong validator, quoted: a hash of the body.
	ETag string
	// Total is the list's total (X-Total-Count); -1 for a detail.
	Total int
	// LastModified is the latest _updated of the documents, zero if none.
	LastModified time.Time
	// Missing names what an incomplete response lacks: the optional
	// enrichment steps that failed (e.g. "planning", "assignment links").
	// Such a response may be served, marked, but is never stored. Nil
	// for a complete one.
	Missing []string
	// Docs names the documents the body was built from, as
	// "resource/id": a detail's own id and the ids its _links point to; a
	// list's ids on the page and those their _links point to. A cache
	// tags its entry with them, so that a change to any of them can
	// obsolete it.
	Docs []string
	// Early says the body was produced before the request asked for it:
	// a cursor walk's page read ahead. A cache serves it and stores it
	// nowhere, since its fence against invalidations began after the
	// reading.
	Early bool

	// Set by a cache:
	// StoredAt is when the representation was produced; zero when it
	// comes straight from the backend.
	StoredAt time.Time
	// CacheStatus is the RFC 9211 Cache-Status value, "" without a cache.
	CacheStatus string
	// Outcome is the cache outcome for logs and metrics: hit, stale,
	// miss, collapsed, bypass or error.
	Outcome string
}

// ETag is the strong validator of body: a quoted hash of it.
func ETag(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}
