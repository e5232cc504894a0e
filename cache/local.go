package cache

import (
	lst "container/list"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prodapi/prodapi/server/render"
	"github.com/prodapi/prodapi/sources/metrics"
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
// fallback for when Redis cannot be asked or the backend fails.
type local struct {
	max int64 // bytes; 0 disables the tier

	items sync.Map // key → *record

	mu    sync.Mutex // guards the rest
	bytes int64
	n     int
	order lst.List // of *record, most recently put or re-referenced first

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
	hit        atomic.Pointer[hitMemo] // the hit answered during one second of ttl
}

// A hitMemo is the Representation of a local hit, shared by every hit on
// the record while its Cache-Status ttl stays the same: a hit then
// allocates no Representation and no Cache-Status.
type hitMemo struct {
	ttl int64
	rep *render.Representation
}

func newLocal(max int64, m *series) *local {
	l := &local{max: max}
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

// put stores e under key, servable as a hit until localUntil, evicting
// what it must to stay within the bound. An entry larger than the whole
// tier is not kept (and replaces nothing).
func (l *local) put(key string, e *entry, localUntil time.Time) {
	size := e.size() + int64(len(key)) + 100
	if l.max <= 0 || size > l.max {
		return
	}
	r := &record{key: key, e: e, localUntil: localUntil, size: size}
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.items.Load(key); ok {
		l.removeLocked(old.(*record))
	}
	r.el = l.order.PushFront(r)
	l.items.Store(key, r)
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
}

func (l *local) removeLocked(r *record) {
	l.order.Remove(r.el)
	l.items.Delete(r.key)
	l.n--
	l.bytes -= r.size
}

// len reports the number of records, for tests.
func (l *local) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}
