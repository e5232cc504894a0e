// Package render turns a query into its representation: it reads the
// backend, has the enricher shape the documents, applies the client's
// projection inside the resource's (sources.Query.Project), adds Eve's
// _links and encodes the JSON. cmd/prodapi hands the Renderer to the
// cache as its loader, so a request goes server → cache → render →
// enrich and sources, and never comes back up: this package imports
// neither server nor cache, and what it produces
// (sources.Representation) is named beneath all of them.
//
// A cursor walk's next pages are read ahead (Options.ReadAhead, see
// readAhead): rendered in the background while the client reads the
// page before, and handed to the request for them.
package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// A Reader is the part of a backend the renderer needs: details and lists.
type Reader interface {
	sources.Getter
	sources.Finder
}

// An EnrichFunc shapes documents and computes their enrichment links: in
// prodapi, enrich.Enricher's Enrich. It returns, per document, the links
// to add after self/parent/collection; missing names the optional steps
// that failed.
type EnrichFunc func(ctx context.Context, res *sources.Resource, docs []*sources.Doc, detail bool) (links []*sources.Doc, missing []string, err error)

// A Renderer produces the representation of a query: it reads the
// backend, enriches, projects, adds _links and encodes the JSON. It is
// the loader the cache wraps.
type Renderer struct {
	store  Reader
	enrich EnrichFunc
	bufs   sync.Pool  // *[]byte: encoding buffers
	ahead  *readAhead // nil: no walk is read ahead
}

// Options tune a Renderer. The zero value reads nothing ahead.
type Options struct {
	// ReadAhead is how many pages a cursor walk is read ahead of its
	// client (see readAhead); 0 or less: none.
	ReadAhead int
	// Now is the clock a page read ahead is aged by; nil means time.Now.
	Now func() time.Time
	// Invalidations counts the invalidations the cache in front has
	// applied (cache.Cache.Invalidations): a page read ahead is served
	// only if it did not move since the reading began. Nil: none ever
	// happen.
	Invalidations func() uint64
}

// New returns a renderer reading store and shaping with enrich.
func New(store Reader, enrich EnrichFunc) *Renderer {
	return NewWithOptions(store, enrich, Options{})
}

// NewWithOptions returns a renderer reading store and shaping with
// enrich, tuned by opts.
func NewWithOptions(store Reader, enrich EnrichFunc, opts Options) *Renderer {
	rd := &Renderer{store: store, enrich: enrich}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Invalidations == nil {
		opts.Invalidations = func() uint64 { return 0 }
	}
	rd.ahead = newReadAhead(opts.ReadAhead, opts.Now, opts.Invalidations, rd.page)
	return rd
}

// Load renders q. A missing detail is a 404 representation; other
// failures are errors.
func (rd *Renderer) Load(ctx context.Context, q *sources.Query) (*sources.Representation, error) {
	if q.IsDetail() {
		return rd.detail(ctx, q)
	}
	return rd.list(ctx, q)
}

func (rd *Renderer) detail(ctx context.Context, q *sources.Query) (*sources.Representation, error) {
	res := q.Resource
	doc, err := rd.store.Get(ctx, res, q.ID)
	if errors.Is(err, sources.ErrNotFound) {
		return notFound(), nil
	}
	if err != nil {
		return nil, fmt.Errorf("render: reading %s/%s: %w", res.Name, q.ID, err)
	}
	modified := updated(doc)
	links, missing, err := rd.enrich(ctx, res, []*sources.Doc{doc}, true)
	if err != nil {
		return nil, fmt.Errorf("render: enriching %s/%s: %w", res.Name, q.ID, err)
	}
	return rd.renderDetail(q, doc, modified, links[0], missing), nil
}

// notFound is the representation of a missing detail.
func notFound() *sources.Representation {
	return &sources.Representation{Status: http.StatusNotFound, Total: -1}
}

// renderDetail renders doc, enriched (links), as the detail q asks for.
func (rd *Renderer) renderDetail(q *sources.Query, doc *sources.Doc, modified time.Time, links *sources.Doc, missing []string) *sources.Representation {
	res := q.Resource
	q.Project(doc) // _links come after, never projected away
	if !res.NoLinks {
		l := itemLinks(q, docID(doc, q.ID))
		appendLinks(l, []*sources.Doc{links}, 0)
		setLast(doc, "_links", l)
	}
	rep := rd.encode(doc, q.Pretty)
	rep.Total = -1
	rep.LastModified = modified
	rep.Missing = missing
	rep.Docs = linkedDocs(append(make([]string, 0, 4), res.Name+"/"+q.ID), []*sources.Doc{links})
	return rep
}

