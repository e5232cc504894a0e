// Package render turns a query into its representation: it reads the
// backend, has the enricher shape the documents, applies the client's
// projection inside the resource's (sources.Query.Project), adds Eve's
// _links and encodes the JSON. cmd/prodapi hands the Renderer to the
// cache as its loader, so a request goes server → cache → render →
// enrich and sources, and never comes back up: this package imports
// neither server nor cache, and what it produces
// (sources.Representation) is named beneath all of them.
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
	bufs   sync.Pool // *[]byte: encoding buffers
}

// New returns a renderer reading store and shaping with enrich.
func New(store Reader, enrich EnrichFunc) *Renderer {
	return &Renderer{store: store, enrich: enrich}
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
		return &sources.Representation{Status: http.StatusNotFound, Total: -1}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("render: reading %s/%s: %w", res.Name, q.ID, err)
	}
	modified := updated(doc)
	links, missing, err := rd.enrich(ctx, res, []*sources.Doc{doc}, true)
	if err != nil {
		return nil, fmt.Errorf("render: enriching %s/%s: %w", res.Name, q.ID, err)
	}
	q.Project(doc) // _links come after, never projected away
	if !res.NoLinks {
		l := itemLinks(q, docID(doc, q.ID))
		appendLinks(l, links, 0)
		setLast(doc, "_links", l)
	}
	rep := rd.encode(doc, q.Pretty)
	rep.Total = -1
	rep.LastModified = modified
	rep.Missing = missing
	rep.Docs = linkedDocs(append(make([]string, 0, 4), res.Name+"/"+q.ID), links)
	return rep, nil
}

func (rd *Renderer) list(ctx context.Context, q *sources.Query) (*sources.Representation, error) {
	res := q.Resource
	result, err := rd.store.Find(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("render: listing %s: %w", res.Name, err)
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
	pl, meta, err := pageLinks(q, result)
	if err != nil {
		return nil, fmt.Errorf("render: listing %s: %w", res.Name, err)
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
