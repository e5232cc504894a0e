package cache

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"hash/fnv"
	"io"
	"runtime"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/prodapi/prodapi/sources"
)

// minGzip is the smallest body stored compressed. Smaller ones (404s,
// short details) gain nothing from gzip: they are stored as they are and
// returned in Representation.Body.
const minGzip = 1024

// An entry is a finished response as the cache keeps it: the body once,
// gzip-compressed when it is large enough, and what a response needs
// without reading the body (status, validator, total, times). An entry is
// never modified once built; tiers and callers share it.
type entry struct {
	status       int
	gzip         bool   // body is gzip-compressed
	body         []byte // the stored body, compressed or not
	etag         string
	total        int
	lastModified time.Time // for asset redirects: when the URL expires
	storedAt     time.Time
	fresh        time.Duration // freshness from storedAt
	stale        time.Duration // serve-stale window after freshness
	// tags name what the entry was built from and gens their
	// generations when it was (tags.go); both nil when untagged.
	tags []string
	gens []uint64
	held int // bytes behind body when more than cap(body) (a decoded value's whole buffer)
}

func (e *entry) freshUntil() time.Time { return e.storedAt.Add(e.fresh) }
func (e *entry) staleUntil() time.Time { return e.storedAt.Add(e.fresh + e.stale) }

// isFresh reports whether e may be served as a hit at now.
func (e *entry) isFresh(now time.Time) bool { return now.Before(e.freshUntil()) }

// isUsable reports whether e may be served at all at now: fresh, or
// within its serve-stale window.
func (e *entry) isUsable(now time.Time) bool { return now.Before(e.staleUntil()) }

// size estimates the memory e holds, for the in-process tier's bound:
// the whole array behind the body (its capacity, not its length: a body
// sliced from a larger buffer keeps all of it alive), the ETag and the
// struct.
func (e *entry) size() int64 { return int64(max(cap(e.body), e.held)+len(e.etag)) + 160 }

// ttl is the Cache-Status ttl of e at now: its remaining freshness in
// whole seconds, negative once stale.
//
// Seconds round down, so an entry a fraction of a second past its
// freshness already says ttl=-1: Cache-Status never calls a stale entry
// fresh.
func (e *entry) ttl(now time.Time) int64 {
	d := e.freshUntil().Sub(now)
	s := int64(d / time.Second)
	if d < 0 && d%time.Second != 0 {
		s--
	}
	return s
}

// gzipPool recycles gzip writers. One per Cache, not package state.
//
// A writer allocates its encoder's tables (about 1 MB at level 5) on its
// first write and keeps them across Reset. A sync.Pool drops its writers
// at every other garbage collection, and a busy miss path then paid for
// a megabyte of new tables every few dozen requests (BenchmarkListMiss),
// so the writers are kept in a free list instead: at most one per
// processor (no more can compress at once), and at most maxIdleWriters,
// so that a large machine keeps no more than 16 MB of them.
type gzipPool struct {
	mu   sync.Mutex
	free []*gzip.Writer
}

func (g *gzipPool) writer(w io.Writer) *gzip.Writer {
	g.mu.Lock()
	var zw *gzip.Writer
	if n := len(g.free); n > 0 {
		zw, g.free = g.free[n-1], g.free[:n-1]
	}
	g.mu.Unlock()
	if zw == nil {
		// klauspost/compress at level 5: within 1-3% of the standard
		// library's level 5 in size, at a third of its CPU (BENCHMARKS.md,
		// "A list miss"). Its levels 1 to 4 are 12-21% larger on a
		// 25-item list.
		zw, _ = gzip.NewWriterLevel(w, 5)
		return zw
	}
	zw.Reset(w)
	return zw
}

func (g *gzipPool) putWriter(zw *gzip.Writer) {
	zw.Reset(io.Discard) // the pooled writer must not keep the buffer
	g.mu.Lock()
	if len(g.free) < min(runtime.GOMAXPROCS(0), maxIdleWriters) {
		g.free = append(g.free, zw)
	}
	g.mu.Unlock()
}

// compress returns body gzip-compressed, in a slice little larger than
// its length (rightSized): the entry that keeps it holds little more
// than the compressed bytes, and is charged its capacity.
func (g *gzipPool) compress(body []byte) []byte {
	var out bytes.Buffer
	out.Grow(len(body)/3 + 64)
	zw := g.writer(&out)
	// Writes to a bytes.Buffer cannot fail.
	_, _ = zw.Write(body)
	_ = zw.Close()
	g.putWriter(zw)
	return rightSized(out.Bytes())
}

// maxIdleWriters bounds the gzip writers kept for reuse.
const maxIdleWriters = 16

// rightSized returns b, or a copy of it when the array behind it is much
// larger than b (a loader's body sliced from a bigger buffer): a cached
// entry keeps what it holds for minutes.
func rightSized(b []byte) []byte {
	if cap(b)-len(b) > len(b)/8+64 {
		return bytes.Clone(b)
	}
	return b
}

