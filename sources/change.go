package sources

import "time"

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
// how. It never carries the document itself.
type Change struct {
	Collection string
	ID         string // the document's _id as IDString gives it; "" for OpFlush
	Op         string
	// At is when the write happened (the cluster time), zero when the
	// feed does not know.
	At time.Time
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
