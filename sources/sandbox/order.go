package sandbox

import (
	"cmp"
	"errors"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/bsonorder"
	"github.com/prodapi/prodapi/sources/codec"
)

// Orders and the fields queries read.
//
// A search sorted on fields (no _score, no nested filter) and without
// aggregations pages through the collection's order for that sort: the
// documents sorted once, with their sort keys, kept by the collection
// (coll.sorted) and rebuilt when a reload changes it. A page is then the
// documents after the position (search_after or the cursor's) that match
// the query, found in that order; the total counts matches until it
// reaches the request's limit. Document lists do the same with MongoDB's
// order (bsonorder), their total being exact. A query that reads no field
// (match_all, an empty where) reads no document; one that reads some
// fields decodes only those (fieldSet); the rest decode whole documents.

// A fieldSet is the top-level fields a query, a sort or an aggregation
// reads; all when it reads every field (or cannot tell).
type fieldSet struct {
	names []string
	all   bool
}

func (fs *fieldSet) add(name string) {
	if !slices.Contains(fs.names, name) {
		fs.names = append(fs.names, name)
	}
}

func (fs *fieldSet) ref(f fieldRef) {
	switch {
	case f.all || f.pattern:
		fs.all = true
	case f.isID:
		fs.add("_id")
	default:
		fs.add(f.segs[0])
	}
}

// none reports whether nothing is read: the query's answer is the same
// for every document.
func (fs *fieldSet) none() bool { return !fs.all && len(fs.names) == 0 }

// query adds the fields q reads.
func (fs *fieldSet) query(q query) {
	switch q := q.(type) {
	case nil, constQ:
	case boolQ:
		for _, list := range [][]query{q.must, q.filter, q.should, q.mustNot} {
			for _, m := range list {
				fs.query(m)
			}
		}
	case disMaxQ:
		for _, m := range q.qs {
			fs.query(m)
		}
	case constantScoreQ:
		fs.query(q.q)
	case constantBoost:
		fs.query(q.q)
	case termQ:
		fs.ref(q.f)
	case existsQ:
		fs.ref(q.f)
	case patternQ:
		fs.ref(q.f)
	case rangeQ:
		fs.ref(q.f)
	case *matchQ:
		for _, f := range q.fields {
			fs.ref(f)
		}
	case idsQ:
		fs.add("_id")
	case nestedQ:
		fs.add(q.segs[0])
		fs.query(q.q)
	default:
		fs.all = true
	}
}

func (fs *fieldSet) sorts(specs []sortSpec) {
	for _, s := range specs {
		if s.kind != sortField {
			continue
		}
		fs.ref(s.f)
		if s.nestedPath != "" {
			fs.add(s.nestedSegs[0])
			fs.query(s.nestedFilter)
		}
	}
}

func (fs *fieldSet) aggs(specs []*aggSpec) {
	for _, a := range specs {
		fs.ref(a.field)
		fs.aggs(a.sub)
	}
}

// filter adds the fields a MongoDB filter reads.
func (fs *fieldSet) filter(f *sources.Doc) {
	for _, fl := range f.Fields() {
		switch fl.Key {
		case "$and", "$or", "$nor":
			list, _ := normalize(fl.Value).([]any)
			for _, e := range list {
				if sub, ok := e.(*sources.Doc); ok {
					fs.filter(sub)
				} else {
					fs.all = true
				}
			}
		default:
			if strings.HasPrefix(fl.Key, "$") {
				fs.all = true
				continue
			}
			head, _, _ := strings.Cut(fl.Key, ".")
			fs.add(head)
		}
	}
}

// pick is d with only the fields of fs.
func (fs *fieldSet) pick(d *sources.Doc) *sources.Doc {
	if fs.all {
		return d
	}
	out := make([]sources.Field, 0, len(fs.names))
	for _, f := range d.Fields() {
		if slices.Contains(fs.names, f.Key) {
			out = append(out, f)
		}
	}
	return sources.NewDoc(out...)
}

// read decodes what fs reads of document i of set.
func (fs *fieldSet) read(set docSet, i int) (*sources.Doc, error) {
	return set.fields(i, fs.names, fs.all)
}

// orderable reports whether a search's sort gives every document its
// keys whatever the query: no _score, no nested filter.
func orderable(specs []sortSpec) bool {
	for _, s := range specs {
		if s.kind == sortScore || s.nestedFilter != nil {
			return false
		}
	}
	return true
}

// A hitOrder is the non-nil documents of a set sorted as sortHits sorts
// hits: pos are their indexes, keys their sort keys (len(specs) each).
// failed is set when some document's keys could not be computed: pages
// then sort their hits as before, which fails only when a hit is one of
// those documents.
type hitOrder struct {
	pos    []int32
	keys   []sortKey
	failed bool
}

