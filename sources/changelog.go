package sources

import (
	"errors"
	"time"
)

// A LogEntry is one change as the fleet's change log keeps it, and as
// /changes serves it.
type LogEntry struct {
	// Token is the entry's position in the log: a client that resumes
	// from it gets the entries after this one. Opaque to clients; the
	// same on every replica (the Redis stream id; without Redis the
	// in-process ring's position).
	Token    string
	Resource string    // the API resource (items, desks, planning...), never the collection name
	ID       string    // the document's id (IDString); "" for OpFlush
	Op       string    // OpInsert, OpUpdate, OpReplace, OpDelete or OpFlush
	At       time.Time // when the change was made, as its feed reported it (zero when unknown)
}

// ErrExpired is a resume token older than what the log keeps: the
// entries after it were trimmed, so the client must resync (410).
var ErrExpired = errors.New("sources: token expired")
