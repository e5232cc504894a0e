package sources

import (
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// Operations a Change reports.
const (
	OpInsert  = "insert"
	OpUpdate  = "update"
	OpReplace = "replace"
	OpDelete  = "delete"
	// OpFlush: anything in the collection may have changed (a change
	// stream that cannot resume, a dropped collection).
	OpFlush = "flush"
)

// A Change is one write to a collection, as a change feed reports it (the
// sandbox's file watcher, MongoDB change streams): which document, and
// how. It never carries the new document.
type Change struct {
	Collection string
	ID         string // the document's _id as IDString gives it; "" for OpFlush
	Op         string
	// At is when the write happened (the cluster time), zero when the
	// feed does not know.
	At time.Time
	// Version names this change of the document, where the feed can: the
	// same on every replica that sees it and different for any other
	// change of the document (a change event's id, a hash of the new
	// content, an _etag). The fleet's change log appends a change whose
	// Version is the last it appended for the document once only, so
	// that replicas reporting the same write, or a watcher resuming
	// after a takeover, add no second entry. "" appends every time.
	Version string
	// Before is the document as it was before the change, where the feed
	// has it at no cost (the sandbox's reload); nil otherwise. What it
	// linked to then tells which documents embedded it (package enrich's
	// Deriver). Shared with the feed: read it, never modify it. Never
	// appended, never served.
	Before *Doc
}

// A Stamp is a document as a poll of its collection sees it: its id, the
// time of its last write (_updated) and its version (_etag; "" when it
// has none).
type Stamp struct {
	ID      string
	Updated time.Time
	Version string
}

// ResourcesOf returns the resources served from a collection.
func ResourcesOf(collection string) []*Resource {
	var out []*Resource
	for _, r := range Resources() {
		if r.Collection == collection {
			out = append(out, r)
		}
	}
	return out
}

// VersionOf is a Change's Version made from bytes that name the change
// alike on every replica (an event's resume token, a document's
// content): 16 hex digits of their SHA-256.
func VersionOf(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}