func (env *searchEnv) buildOrder(set docSet, specs []sortSpec) (*hitOrder, error) {
	var need fieldSet
	need.sorts(specs)
	need.add("_id")
	k := len(specs)
	type part struct {
		hitOrder
		ids []string
	}
	parts, err := inParts(set.size(), 4096, func(lo, hi int) (part, error) {
		c := &evalCtx{env: env}
		o := part{hitOrder: hitOrder{pos: make([]int32, 0, hi-lo), keys: make([]sortKey, 0, (hi-lo)*k)}, ids: make([]string, 0, hi-lo)}
		for i := lo; i < hi; i++ {
			d, err := need.read(set, i)
			if err != nil {
				return o, err
			}
			if d == nil {
				continue
			}
			for j := range specs {
				key := sortKey{num: float64(i)} // _doc
				if specs[j].kind == sortField {
					if key, err = c.sortValue(d, &specs[j]); err != nil {
						o.failed = true
					}
				}
				o.keys = append(o.keys, key)
			}
			id, _ := d.Get("_id")
			s, _ := sources.IDString(normalize(id))
			o.ids = append(o.ids, s)
			o.pos = append(o.pos, int32(i))
		}
		return o, nil
	})
	if err != nil {
		return nil, err
	}
	var all part
	for _, p := range parts {
		all.pos = append(all.pos, p.pos...)
		all.keys = append(all.keys, p.keys...)
		all.ids = append(all.ids, p.ids...)
		all.failed = all.failed || p.failed
	}
	perm := sortedPerm(len(all.pos), func(a, b int) int {
		if c := compareHitKeys(all.keys[a*k:(a+1)*k], all.keys[b*k:(b+1)*k], specs); c != 0 {
			return c
		}
		return strings.Compare(all.ids[a], all.ids[b])
	})
	o := &hitOrder{pos: make([]int32, len(perm)), keys: make([]sortKey, 0, len(all.keys)), failed: all.failed}
	for p, q := range perm {
		o.pos[p] = all.pos[q]
		o.keys = append(o.keys, all.keys[q*k:(q+1)*k]...)
	}
	return o, nil
}

