package sandbox

import (
	"sync"

	"github.com/prodapi/prodapi/sources"
)

// A docSet is the documents a list, a search or a lookup reads, in load
// order: a Store's collection, whose documents are text decoded as they
// are read, or the decoded documents Search is given.
type docSet interface {
	size() int
	// doc decodes document i; nil when there is none (Search's docs may
	// hold nil).
	doc(i int) (*sources.Doc, error)
	// fields decodes the top-level fields names of document i (see
	// text.project); all of them when all is set.
	fields(i int, names []string, all bool) (*sources.Doc, error)
	// sorted returns the order named key: what build returns, which the
	// set keeps for later calls when it keeps orders.
	sorted(key string, build func() (any, error)) (any, error)
}

// docSlice is Search's documents.
type docSlice []*sources.Doc

func (s docSlice) size() int                                              { return len(s) }
func (s docSlice) doc(i int) (*sources.Doc, error)                        { return s[i], nil }
func (s docSlice) fields(i int, _ []string, _ bool) (*sources.Doc, error) { return s[i], nil }
func (s docSlice) sorted(_ string, build func() (any, error)) (any, error) {
	return build()
}

// A coll is one collection of a Store: its documents as text, in the
// order of its file, found by _id, and the orders lists and walks have
// asked for so far.
type coll struct {
	docs   []stored
	ids    map[idKey]int32
	orders orderCache
}

// stored is one document: its text, its _id, and where its indexed
// fields are in the text.
type stored struct {
	text  text
	id    idKey
	spans [len(indexed)]span
}

func (c *coll) size() int {
	if c == nil {
		return 0
	}
	return len(c.docs)
}

func (c *coll) doc(i int) (*sources.Doc, error) { return c.docs[i].text.decode() }

func (c *coll) fields(i int, names []string, all bool) (*sources.Doc, error) {
	if all {
		return c.doc(i)
	}
	d := &c.docs[i]
	return d.text.project(names, &d.spans)
}

func (c *coll) sorted(key string, build func() (any, error)) (any, error) {
	return c.orders.get(key, build)
}

// byID finds a document by _id; a 24-hex id matches an ObjectID and,
// failing that, the string.
func (c *coll) byID(id string) (int, bool) {
	if c == nil {
		return 0, false
	}
	if oid, ok := sources.ParseObjectID(id); ok {
		if i, ok := c.ids[idKey{oid: oid, isOID: true}]; ok {
			return int(i), true
		}
	}
	i, ok := c.ids[idKey{str: id}]
	return int(i), ok
}

// maxOrders bounds the orders (and lookup columns) a collection keeps:
// each costs some 70 bytes a document, and clients may ask for any sort.
const maxOrders = 6

// An orderCache keeps the orders a collection was listed in and the
// columns it was looked up by, built on first use; beyond maxOrders the
// one used longest ago goes.
type orderCache struct {
	mu    sync.Mutex
	m     map[string]*orderEntry
	clock uint64
}

type orderEntry struct {
	once sync.Once
	v    any
	err  error
	used uint64 // the cache's clock when last asked for; under mu
}

func (oc *orderCache) get(key string, build func() (any, error)) (any, error) {
	oc.mu.Lock()
	if oc.m == nil {
		oc.m = map[string]*orderEntry{}
	}
	e, ok := oc.m[key]
	if !ok {
		if len(oc.m) >= maxOrders {
			var oldest string
			for k, o := range oc.m {
				if oldest == "" || o.used < oc.m[oldest].used {
					oldest = k
				}
			}
			delete(oc.m, oldest)
		}
		e = &orderEntry{}
		oc.m[key] = e
	}
	oc.clock++
	e.used = oc.clock
	oc.mu.Unlock()
	e.once.Do(func() { e.v, e.err = build() })
	return e.v, e.err
}