// LoadMany renders several details at once (cache.BatchLoader): per
// resource, one lookup of their ids on the document database when the
// store is a sources.Looker (a Get each otherwise), one enrichment for
// the batch, as a list page has, and each document rendered as its
// detail, Load's answer for it. reps[i] answers qs[i]: a 404
// representation for a document that does not exist. A query that is
// not a detail is loaded on its own.
func (rd *Renderer) LoadMany(ctx context.Context, qs []*sources.Query) ([]*sources.Representation, error) {
	reps := make([]*sources.Representation, len(qs))
	byRes := map[*sources.Resource][]int{}
	var order []*sources.Resource
	for i, q := range qs {
		if !q.IsDetail() {
			rep, err := rd.Load(ctx, q)
			if err != nil {
				return nil, err
			}
			reps[i] = rep
			continue
		}
		if _, ok := byRes[q.Resource]; !ok {
			order = append(order, q.Resource)
		}
		byRes[q.Resource] = append(byRes[q.Resource], i)
	}
	for _, res := range order {
		if err := rd.details(ctx, res, qs, byRes[res], reps); err != nil {
			return nil, err
		}
	}
	return reps, nil
}

// details renders the details qs[at...] of res into reps.
func (rd *Renderer) details(ctx context.Context, res *sources.Resource, qs []*sources.Query, at []int, reps []*sources.Representation) error {
	found, err := rd.getMany(ctx, res, qs, at)
	if err != nil {
		return err
	}
	// One enrichment for the batch: each document once, however many
	// queries name it.
	var docs []*sources.Doc
	index := map[*sources.Doc]int{}
	for _, d := range found {
		if _, ok := index[d]; d != nil && !ok {
			index[d] = len(docs)
			docs = append(docs, d)
		}
	}
	modified := make([]time.Time, len(docs))
	for i, d := range docs {
		modified[i] = updated(d)
	}
	links, missing, err := rd.enrich(ctx, res, docs, true)
	if err != nil {
		return fmt.Errorf("render: enriching %s: %w", res.Name, err)
	}
	uses := map[*sources.Doc]int{}
	for _, d := range found {
		uses[d]++
	}
	for k, i := range at {
		d := found[k]
		if d == nil {
			reps[i] = notFound()
			continue
		}
		n := index[d]
		if uses[d]--; uses[d] > 0 {
			d = d.Clone() // rendering projects the document in place: the last use takes it
		}
		reps[i] = rd.renderDetail(qs[i], d, modified[n], links[n], missing)
	}
	return nil
}

