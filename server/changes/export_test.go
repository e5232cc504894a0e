package changes

import "github.com/prodapi/prodapi/sources"

// What the tests of package changes_test, which serve the feed through
// the whole server, compare answers with.
const (
	MsgChangesGone        = msgChangesGone
	MsgChangesUnavailable = msgChangesUnavailable
	MsgTooManyStreams     = msgTooManyStreams
	MsgStreamExpired      = msgStreamExpired
	MsgStreamAge          = msgStreamAge
	MsgTooManyPolls       = msgTooManyPolls
	MsgTooManyWaits       = msgTooManyWaits
	MsgBadToken           = msgBadToken
	MsgBadInclude         = msgBadInclude
	MsgNotApplied         = msgNotApplied
	MsgDocsNotApplied     = msgDocsNotApplied
	DefaultHeartbeat      = defaultHeartbeat
	MaxPageBytes          = maxPageBytes
)

// Visible is what the feed keeps of entries when it reads names.
func Visible(names []string, entries []sources.LogEntry) []sources.LogEntry {
	return (&changeParams{names: names}).visible(entries)
}

// Seal is the position of token, as f hands it out.
func Seal(f *Feed, token string) string {
	pos, err := f.positions.seal(token)
	if err != nil {
		panic(err)
	}
	return pos
}

// Open is the token a position of f seals; ok is false when it does not
// open.
func Open(f *Feed, pos string) (token string, ok bool) {
	tok, _, err := f.positions.open(pos)
	return tok, err == nil
}

// PositionLen is the length of every position.
func PositionLen(f *Feed) int { return f.positions.box.Len() }
