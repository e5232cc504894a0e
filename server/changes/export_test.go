package changes

import "github.com/prodapi/prodapi/sources"

// What the tests of package changes_test, which serve the feed through
// the whole server, compare answers with.
const (
	MsgChangesGone        = msgChangesGone
	MsgChangesUnavailable = msgChangesUnavailable
	MsgTooManyStreams     = msgTooManyStreams
	MsgStreamExpired      = msgStreamExpired
	MsgBadToken           = msgBadToken
	DefaultHeartbeat      = defaultHeartbeat
)

// Visible is what the feed keeps of entries when it reads names.
func Visible(names []string, entries []sources.LogEntry) []sources.LogEntry {
	return (&changeParams{names: names}).visible(entries)
}
