package changelog

import (
	"sort"
	"strconv"
	"time"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/sources"
)

// An entry is one entry of the log as a replica holds it: small, since
// the ring holds up to Options.MaxEntries of them.
type entry struct {
	pos position
	res uint8 // index in sources.Resources(); noResource when unknown
	op  uint8 // index in ops
	at  int64 // unix milliseconds; 0: unknown
	id  string
	// version is the change's Version ("" when its feed gave none), for
	// a replica to tell whether it serves that version of the document.
	version string
}

// noResource marks an entry naming no resource this version serves
// (written by another version of prodapi): it is read past, never served.
const noResource = 255

var ops = []string{sources.OpInsert, sources.OpUpdate, sources.OpReplace, sources.OpDelete, sources.OpFlush}

func opIndex(op string) (uint8, bool) {
	for i, o := range ops {
		if o == op {
			return uint8(i), true
		}
	}
	return 0, false
}

func resourceIndex(name string) uint8 {
	for i, r := range sources.Resources() {
		if r.Name == name {
			return uint8(i)
		}
	}
	return noResource
}

// logEntry is e as the log serves it, under epoch.
func (e *entry) logEntry(epoch string) sources.LogEntry {
	le := sources.LogEntry{
		Token:    token{epoch: epoch, pos: e.pos}.String(),
		Resource: sources.Resources()[e.res].Name,
		ID:       e.id,
		Op:       ops[e.op],
		Version:  e.version,
	}
	if e.at != 0 {
		le.At = time.UnixMilli(e.at).UTC()
	}
	return le
}

// Fields of a stream record.
const (
	fieldResource = "r"
	fieldID       = "i"
	fieldOp       = "o"
	fieldAt       = "t" // unix milliseconds, absent when unknown
	fieldVersion  = "v" // the change's Version, absent when it has none
)

// recordFields are the fields of the record of a change's entry for res.
func recordFields(res string, ch sources.Change) []string {
	f := []string{fieldResource, res, fieldID, ch.ID, fieldOp, ch.Op}
	if !ch.At.IsZero() {
		f = append(f, fieldAt, strconv.FormatInt(ch.At.UnixMilli(), 10))
	}
	if ch.Version != "" {
		f = append(f, fieldVersion, ch.Version)
	}
	return f
}

// recordEntry reads a stream record; ok is false when its id is not a
// stream id. A record whose resource or operation this version does not
// know is an entry of noResource.
func recordEntry(r redistier.StreamRecord) (entry, bool) {
	pos, ok := parsePosition(r.ID)
	if !ok {
		return entry{}, false
	}
	e := entry{pos: pos, res: noResource}
	var op string
	for i := 0; i+1 < len(r.Fields); i += 2 {
		v := r.Fields[i+1]
		switch r.Fields[i] {
		case fieldResource:
			e.res = resourceIndex(v)
		case fieldID:
			e.id = v
		case fieldOp:
			op = v
		case fieldAt:
			e.at, _ = strconv.ParseInt(v, 10, 64)
		case fieldVersion:
			e.version = v
		}
	}
	if o, ok := opIndex(op); ok {
		e.op = o
	} else {
		e.res = noResource
	}
	return e, true
}

// A tail is a run of consecutive entries of the log: every entry after
// from, up to last. The ring is one; in front of Redis, each replica's
// follower keeps the newest entries in one, so that reads of recent
// positions cost no round trip.
type tail struct {
	entries []entry // entries[head:] are held, oldest first
	head    int
	from    position // every entry after from, up to last, is held
	last    position // the newest position: the last entry's, or where the log stands
}

func (t *tail) len() int { return len(t.entries) - t.head }

// oldest is the oldest entry held; the tail must not be empty.
func (t *tail) oldest() *entry { return &t.entries[t.head] }

// newest is the newest entry held; ok is false when none is.
func (t *tail) newest() (e entry, ok bool) {
	if t.len() == 0 {
		return entry{}, false
	}
	return t.entries[len(t.entries)-1], true
}

// push adds e, which comes after last.
func (t *tail) push(e entry) {
	t.entries = append(t.entries, e)
	t.last = e.pos
}

// drop forgets the oldest entry.
func (t *tail) drop() {
	t.from = t.entries[t.head].pos
	t.entries[t.head] = entry{}
	t.head++
	// Compact once the dead half is large, so that memory follows what
	// is held.
	if t.head > 1024 && t.head > len(t.entries)/2 {
		t.entries = append(t.entries[:0:0], t.entries[t.head:]...)
		t.head = 0
	}
}

// covers reports whether every entry after p is held.
func (t *tail) covers(p position) bool {
	return !p.less(t.from) && !t.last.less(p)
}

// names reports whether p is the tail's start or the position of an
// entry held: a position the log hands out, where the tail covers it.
func (t *tail) names(p position) bool {
	if p == t.from {
		return true
	}
	i := t.after(p)
	return i > t.head && t.entries[i-1].pos == p
}

// after returns the index of the first entry held after p.
func (t *tail) after(p position) int {
	live := t.entries[t.head:]
	return t.head + sort.Search(len(live), func(i int) bool { return p.less(live[i].pos) })
}

// read returns, under epoch, the entries after p whose resource keep
// allows, at most n of them, examining at most scan; and the position
// of the last entry examined (p when none was). The tail must cover p.
func (t *tail) read(epoch string, p position, keep mask, n, scan int) ([]sources.LogEntry, position) {
	var out []sources.LogEntry
	next := p
	for i := t.after(p); i < len(t.entries) && len(out) < n && scan > 0; i++ {
		e := &t.entries[i]
		next = e.pos
		scan--
		if keep.has(e.res) {
			out = append(out, e.logEntry(epoch))
		}
	}
	return out, next
}

// A mask is a set of resources, by index in sources.Resources().
type mask uint64

func maskOf(resources []string) mask {
	var m mask
	for _, name := range resources {
		if i := resourceIndex(name); i != noResource {
			m |= 1 << i
		}
	}
	return m
}

func (m mask) has(res uint8) bool { return res < 64 && m&(1<<res) != 0 }

// all reports whether m holds every resource.
func (m mask) all() bool { return m == 1<<len(sources.Resources())-1 }
