package cache

import (
	lst "container/list"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prodapi/prodapi/server/metrics"
)

// local is the in-process tier: entries by key, bounded in bytes, evicted
// in least-recently-used order with a second chance (CLOCK), so that a
// lookup takes no lock at all: items is a sync.Map, and mu serializes
// only puts and evictions.
//
// A record is served as a hit until its localUntil: at most LocalTTL
// after it was put there (so replicas converge on what Redis holds) and
// never past the entry's freshness. After that it stays, while room
// allows and until the entry's serve-stale window ends, only as a
// fallback for when Redis cannot be asked or the backend fails. Without
// Redis the tier is the cache, and serves entries for their whole
// freshness.
type local struct {
	max    int64         // bytes; 0 disables the tier
	ttl    time.Duration // LocalTTL
	shared bool          // there is a Redis tier to converge with

	items sync.Map // key → *record

	mu    sync.Mutex // guards the rest
	bytes int64
	n     int
	order lst.List // of *record, most recently put or re-referenced first
	// tagged indexes the records by their entries' tags, so that an
	// invalidation removes exactly the records it obsoletes. Its memory
	// is charged to the records (entry.tagBytes).
	tagged map[string]map[*record]struct{}

	bytesGauge *metrics.Gauge
	entries    *metrics.Gauge
	evictions  *metrics.Counter
}

// A record is one key's entry in the tier. Only ref changes after it is
// created; a put replaces the whole record.
type record struct {
	key        string
	e          *entry
	localUntil time.Time
	size       int64
	ref        atomic.Bool // read since it was last considered for eviction
	el         *lst.Element
	hit        atomic.Pointer[hitMemo] // the hit answered during one second of ttl (hitmemo.go)
}

func newLocal(max int64, ttl time.Duration, shared bool, m *series) *local {
	l := &local{max: max, ttl: ttl, shared: shared}
	if m != nil {
		l.bytesGauge, l.entries, l.evictions = m.localBytes, m.localEntries, m.localEvictions
	}
	return l
}

// get returns the record of key, or nil if there is none or its entry's
// serve-stale window has ended.
func (l *local) get(key string, now time.Time) *record {
	if l.max <= 0 {
		return nil
	}
	v, ok := l.items.Load(key)
	if !ok {
		return nil
	}
	r := v.(*record)
	if !r.e.isUsable(now) {
		return nil
	}
	if !r.ref.Load() {
		r.ref.Store(true)
	}
	return r
}

// getBytes is get for a key still in its buffer (appendKey): the lookup
// reads the bytes in place, so that a hit makes no string of its key.
// The string view lives only during get, which keeps no reference to it
// (sync.Map's Load compares its key and drops it), and the buffer does
// not change meanwhile.
func (l *local) getBytes(key []byte, now time.Time) *record {
	return l.get(unsafe.String(unsafe.SliceData(key), len(key)), now)
}

// put stores e under key at now, evicting what it must to stay within
// the bound. An entry larger than the whole tier is not kept (and
// replaces nothing).
func (l *local) put(key string, e *entry, now time.Time) {
	l.putUnless(key, e, now, nil)
}

// until is when an entry put at now stops being served as a hit: LocalTTL
// later at most, when there is Redis to converge with, and never past
// its freshness.
func (l *local) until(e *entry, now time.Time) time.Time {
	until := e.freshUntil()
	if local := now.Add(l.ttl); l.shared && local.Before(until) {
		until = local
	}
	return until
}

// putUnless is put, unless obsolete reports true; it reports whether
// obsolete stopped it. obsolete runs under the tier's lock, so that no
// invalidation slips between its answer and the put.
func (l *local) putUnless(key string, e *entry, now time.Time, obsolete func() bool) bool {
	localUntil := l.until(e, now)
	size := e.size() + e.tagBytes() + int64(len(key)) + 100
	l.mu.Lock()
	defer l.mu.Unlock()
	if obsolete != nil && obsolete() {
		return true
	}
	if l.max <= 0 || size > l.max {
		return false
	}
	r := &record{key: key, e: e, localUntil: localUntil, size: size}
	if old, ok := l.items.Load(key); ok {
		l.removeLocked(old.(*record))
	}
	r.el = l.order.PushFront(r)
	l.items.Store(key, r)
	for _, t := range e.tags {
		if t == tagAll {
			continue // invalidate empties the tier for it: no index to keep
		}
		set := l.tagged[t]
		if set == nil {
			if l.tagged == nil {
				l.tagged = map[string]map[*record]struct{}{}
			}
			set = map[*record]struct{}{}
			l.tagged[t] = set
		}
		set[r] = struct{}{}
	}
	l.n++
	l.bytes += size
	for l.bytes > l.max {
		back := l.order.Back()
		victim := back.Value.(*record)
		if victim != r && victim.ref.Load() {
			victim.ref.Store(false)
			l.order.MoveToFront(back)
			continue
		}
		l.removeLocked(victim)
		l.evictions.Inc()
	}
	l.bytesGauge.Set(float64(l.bytes))
	l.entries.Set(float64(l.n))
	return false
}

func (l *local) removeLocked(r *record) {
	for _, t := range r.e.tags {
		if set := l.tagged[t]; set != nil {
			delete(set, r)
			if len(set) == 0 {
				delete(l.tagged, t)
			}
		}
	}
	l.order.Remove(r.el)
	l.items.Delete(r.key)
	l.n--
	l.bytes -= r.size
}

// invalidate removes every record whose entry carries one of tags; the
// tag "all" empties the tier.
func (l *local) invalidate(tags []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, t := range tags {
		if t == tagAll {
			l.clearLocked()
			break
		}
		for r := range l.tagged[t] {
			l.removeLocked(r)
		}
	}
	l.bytesGauge.Set(float64(l.bytes))
	l.entries.Set(float64(l.n))
}

// clear empties the tier: after a lost subscription, when invalidations
// may have been missed.
func (l *local) clear() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.clearLocked()
	l.bytesGauge.Set(float64(l.bytes))
	l.entries.Set(float64(l.n))
}

func (l *local) clearLocked() {
	for el := l.order.Front(); el != nil; {
		next := el.Next()
		l.removeLocked(el.Value.(*record))
		el = next
	}
}

// len reports the number of records, for tests.
func (l *local) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}