// getMany reads the documents of the details qs[at...] of res, as Get
// reads each (a 24-hex id matches an ObjectID _id and, failing that, a
// string one): nil for one that does not exist. Documents named twice
// are read once.
func (rd *Renderer) getMany(ctx context.Context, res *sources.Resource, qs []*sources.Query, at []int) ([]*sources.Doc, error) {
	found := make([]*sources.Doc, len(at))
	lk, ok := rd.store.(sources.Looker)
	if !ok {
		for k, i := range at {
			d, err := rd.store.Get(ctx, res, qs[i].ID)
			switch {
			case errors.Is(err, sources.ErrNotFound):
			case err != nil:
				return nil, fmt.Errorf("render: reading %s/%s: %w", res.Name, qs[i].ID, err)
			default:
				found[k] = d
			}
		}
		return found, nil
	}
	var ids []any
	seen := map[string]bool{}
	for _, i := range at {
		if id := qs[i].ID; !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	docs, err := lk.Lookup(ctx, sources.Lookup{Collection: res.Collection, Field: "_id", Values: ids})
	if err != nil {
		return nil, fmt.Errorf("render: reading %d documents of %s: %w", len(ids), res.Name, err)
	}
	byOID := map[sources.ObjectID]*sources.Doc{}
	byString := map[string]*sources.Doc{}
	for _, d := range docs {
		switch id, _ := d.Get("_id"); id := id.(type) {
		case sources.ObjectID:
			byOID[id] = d
		case string:
			byString[id] = d
		}
	}
	for k, i := range at {
		id := qs[i].ID
		if oid, ok := sources.ParseObjectID(id); ok && byOID[oid] != nil {
			found[k] = byOID[oid]
		} else {
			found[k] = byString[id]
		}
	}
	return found, nil
}

// list renders a list: a page of a cursor walk read ahead when there is
// one (readAhead), else rendered here, and then the walk's next pages
// read ahead.
func (rd *Renderer) list(ctx context.Context, q *sources.Query) (*sources.Representation, error) {
	if rep, ok := rd.ahead.take(ctx, q); ok {
		return rep, nil
	}
	return rd.page(ctx, q, func(next *sources.Query) { rd.ahead.follow(ctx, next) })
}

// page renders a list page. When it is a cursor walk's with a page after
// it, it tells onNext that page's query as soon as it is known: when the
// backend's answer shows it (sources.Cursor.Early), before it is even
// decoded, or else when the backend returns; before this page is
// enriched and rendered either way.
func (rd *Renderer) page(ctx context.Context, q *sources.Query, onNext func(*sources.Query)) (*sources.Representation, error) {
	res := q.Resource
	find := q
	var early *sources.Query
	if q.Cursor != nil && rd.ahead != nil {
		c, f := *q.Cursor, *q
		c.Early = func(pos sources.Position) {
			if n, err := nextQuery(q, pos); err == nil {
				early = n
				onNext(n)
			}
		}
		f.Cursor = &c
		find = &f
	}
	result, err := rd.store.Find(ctx, find)
	if err != nil {
		return nil, fmt.Errorf("render: listing %s: %w", res.Name, err)
	}
	pl, meta, next, err := pageLinks(q, result, early)
	if err != nil {
		return nil, fmt.Errorf("render: listing %s: %w", res.Name, err)
	}
	if next != nil && next != early {
		onNext(next)
	}
	var modified time.Time
	for _, d := range result.Docs {
		if t := updated(d); t.After(modified) {
			modified = t
		}
	}
	links, missing, err := rd.enrich(ctx, res, result.Docs, false)
	if err != nil {
		return nil, fmt.Errorf("render: enriching %s: %w", res.Name, err)
	}
	items := make([]any, len(result.Docs))
	for i, d := range result.Docs {
		q.Project(d)
		if !res.NoLinks {
			l := sources.NewDoc(sources.Field{Key: "self", Value: sources.Link(res.ItemTitle, res.Name+"/"+docID(d, ""))})
			appendLinks(l, links, i)
			setLast(d, "_links", l)
		}
		items[i] = d
	}
	env := sources.NewDoc(
		sources.Field{Key: "_items", Value: items},
		sources.Field{Key: "_links", Value: pl},
		sources.Field{Key: "_meta", Value: meta},
	)
	if result.Aggregations != nil {
		env.Set("_aggregations", result.Aggregations)
	}
	rep := rd.encode(env, q.Pretty)
	rep.Total = result.Total
	rep.LastModified = modified
	rep.Missing = missing
	docs := make([]string, 0, 2*len(result.Docs))
	for _, d := range result.Docs {
		if id := docID(d, ""); id != "" {
			docs = append(docs, res.Name+"/"+id)
		}
	}
	rep.Docs = linkedDocs(docs, links)
	return rep, nil
}

// linkedDocs appends to docs the "resource/id" hrefs of the enrichment
// links, which may be single links or lists of them.
func linkedDocs(docs []string, links []*sources.Doc) []string {
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case *sources.Doc:
			if h, ok := v.Get("href"); ok {
				if s, ok := h.(string); ok && s != "" {
					docs = append(docs, s)
				}
				return
			}
			for _, f := range v.Fields() {
				walk(f.Value)
			}
		case []*sources.Doc:
			for _, d := range v {
				walk(d)
			}
		case []any:
			for _, d := range v {
				walk(d)
			}
		}
	}
	for _, l := range links {
		walk(l)
	}
	return docs
}

// encode renders v into a scratch buffer and returns it in a body of
// exactly its size: a 25-item list is 70 KB, and appending it to a
// growing slice allocated three times that in the copies it left behind.
func (rd *Renderer) encode(v any, pretty bool) *sources.Representation {
	scratch, _ := rd.bufs.Get().(*[]byte)
	if scratch == nil {
		scratch = new([]byte)
	}
	b := (*scratch)[:0]
	if pretty {
		b = codec.AppendJSONIndent(b, v, "    ")
	} else {
		b = codec.AppendJSON(b, v)
	}
	body := bytes.Clone(b)
	if cap(b) <= maxScratch {
		*scratch = b
		rd.bufs.Put(scratch)
	}
	return &sources.Representation{Status: http.StatusOK, Body: body, ETag: sources.ETag(body)}
}

// maxScratch bounds the encoding buffers kept for reuse: one huge body
// must not pin its buffer for ever.
const maxScratch = 1 << 20

func appendLinks(l *sources.Doc, links []*sources.Doc, i int) {
	if i < len(links) {
		for _, f := range links[i].Fields() {
			l.Set(f.Key, f.Value)
		}
	}
}

// setLast sets key as the document's last field, where Eve put _links.
func setLast(d *sources.Doc, key string, v any) {
	d.Delete(key)
	d.Set(key, v)
}

func docID(d *sources.Doc, fallback string) string {
	v, _ := d.Get("_id")
	if id, ok := sources.IDString(v); ok {
		return id
	}
	return fallback
}

// updated is the document's _updated time, for Last-Modified.
func updated(d *sources.Doc) time.Time {
	switch v, _ := d.Get("_updated"); v := v.(type) {
	case time.Time:
		return v
	case string:
		for _, layout := range []string{time.RFC3339Nano, sources.DateLayout} {
			if t, err := time.Parse(layout, v); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}
