package render

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// A Representation is a finished response for a query: what the cache
// stores and the server writes.
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
	// NoStore marks a response that may be served but not cached: an
	// optional enrichment failed.
	NoStore bool
	// Docs names the documents the body was built from, as
	// "resource/id": a detail's own id and the ids its _links point to; a
	// list's ids on the page and those their _links point to. A cache
	// tags its entry with them, so that a change to any of them can
	// obsolete it.
	Docs []string

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

// A Loader produces the representation of a query. The Renderer is one;
// the cache wraps one.
type Loader interface {
	Load(ctx context.Context, q *sources.Query) (*Representation, error)
}

// LoaderFunc adapts a function to a Loader.
type LoaderFunc func(ctx context.Context, q *sources.Query) (*Representation, error)

// Load calls f.
func (f LoaderFunc) Load(ctx context.Context, q *sources.Query) (*Representation, error) {
	return f(ctx, q)
}

// ETag is the strong validator of body: a quoted hash of it.
func ETag(body []byte) string {
	sum := sha256.Sum256(body)
	return `"` + hex.EncodeToString(sum[:16]) + `"`
}
