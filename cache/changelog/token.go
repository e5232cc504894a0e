package changelog

import (
	"math"
	"strconv"
	"strings"
)

// A position is an entry's place in the log: a Redis stream id (ms-seq:
// the milliseconds of Redis's clock when it was added, and a sequence
// within them), or the in-process ring's, made the same way.
type position struct{ ms, seq uint64 }

func (p position) less(q position) bool {
	return p.ms < q.ms || p.ms == q.ms && p.seq < q.seq
}

// String is the position as Redis writes a stream id.
func (p position) String() string {
	return strconv.FormatUint(p.ms, 10) + "-" + strconv.FormatUint(p.seq, 10)
}

// before is the stream id just before p, so that a read after it reads
// p's own entry first; "" (from the oldest) for 0-0, which no entry has.
func (p position) before() string {
	switch {
	case p.seq > 0:
		return position{p.ms, p.seq - 1}.String()
	case p.ms > 0:
		return position{p.ms - 1, math.MaxUint64}.String()
	}
	return ""
}

// parsePosition reads a stream id, ms-seq.
func parsePosition(s string) (position, bool) {
	ms, seq, ok := strings.Cut(s, "-")
	if !ok {
		return position{}, false
	}
	var p position
	var err error
	if p.ms, err = parseDecimal(ms); err != nil {
		return position{}, false
	}
	if p.seq, err = parseDecimal(seq); err != nil {
		return position{}, false
	}
	return p, true
}

// parseDecimal is a uint64 in plain decimal: no sign, no leading zero
// but for 0 itself, so that a position has one spelling.
func parseDecimal(s string) (uint64, error) {
	if len(s) > 1 && s[0] == '0' {
		return 0, strconv.ErrSyntax
	}
	return strconv.ParseUint(s, 10, 64)
}

// A token is what a client resumes from: the log's epoch, then the
// position, "<epoch>-<ms>-<seq>". The epoch names one life of the log
// (of the Redis stream, or of the process keeping the ring), so a token
// from another life (before Redis lost the stream, before the process
// restarted) is never taken for a position of this one: it has expired.
type token struct {
	epoch string
	pos   position
}

// epochLen is the length of an epoch: 16 lowercase hex digits, as
// redistier.NewEpoch makes them.
const epochLen = 16

func (t token) String() string { return t.epoch + "-" + t.pos.String() }

// parseToken reads a token; ok is false when s is not one.
func parseToken(s string) (token, bool) {
	if len(s) < epochLen+4 || s[epochLen] != '-' || !isEpoch(s[:epochLen]) {
		return token{}, false
	}
	p, ok := parsePosition(s[epochLen+1:])
	if !ok {
		return token{}, false
	}
	return token{epoch: s[:epochLen], pos: p}, true
}

func isEpoch(s string) bool {
	if len(s) != epochLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
