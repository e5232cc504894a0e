package server

import (
	"hash/maphash"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// headerMemo remembers recent header values (HTTP dates, ETags and their
// gzip form, small numbers such as Age and Content-Length, the few
// strings a response repeats such as Cache-Status) so that a cache hit
// answered again and again does not format and allocate them each time.
// It is lock-free and fixed in size: a slot holds the last value that
// hashed to it; a miss just computes (and allocates once).
//
// The []string values are shared by every response that uses them, with
// len == cap: net/http only reads them, and an append by a handler
// copies.
type headerMemo struct {
	seed  maphash.Seed
	dates [256]atomic.Pointer[memoSlot]
	etags [1024]atomic.Pointer[memoSlot] // identity coding
	gzips [1024]atomic.Pointer[memoSlot] // gzip coding
	strs  [256]atomic.Pointer[memoSlot]
	ints  [4096]atomic.Pointer[memoSlot]
}

type memoSlot struct {
	key  string
	n    int64 // for dates and numbers
	vals []string
}

func newHeaderMemo() *headerMemo { return &headerMemo{seed: maphash.MakeSeed()} }

// date returns the http.TimeFormat form of t, as a header value.
func (m *headerMemo) date(t time.Time) []string {
	sec := t.Unix()
	s := &m.dates[uint64(sec)%uint64(len(m.dates))]
	if p := s.Load(); p != nil && p.n == sec {
		return p.vals
	}
	v := []string{t.UTC().Format(http.TimeFormat)}
	s.Store(&memoSlot{n: sec, vals: v})
	return v
}

// etag returns the header value of a representation's ETag, in its gzip
// form when zipped.
func (m *headerMemo) etag(etag string, zipped bool) []string {
	slots := &m.etags
	if zipped {
		slots = &m.gzips
	}
	s := &slots[maphash.String(m.seed, etag)%uint64(len(slots))]
	if p := s.Load(); p != nil && p.key == etag {
		return p.vals
	}
	v := []string{etag}
	if zipped {
		v[0] = gzipETag(etag)
	}
	s.Store(&memoSlot{key: etag, vals: v})
	return v
}

// str returns v as a header value.
func (m *headerMemo) str(v string) []string {
	s := &m.strs[maphash.String(m.seed, v)%uint64(len(m.strs))]
	if p := s.Load(); p != nil && p.key == v {
		return p.vals
	}
	vals := []string{v}
	s.Store(&memoSlot{key: v, vals: vals})
	return vals
}

// int returns the decimal form of n as a header value.
func (m *headerMemo) int(n int64) []string {
	s := &m.ints[uint64(n)%uint64(len(m.ints))]
	if p := s.Load(); p != nil && p.n == n {
		return p.vals
	}
	v := []string{strconv.FormatInt(n, 10)}
	s.Store(&memoSlot{n: n, vals: v})
	return v
}