// inParts runs part over [0, n) cut in as many runs as there are
// processors, each of grain or more, at once, and returns their results
// in order.
func inParts[T any](n, grain int, part func(lo, hi int) (T, error)) ([]T, error) {
	parts := max(min(runtime.GOMAXPROCS(0), n/grain), 1)
	out := make([]T, parts)
	errs := make([]error, parts)
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() { out[p], errs[p] = part(p*n/parts, (p+1)*n/parts) })
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// sortedPerm returns 0..n-1 sorted by compare, ties in index order: a
// stable sort's order.
func sortedPerm(n int, compare func(a, b int) int) []int {
	perm := make([]int, n)
	for p := range perm {
		perm[p] = p
	}
	slices.SortFunc(perm, func(a, b int) int {
		if c := compare(a, b); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	return perm
}

// searchInOrder answers a search whose sort is orderable and that has no
// aggregations from the set's order for the sort (name names it).
func (env *searchEnv) searchInOrder(set docSet, req *searchReq, name string) (*sources.Result, [][]any, error) {
	v, err := set.sorted("search "+name, func() (any, error) { return env.buildOrder(set, req.sort) })
	if err != nil {
		return nil, nil, err
	}
	o := v.(*hitOrder)
	if o.failed {
		return env.scan(set, req)
	}
	k := len(req.sort)
	keysAt := func(p int) []sortKey { return o.keys[p*k : (p+1)*k] }
	start := 0
	if req.after != nil {
		after, err := env.afterKeys(req.after)
		if err != nil {
			return nil, nil, err
		}
		start = sort.Search(len(o.pos), func(p int) bool { return compareHitKeys(keysAt(p), after, req.sort) > 0 })
	}
	var need fieldSet
	need.query(req.query)
	need.query(req.post)
	// match tells which documents at positions [lo, hi) the query (and
	// post_filter) takes, in parts at once.
	match := func(lo, hi int) ([]bool, error) {
		parts, err := inParts(hi-lo, 256, func(plo, phi int) ([]bool, error) {
			c := &evalCtx{env: env}
			out := make([]bool, phi-plo)
			for j := range out {
				d := sources.NewDoc()
				if !need.none() {
					var err error
					if d, err = need.read(set, int(o.pos[lo+plo+j])); err != nil {
						return nil, err
					}
				}
				ok, _ := req.query.eval(c, d)
				if ok && req.post != nil {
					ok, _ = req.post.eval(c, d)
				}
				out[j] = ok
			}
			return out, nil
		})
		return slices.Concat(parts...), err
	}
	constant, every := need.none(), false // a query that reads no field takes every document or none
	if constant && len(o.pos) > 0 {
		ok, err := match(0, 1)
		if err != nil {
			return nil, nil, err
		}
		every = ok[0]
	}
	counted := func(n int) bool { return req.totalLimit >= 0 && n >= req.totalLimit }
	pg := pager{start: start, skip: req.from, size: req.size}
	// In batches that grow: a page of common matches needs few documents,
	// a count of rare ones all of them.
	for p, batch := 0, 1024; p < len(o.pos); batch = min(2*batch, 16384) {
		if p < start && counted(pg.total) {
			p = start // the total is known: on to the page
			continue
		}
		if p >= start && len(pg.page) == req.size && counted(pg.total) {
			break
		}
		hi := min(p+batch, len(o.pos))
		if p < start {
			hi = min(hi, start)
		}
		var ok []bool
		if !constant {
			if ok, err = match(p, hi); err != nil {
				return nil, nil, err
			}
		}
		for q := p; q < hi; q++ {
			if constant && every || !constant && ok[q-p] {
				pg.add(q)
			}
		}
		p = hi
	}
	res := &sources.Result{Total: pg.total}
	if req.totalLimit >= 0 {
		res.Total = min(pg.total, req.totalLimit)
	}
	values := make([][]any, len(pg.page))
	for i, p := range pg.page {
		values[i] = sortValuesOf(keysAt(p))
	}
	res.Docs, err = decodePage(set, pg.page, o.pos, req.src.apply)
	return res, values, err
}

// A pager takes a page out of the matches of a query met in an order:
// those at positions from start on, skip of them skipped, size at most
// (-1: no bound). It counts them all.
type pager struct {
	start, skip, size int
	total             int
	page              []int
	more              bool // a match follows the page
}

func (pg *pager) add(p int) {
	pg.total++
	switch {
	case p < pg.start:
	case pg.skip > 0:
		pg.skip--
	case pg.size < 0 || len(pg.page) < pg.size:
		pg.page = append(pg.page, p)
	default:
		pg.more = true
	}
}

// decodePage decodes the documents at positions page of an order (pos),
// shaped by shape, in parts at once: a page of 500 large documents is
// most of the time a walk's page takes here.
func decodePage(set docSet, page []int, pos []int32, shape func(*sources.Doc) *sources.Doc) ([]*sources.Doc, error) {
	docs := make([]*sources.Doc, len(page))
	_, err := inParts(len(page), 64, func(lo, hi int) (struct{}, error) {
		for i := lo; i < hi; i++ {
			d, err := set.doc(int(pos[page[i]]))
			if err != nil {
				return struct{}{}, err
			}
			docs[i] = shape(d)
		}
		return struct{}{}, nil
	})
	return docs, err
}

// sortJSON names a search's sort, for its order.
func sortJSON(body *sources.Doc) string {
	v, _ := body.Get("sort")
	return string(codec.AppendJSON(nil, v))
}

// A docOrder is a document list's order: the set's documents sorted as
// bsonorder.SortDocs sorts them, pos their indexes, keys their DocKeys
// (len(keys) each).
type docOrder struct {
	pos  []int32
	keys []any
}

// documentOrder returns set's order over keys (bsonorder.WalkKeys').
func documentOrder(set docSet, keys []sources.SortKey) (*docOrder, error) {
	v, err := set.sorted("documents "+keysName(keys), func() (any, error) {
		var need fieldSet
		for _, k := range keys {
			head, _, _ := strings.Cut(k.Field, ".")
			need.add(head)
		}
		k := len(keys)
		parts, err := inParts(set.size(), 4096, func(lo, hi int) ([]any, error) {
			out := make([]any, 0, (hi-lo)*k)
			for i := lo; i < hi; i++ {
				d, err := need.read(set, i)
				if err != nil {
					return nil, err
				}
				out = append(out, bsonorder.DocKeys(d, keys)...)
			}
			return out, nil
		})
		if err != nil {
			return nil, err
		}
		all := slices.Concat(parts...)
		perm := sortedPerm(set.size(), func(a, b int) int {
			return bsonorder.CompareKeys(all[a*k:(a+1)*k], all[b*k:(b+1)*k], keys)
		})
		o := &docOrder{pos: make([]int32, len(perm)), keys: make([]any, 0, len(all))}
		for p, q := range perm {
			o.pos[p] = int32(q)
			o.keys = append(o.keys, all[q*k:(q+1)*k]...)
		}
		return o, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*docOrder), nil
}

// keysName names a document order.
func keysName(keys []sources.SortKey) string {
	a := make([]any, len(keys))
	for i, k := range keys {
		a[i] = []any{k.Field, k.Desc}
	}
	return string(codec.AppendJSON(nil, a))
}