// newEntry builds the entry for a loaded representation: the body is
// compressed once here (unless the loader already did, or it is small),
// and a missing ETag is computed from it.
func (c *Cache) newEntry(rep *sources.Representation, now time.Time, fresh, stale time.Duration) *entry {
	e := &entry{
		status:       rep.Status,
		etag:         rep.ETag,
		total:        rep.Total,
		lastModified: rep.LastModified,
		storedAt:     now,
		fresh:        fresh,
		stale:        stale,
	}
	switch {
	case rep.Gzip != nil:
		e.gzip, e.body = true, rightSized(rep.Gzip)
	case len(rep.Body) >= minGzip:
		e.gzip, e.body = true, c.gzip.compress(rep.Body)
	default:
		e.body = rightSized(rep.Body)
	}
	if e.etag == "" {
		sum := sha256.Sum256(e.body)
		e.etag = `"` + base64.RawURLEncoding.EncodeToString(sum[:18]) + `"`
	}
	return e
}

// The stored value: a fixed header, the ETag, the body and a checksum.
//
//	0   magic "PDC" and format version 1
//	4   flags (bit 0: body is gzip)
//	5   status            uint16
//	7   key hash          uint64 (FNV-1a of the key: a value copied to
//	                      another key is foreign)
//	15  stored at         int64 Unix nanoseconds
//	23  fresh, stale      int64 nanoseconds each
//	39  last modified     int64 Unix nanoseconds, 0 for none
//	47  total             int64
//	55  ETag length       uint16, then the ETag
//	    body length       uint32, then the body
//	    CRC-32C of everything before it, uint32
//
// Integers are big-endian. Anything that does not decode exactly is a
// foreign or corrupt value: a miss, deleted and counted, never an error
// to the client.
const (
	valueMagic  = "PDC\x01"
	headerLen   = 55
	flagGzip    = 1
	maxETagLen  = 1 << 10
	checksumLen = 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var errCorrupt = errors.New("cache: corrupt or foreign value")

func keyHash(key string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return h.Sum64()
}

// encode serialises e as the value stored under key.
func encode(key string, e *entry) []byte {
	return appendEncoded(make([]byte, 0, encodedLen(e)), key, e)
}

// encodedLen is the length of e's encoding.
func encodedLen(e *entry) int {
	return headerLen + 2 + len(e.etag) + 4 + len(e.body) + checksumLen
}

// appendEncoded appends the encoding of e to b.
func appendEncoded(b []byte, key string, e *entry) []byte {
	start := len(b)
	b = append(b, valueMagic...)
	var flags byte
	if e.gzip {
		flags |= flagGzip
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint16(b, uint16(e.status))
	b = binary.BigEndian.AppendUint64(b, keyHash(key))
	b = binary.BigEndian.AppendUint64(b, uint64(e.storedAt.UnixNano()))
	b = binary.BigEndian.AppendUint64(b, uint64(e.fresh))
	b = binary.BigEndian.AppendUint64(b, uint64(e.stale))
	var lm int64
	if !e.lastModified.IsZero() {
		lm = e.lastModified.UnixNano()
	}
	b = binary.BigEndian.AppendUint64(b, uint64(lm))
	b = binary.BigEndian.AppendUint64(b, uint64(int64(e.total)))
	b = binary.BigEndian.AppendUint16(b, uint16(len(e.etag)))
	b = append(b, e.etag...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(e.body)))
	b = append(b, e.body...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b[start:], castagnoli))
}

// decode parses a value stored under key. The entry's body aliases b, and
// the entry is charged for all of b.
func decode(key string, b []byte) (*entry, error) {
	if len(b) < headerLen+2+4+checksumLen || string(b[:4]) != valueMagic {
		return nil, errCorrupt
	}
	data, sum := b[:len(b)-checksumLen], b[len(b)-checksumLen:]
	if crc32.Checksum(data, castagnoli) != binary.BigEndian.Uint32(sum) {
		return nil, errCorrupt
	}
	be := binary.BigEndian
	flags := data[4]
	if flags&^flagGzip != 0 || be.Uint64(data[7:]) != keyHash(key) {
		return nil, errCorrupt
	}
	e := &entry{
		status:   int(be.Uint16(data[5:])),
		gzip:     flags&flagGzip != 0,
		storedAt: time.Unix(0, int64(be.Uint64(data[15:]))),
		fresh:    time.Duration(be.Uint64(data[23:])),
		stale:    time.Duration(be.Uint64(data[31:])),
		total:    int(int64(be.Uint64(data[47:]))),
	}
	if lm := int64(be.Uint64(data[39:])); lm != 0 {
		e.lastModified = time.Unix(0, lm)
	}
	if e.fresh < 0 || e.stale < 0 || e.status < 100 || e.status > 599 {
		return nil, errCorrupt
	}
	rest := data[headerLen:]
	n := int(be.Uint16(rest))
	rest = rest[2:]
	if n > maxETagLen || len(rest) < n+4 {
		return nil, errCorrupt
	}
	e.etag, rest = string(rest[:n]), rest[n:]
	n = int(be.Uint32(rest))
	rest = rest[4:]
	if len(rest) != n {
		return nil, errCorrupt
	}
	e.body = rest[:n:n]
	e.held = cap(b) // the body keeps the whole value alive
	return e, nil
}
