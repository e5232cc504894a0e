package server

import (
	"hash/maphash"
	"net/http"
	"sync/atomic"
	"time"
)

// headerMemo remembers recent header values (an HTTP date, an ETag and its
// gzip form) so that a cache hit answered again and again does not format
// and allocate them each time. It is lock-free and fixed in size: a slot
// holds the last value that hashed to it; a miss just computes.
type headerMemo struct {
	seed  maphash.Seed
	slots [1024]atomic.Pointer[memoSlot]
}

type memoSlot struct {
	key  string
	sec  int64 // for dates
	vals []string
}

func newHeaderMemo() *headerMemo { return &headerMemo{seed: maphash.MakeSeed()} }

// date returns the http.TimeFormat form of t, as a header value.
func (m *headerMemo) date(t time.Time) []string {
	sec := t.Unix()
	s := &m.slots[uint64(sec)%uint64(len(m.slots))]
	if p := s.Load(); p != nil && p.key == "" && p.sec == sec {
		return p.vals
	}
	v := []string{t.UTC().Format(http.TimeFormat)}
	s.Store(&memoSlot{sec: sec, vals: v})
	return v
}

// etag returns the header value of a representation's ETag, in its gzip
// form when zipped.
func (m *headerMemo) etag(etag string, zipped bool) []string {
	key := etag
	if zipped {
		key = "z" + etag // a rare allocation beside the formatting it saves
	}
	s := &m.slots[maphash.String(m.seed, key)%uint64(len(m.slots))]
	if p := s.Load(); p != nil && p.key == key {
		return p.vals
	}
	v := []string{etag}
	if zipped {
		v[0] = gzipETag(etag)
	}
	s.Store(&memoSlot{key: key, vals: v})
	return v
}
