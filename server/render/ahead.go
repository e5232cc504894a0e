package render

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// aheadMaxAge is how old a page read ahead may be when it is served: its
// reading began at most this long before. Older, it is read again. Far
// younger than a cached page may be.
const aheadMaxAge = 5 * time.Second

// aheadPerWalk is how many pages the renderer holds at most per walk it
// reads ahead: the bound on all held is this times the read-ahead.
const aheadPerWalk = 8

// aheadMaxBytes bounds the bodies of the pages held rendered: a page that
// would take them past it is dropped when rendered (its request renders
// it again).
const aheadMaxBytes = 64 << 20

// A readAhead renders the pages of cursor walks before their clients ask
// for them. A walk's client follows each page's next link, and nothing
// else can come next: so when a page with a next link is rendered, the
// next page is read, enriched and rendered in the background, and then
// the one after it, up to depth pages ahead of the client. The request for
// a page takes its rendering, waiting for it if it is on its way, and the
// walk's read-ahead moves one page on. The backend reads page N+1 while
// the client reads page N, on another core.
//
// A page is served only if no invalidation arrived since its reading
// began (Options.Invalidations), and is never stored in the cache
// (sources.Representation.Early): the cache's fence against
// invalidations begins with its fill, after the reading.
//
// Bounds: at most max pages held, being rendered or rendered, each taken
// once, their bodies aheadMaxBytes at most; a page nobody took is dropped
// when it is older than aheadMaxAge and room is needed. A walk that
// stops costs the backend at most depth pages more than it read. A
// request for a position in the change log (min_position) never takes a
// page read ahead.
type readAhead struct {
	depth, max int
	maxBytes   int // aheadMaxBytes; tests lower it
	now        func() time.Time
	inval      func() uint64 // Options.Invalidations
	load       func(context.Context, *sources.Query, func(next *sources.Query)) (*sources.Representation, error)

	mu    sync.Mutex
	pages map[string]*aheadPage // pageKey → the page
	bytes int                   // the bodies of the pages held rendered
}

// An aheadPage is a page read ahead. rep and err are set when done
// closes; next as soon as the backend has answered.
type aheadPage struct {
	walk    *aheadWalk
	started time.Time
	inval   uint64 // Invalidations when it began
	done    chan struct{}
	rep     *sources.Representation
	err     error
	next    *sources.Query // the page after it, until begun; under readAhead.mu
}

// An aheadWalk is the read-ahead of one walk.
type aheadWalk struct {
	ctx     context.Context // the values of the request that began it, never its end
	pending int             // pages begun and not yet taken, under readAhead.mu
	last    *aheadPage      // the page begun last
}

func newReadAhead(depth int, now func() time.Time, inval func() uint64,
	load func(context.Context, *sources.Query, func(next *sources.Query)) (*sources.Representation, error)) *readAhead {
	if depth <= 0 {
		return nil
	}
	return &readAhead{depth: depth, max: depth * aheadPerWalk, maxBytes: aheadMaxBytes, now: now, inval: inval, load: load, pages: map[string]*aheadPage{}}
}

// follow begins reading ahead from next, the page after one a request
// rendered itself.
func (a *readAhead) follow(ctx context.Context, next *sources.Query) {
	if a == nil || next == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.begin(&aheadWalk{ctx: context.WithoutCancel(ctx)}, next)
}

// begin starts rendering q for w, unless it is held already or max pages
// are. a.mu is held.
func (a *readAhead) begin(w *aheadWalk, q *sources.Query) {
	now := a.now()
	if len(a.pages) >= a.max {
		for k, p := range a.pages {
			if now.Sub(p.started) > aheadMaxAge && closed(p.done) {
				a.drop(k, p)
			}
		}
	}
	key := pageKey(q)
	if _, held := a.pages[key]; held || len(a.pages) >= a.max {
		return
	}
	p := &aheadPage{walk: w, started: now, inval: a.inval(), done: make(chan struct{})}
	a.pages[key] = p
	w.pending++
	w.last = p
	go func() {
		rep, err := a.load(w.ctx, q, func(next *sources.Query) {
			a.mu.Lock()
			defer a.mu.Unlock()
			p.next = next
			a.advance(w)
		})
		a.mu.Lock()
		defer a.mu.Unlock()
		if err == nil && a.bytes+len(rep.Body) > a.maxBytes {
			rep, err = nil, errAheadFull
		}
		if err == nil && a.pages[key] == p {
			a.bytes += len(rep.Body)
		}
		p.rep, p.err = rep, err
		close(p.done)
	}()
}

// advance begins the page after w's last once the backend has told it
// (the search for page N+2 runs while page N+1 is enriched and rendered),
// if w is less than depth pages ahead of its client. a.mu is held.
func (a *readAhead) advance(w *aheadWalk) {
	if l := w.last; l != nil && l.next != nil && w.pending < a.depth {
		next := l.next
		l.next = nil
		a.begin(w, next)
	}
}

// take returns the rendering of q read ahead, waiting for it while ctx
// allows. ok is false when there is none to serve: none was begun, it
// failed, it is too old, or ctx ended first; the caller renders q itself.
func (a *readAhead) take(ctx context.Context, q *sources.Query) (rep *sources.Representation, ok bool) {
	if a == nil || q.Cursor == nil || q.Cursor.After == nil || q.Fresh != nil {
		return nil, false
	}
	key := pageKey(q)
	a.mu.Lock()
	p := a.pages[key]
	if p != nil {
		a.drop(key, p)
		p.walk.pending--
		a.advance(p.walk)
	}
	a.mu.Unlock()
	if p == nil {
		return nil, false
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		return nil, false
	}
	if p.err != nil || a.now().Sub(p.started) > aheadMaxAge || a.inval() != p.inval {
		return nil, false
	}
	rep = p.rep
	rep.Early = true
	return rep, true
}

// drop forgets the page p held under key. a.mu is held.
func (a *readAhead) drop(key string, p *aheadPage) {
	delete(a.pages, key)
	if closed(p.done) && p.err == nil {
		a.bytes -= len(p.rep.Body)
	}
}

// errAheadFull is why a page read ahead was dropped when rendered.
var errAheadFull = errors.New("render: the pages read ahead hold their bytes' bound")

// pageKey names the page q asks for: what a cache key is made of (the
// resource, page, page size, pretty and the canonical parameters, the
// cursor among them), each part's length first so that no two differ
// only in where one part ends.
func pageKey(q *sources.Query) string {
	b := make([]byte, 0, 256)
	part := func(s string) {
		b = strconv.AppendInt(b, int64(len(s)), 10)
		b = append(b, ':')
		b = append(b, s...)
	}
	part(q.Resource.Name)
	b = strconv.AppendInt(b, int64(q.Page), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(q.MaxResults), 10)
	b = strconv.AppendBool(b, q.Pretty)
	params := q.Params
	if !slices.IsSortedFunc(params, sources.CompareParams) {
		params = slices.SortedFunc(slices.Values(params), sources.CompareParams)
	}
	for _, p := range params {
		part(p.Name)
		part(p.Value)
	}
	return string(b)
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
