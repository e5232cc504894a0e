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
	// Version is the change's Version (see Change), "" when its feed gave
	// none: for a replica to tell whether what it serves of the document
	// is that version. Internal: never served.
	Version string
}

// ErrExpired is a resume token the log can no longer continue: older
// than what it keeps (the entries after it were trimmed), of another
// life of the log, or ahead of its head (the log lost entries it had
// handed out). The client must resync (410).
var ErrExpired = errors.New("sources: token expired")
