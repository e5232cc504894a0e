package server

import (
	"hash/maphash"
	"sync/atomic"

	"github.com/prodapi/prodapi/server/query"
	"github.com/prodapi/prodapi/sources"
)

// queryMemo remembers recently parsed queries by resource, id and raw
// query string, so that a hit asked again and again does not parse its
// parameters (and build its search body) each time: a 25-item list hit
// costs 10-19% more CPU without it (BENCHMARKS.md). It is lock-free
// and fixed in size: a slot holds the last query that hashed to it; a
// miss parses. Only queries that parsed are kept, and a Query is never
// modified once parsed (the cache's own contract), so requests may share
// one.
type queryMemo struct {
	seed    maphash.Seed
	cursors *query.Cursors
	slots   [4096]atomic.Pointer[querySlot]
}

type querySlot struct {
	res     *sources.Resource
	id, raw string
	q       *sources.Query
}

func newQueryMemo(c *query.Cursors) *queryMemo {
	return &queryMemo{seed: maphash.MakeSeed(), cursors: c}
}

// parse is Cursors.Parse, memoised.
func (m *queryMemo) parse(res *sources.Resource, id, raw string) (*sources.Query, error) {
	// The resource is part of the slot: otherwise every resource's plain
	// list (no id, no query) would share one slot and evict the others.
	h := (maphash.String(m.seed, res.Name)*31+maphash.String(m.seed, id))*31 + maphash.String(m.seed, raw)
	s := &m.slots[h%uint64(len(m.slots))]
	if p := s.Load(); p != nil && p.res == res && p.id == id && p.raw == raw {
		return p.q, nil
	}
	q, err := m.cursors.Parse(res, id, raw)
	if err != nil {
		return nil, err
	}
	if q.Cursor != nil && q.Cursor.After != nil {
		// A cursor expires: it is judged again each time it comes. Each
		// is asked for about once anyway, by the client walking.
		return q, nil
	}
	s.Store(&querySlot{res: res, id: id, raw: raw, q: q})
	return q, nil
}
