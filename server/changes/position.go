package changes

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/server/seal"
)

// A position is a token of the log as clients see it: sealed (package
// seal's Box) under a key derived from the cursor secret with a label of
// its own, each time with a random nonce, from a plaintext of one length
// whatever the token:
//
//	issued (6 bytes: Unix milliseconds, big-endian)
//	length of the token (1 byte)
//	the token, zero-padded to maxToken bytes
//
// issued is when the feed handed the position out: a search list asked
// for min_position waits until the index shows what the log held then.
const (
	positionLabel   = "prodapi change-log position v1"
	positionVersion = 1
	// maxToken is the longest token a position holds: the log's are
	// "<16 hex digits>-<ms>-<seq>", 58 bytes at most.
	maxToken     = 58
	positionSize = 6 + 1 + maxToken
)

// positions seal the log's tokens into positions and open them.
type positions struct {
	box *seal.Box
	now func() time.Time
}

// newPositions returns the positions keyed by secret, or by a random
// secret of this process's own when there is none.
func newPositions(secret []byte, now func() time.Time) *positions {
	if len(secret) == 0 {
		secret = make([]byte, 32)
		rand.Read(secret)
	}
	box, err := seal.NewBox(secret, positionLabel, positionVersion, positionSize)
	if err != nil {
		panic("changes: " + err.Error()) // the secret is never empty here
	}
	return &positions{box: box, now: now}
}

// seal returns the position of token, handed out now.
func (ps *positions) seal(token string) (string, error) {
	if len(token) > maxToken {
		return "", fmt.Errorf("changes: a token of %d bytes, longer than a position holds", len(token))
	}
	var plain [positionSize]byte
	ms := max(ps.now().UnixMilli(), 0)
	plain[0], plain[1] = byte(ms>>40), byte(ms>>32)
	binary.BigEndian.PutUint32(plain[2:], uint32(ms))
	plain[6] = byte(len(token))
	copy(plain[7:], token)
	return ps.box.Seal(plain[:])
}

// open returns the token a position seals and when it was handed out.
// Errors wrap seal.ErrShape (not a position) or seal.ErrOpen (one that
// does not open: another secret, another format).
func (ps *positions) open(pos string) (token string, issued time.Time, err error) {
	plain, err := ps.box.Open(pos)
	if err != nil {
		return "", time.Time{}, err
	}
	n := int(plain[6])
	if n > maxToken {
		return "", time.Time{}, seal.ErrOpen
	}
	ms := int64(plain[0])<<40 | int64(plain[1])<<32 | int64(binary.BigEndian.Uint32(plain[2:]))
	return string(plain[7 : 7+n]), time.UnixMilli(ms), nil
}

// errPositionGone marks the 410 of a position that does not open.
var errPositionGone = errors.New("changes: a position that does not open")

// open reads the position a client sent as param: the log's token, or a
// 400 (not a position) or a 410 (one that does not open, or a bare token
// of the log, as a version of prodapi that did not seal them handed out:
// either way, resync).
func (f *Feed) open(pos, param string) (string, error) {
	tok, _, err := f.openPosition(pos, param)
	return tok, err
}

// openPosition is open, also returning when the position was handed out.
func (f *Feed) openPosition(pos, param string) (string, time.Time, error) {
	tok, issued, err := f.positions.open(pos)
	switch {
	case err == nil:
		return tok, issued, nil
	case errors.Is(err, seal.ErrShape) && !f.log.Valid(pos):
		return "", time.Time{}, &httperr.Error{Status: http.StatusBadRequest, Msg: param + ": " + msgBadToken, Err: err}
	}
	msg := msgChangesGone
	if param != "since" && param != "Last-Event-ID" {
		msg = param + msgChangesGone[len("since"):]
	}
	return "", time.Time{}, &httperr.Error{Status: http.StatusGone, Msg: msg, Err: fmt.Errorf("%w: %w", errPositionGone, err)}
}

// isGone reports whether err is the 410 of a position that does not
// open.
func isGone(err error) bool { return errors.Is(err, errPositionGone) }

// sealed is the position of token, for an answer.
func (f *Feed) sealed(token string) (string, error) { return f.positions.seal(token) }
