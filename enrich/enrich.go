package enrich

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// Options configure an Enricher. The zero value is usable.
type Options struct {
	// MediaPrefix is what rendition hrefs start with, e.g.
	// "http://localhost:5500/prodapi/v1/assets" (a trailing slash is
	// ignored).
	MediaPrefix string
	// LinkLimit bounds every link list (content, assignments, plannings);
	// 0 means 500.
	LinkLimit int
	// Timeout bounds each lookup; 0 means no bound beyond the request's
	// context. A lookup that runs out of it degrades the response.
	Timeout time.Duration
	// Logger receives one Warn line per failed lookup; nil discards.
	Logger *slog.Logger
}

// DefaultLinkLimit is the bound of link lists when Options.LinkLimit is 0.
const DefaultLinkLimit = 500

// searchWindow is the most documents one search lookup may ask for:
// Elasticsearch's index.max_result_window.
const searchWindow = 10000

// An Enricher shapes documents and computes their enrichment links. It is
// safe for concurrent use.
type Enricher struct {
	store     sources.Looker
	prefix    string
	linkLimit int
	timeout   time.Duration
	log       *slog.Logger
}

// New returns an Enricher that runs its lookups on store.
func New(store sources.Looker, opts Options) *Enricher {
	e := &Enricher{
		store:     store,
		prefix:    strings.TrimRight(opts.MediaPrefix, "/"),
		linkLimit: opts.LinkLimit,
		timeout:   opts.Timeout,
		log:       opts.Logger,
	}
	if e.linkLimit <= 0 {
		e.linkLimit = DefaultLinkLimit
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	return e
}

// Enrich shapes docs of res in place and returns, for each doc (same
// index; the slice has len(docs) entries), the enrichment links to append
// to its _links after self, parent and collection, in the original's key
// order; an entry is nil when the document has none. detail selects detail
// shaping (the datasource projection of items and contacts).
//
// missing names the steps whose optional lookup failed (in the order
// they ran; nil when every lookup succeeded): what they would have
// produced is missing and the response must not be cached. err is
// returned only when the request cannot go on: its context was cancelled
// or passed its deadline (errors.Is works on both). Nil entries of docs
// are skipped.
func (e *Enricher) Enrich(ctx context.Context, res *sources.Resource, docs []*sources.Doc, detail bool) (links []*sources.Doc, missing []string, err error) {
	links = make([]*sources.Doc, len(docs))
	if res == nil {
		return links, nil, nil
	}
	r := &request{e: e, res: res}
	for _, d := range docs {
		if d != nil {
			r.shape(d, detail)
		}
	}
	switch res.Collection {
	case "archive":
		err = r.items(ctx, docs, links)
	case "assignments":
		err = r.assignments(ctx, docs, links)
	case "planning":
		err = r.planning(ctx, docs, links)
	case "events":
		err = r.events(ctx, docs, links)
	}
	if err != nil {
		return nil, nil, err
	}
	return links, r.missing, nil
}

// A request is the state of one Enrich call. Only the goroutine that
// called Enrich touches it; lookups running concurrently write to their
// own call.
type request struct {
	e       *Enricher
	res     *sources.Resource
	missing []string // the steps that failed
}

// A call is one lookup of a step and, once run, its outcome.
type call struct {
	step string
	l    sources.Lookup
	docs []*sources.Doc
	err  error
	ran  bool
}

// ok reports whether the lookup ran and succeeded.
func (c *call) ok() bool { return c.ran && c.err == nil }

// run runs the calls that have values to look up, concurrently, and waits
// for them all. A failure is logged and names its step missing, unless
// ctx has ended: then run returns the context's error.
func (r *request) run(ctx context.Context, calls ...*call) error {
	var todo []*call
	for _, c := range calls {
		if c != nil && len(c.l.Values) > 0 {
			todo = append(todo, c)
		}
	}
	switch len(todo) {
	case 0:
		return nil
	case 1:
		r.fetch(ctx, todo[0])
	default:
		var wg sync.WaitGroup
		for _, c := range todo {
			wg.Go(func() { r.fetch(ctx, c) }) // ends when the lookup returns; fetch bounds it by ctx
		}
		wg.Wait()
	}
	for _, c := range todo {
		if c.err == nil {
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("enrich: %s %s: %w", r.res.Name, c.step, ctx.Err())
		}
		if !slices.Contains(r.missing, c.step) {
			r.missing = append(r.missing, c.step)
		}
		r.e.log.LogAttrs(ctx, slog.LevelWarn, "enrich: lookup failed, serving without it",
			slog.String("resource", r.res.Name), slog.String("step", c.step), slog.Any("error", c.err))
	}
	return nil
}

// fetch runs one lookup under the per-lookup timeout.
func (r *request) fetch(ctx context.Context, c *call) {
	if r.e.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.e.timeout)
		defer cancel()
	}
	c.docs, c.err = r.e.store.Lookup(ctx, c.l)
	c.ran = true
}

// listLimit is the Limit of a lookup that feeds link lists of n ids: enough
// for every list to be complete, within the search window.
func (r *request) listLimit(n int, search bool) int {
	l := n * r.e.linkLimit
	if search && l > searchWindow {
		l = searchWindow
	}
	return l
}
