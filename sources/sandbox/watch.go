package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// settle is how long a collection file must stay quiet after an event
// before it is read again: an editor's save is several events (create,
// writes, rename), and a half-written file would not parse.
const settle = 50 * time.Millisecond

// A Live store is a sandbox directory that follows its files: when a
// <collection>.json is written or replaced it reloads the directory and
// reports the documents that changed, as a change feed would. It answers
// like a Store, from the newest successful load; a file that does not
// parse leaves the previous documents in place (and is logged).
//
// Every reload that serves its result is Run's, so that its changes are
// reported, whoever asked for it: an event of the directory, or CatchUp.
type Live struct {
	dir  string
	opts Options
	cur  atomic.Pointer[Store]
	w    *fsnotify.Watcher
	log  *slog.Logger

	ask     chan struct{} // one pending signal: CatchUp wants a reload
	mu      sync.Mutex
	running bool // Run is running: it makes the reloads CatchUp asks for
	// started is closed once Run first runs: a CatchUp made before (the
	// change log's follower, at start) waits for it.
	started     chan struct{}
	startedOnce sync.Once
	wanted      *asked // a reload asked for, not begun yet; nil: none
}

// asked is a reload CatchUp asked for: done is closed once Run has made
// it, and reported its changes; err is the reload's.
type asked struct {
	done chan struct{}
	err  error
}

// errNotWatching is CatchUp's error while Run does not run: no reload
// could report its changes.
var errNotWatching = errors.New("sandbox: the directory is not watched (Run is not running): no reload now")

var (
	_ sources.Store      = (*Live)(nil)
	_ sources.AssetStore = (*Live)(nil)
)

// OpenLive loads dir and starts watching it. Run delivers the changes;
// Close stops watching.
func OpenLive(dir string, opts Options, log *slog.Logger) (*Live, error) {
	s, err := Open(dir, opts)
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("sandbox: watching %s: %w", dir, err)
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return nil, fmt.Errorf("sandbox: watching %s: %w", dir, err)
	}
	l := &Live{dir: dir, opts: opts, w: w, log: log, ask: make(chan struct{}, 1), started: make(chan struct{})}
	l.cur.Store(s)
	return l, nil
}

// Close stops watching; Run returns.
func (l *Live) Close() error { return l.w.Close() }

// Run watches the directory until ctx ends or Close, calling report with
// the changes of each reload (never with none). report runs on Run's
// goroutine: a slow report delays the next reload, never loses it. Every
// replica runs its own watcher (package cache/feed's Local feed runs it,
// applying each report to the cache and appending it to the change log).
// Run also makes the reloads CatchUp asks for.
func (l *Live) Run(ctx context.Context, report func(context.Context, []sources.Change)) error {
	l.mu.Lock()
	if l.running {
		l.mu.Unlock()
		return errors.New("sandbox: Run is running already")
	}
	l.running = true
	l.mu.Unlock()
	l.startedOnce.Do(func() { close(l.started) })
	defer l.stopped()
	var timer *time.Timer
	var fire <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-l.w.Events:
			if !ok {
				return nil
			}
			if !isCollectionFile(ev.Name) || ev.Op == fsnotify.Chmod {
				continue
			}
			if timer == nil {
				timer = time.NewTimer(settle)
				fire = timer.C
			} else {
				timer.Reset(settle)
			}
		case err, ok := <-l.w.Errors:
			if !ok {
				return nil
			}
			l.log.Warn("sandbox: watch error; reloading everything", "error", err)
			if timer == nil {
				timer = time.NewTimer(0)
				fire = timer.C
			} else {
				timer.Reset(0)
			}
		case <-fire:
			timer, fire = nil, nil
			l.reload(ctx, report)
		case <-l.ask:
			l.reload(ctx, report)
		}
	}
}

// reload reloads the directory and reports its changes; the reload
// CatchUp asked for, if any, is this one (it begins after the ask).
func (l *Live) reload(ctx context.Context, report func(context.Context, []sources.Change)) {
	l.mu.Lock()
	a := l.wanted
	l.wanted = nil
	l.mu.Unlock()
	changes, err := l.Reload()
	if err != nil {
		l.log.Warn("sandbox: reload failed; serving the previous documents", "dir", l.dir, "error", err)
	} else if len(changes) > 0 {
		l.log.Info("sandbox: reloaded", "changes", len(changes))
		report(ctx, changes)
	}
	if a != nil {
		a.err = err
		close(a.done)
	}
}

// stopped ends Run: a reload asked for and not made fails.
func (l *Live) stopped() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.running = false
	if a := l.wanted; a != nil {
		l.wanted = nil
		a.err = errNotWatching
		close(a.done)
	}
}

// CatchUp makes this store serve at least the versions of the change
// log's entries (sources.LogEntry, as another replica's watcher saw the
// directory): when its current view of an entry's document does not
// have the entry's Version (a deletion's is "deleted"; a document it
// does not have, for another operation, has none), or for an entry of
// no document (a flush), it has Run reload the directory once, and
// returns when the reload is made and its changes reported, as any
// other reload's (to the cache and the change log). Concurrent calls
// share one reload that began after they asked. Entries of no Version
// are taken as served. A reload that fails is CatchUp's error (the
// caller retries), as is Run having stopped; before Run first runs (at
// start, when the log's follower reads what was appended before this
// replica), CatchUp waits for it, until ctx ends. A reload that succeeds but
// still does not have a version (the document changed again since) is
// no error: the newer version's entry follows.
func (l *Live) CatchUp(ctx context.Context, entries []sources.LogEntry) error {
	if !l.behind(entries) {
		return nil
	}
	select {
	case <-l.started:
	case <-ctx.Done():
		return fmt.Errorf("sandbox: catching up with the change log before the directory is watched: %w", ctx.Err())
	}
	l.mu.Lock()
	if !l.running {
		l.mu.Unlock()
		return errNotWatching
	}
	a := l.wanted
	if a == nil {
		a = &asked{done: make(chan struct{})}
		l.wanted = a
		select {
		case l.ask <- struct{}{}:
		default:
		}
	}
	l.mu.Unlock()
	select {
	case <-a.done:
		if a.err != nil {
			return fmt.Errorf("sandbox: catching up with the change log: %w", a.err)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// behind reports whether the current view lacks the version of one of
// entries (or an entry is of no document).
func (l *Live) behind(entries []sources.LogEntry) bool {
	cur := l.cur.Load()
	for _, e := range entries {
		if e.Op == sources.OpFlush || e.ID == "" {
			return true
		}
		res, ok := sources.ResourceByName(e.Resource)
		if !ok || e.Version == "" {
			continue
		}
		have := deletedVersion
		if d, ok := cur.byID(res.Collection, e.ID); ok {
			have = versionOf(codec.AppendJSON(nil, d))
		}
		if have != e.Version {
			return true
		}
	}
	return false
}

func isCollectionFile(name string) bool {
	base := filepath.Base(name)
	for _, c := range sources.Collections {
		if base == c+".json" {
			return true
		}
	}
	return false
}

// Reload reads the directory again and, when it loads, serves it from
// now on and returns the documents that changed: inserted, updated
// (compared by their JSON) or deleted, by collection and _id, each
// updated or deleted one with the document it was (Change.Before).
func (l *Live) Reload() ([]sources.Change, error) {
	next, err := Load(os.DirFS(l.dir), l.opts)
	if err != nil {
		return nil, err
	}
	prev := l.cur.Swap(next)
	return diff(prev, next, time.Now()), nil
}

// diff lists the documents that differ between two loads. Each change's
// Version is a hash of the document's new JSON ("deleted" for a
// deletion): every replica watching the directory reports an edit with
// the same one, so the fleet's change log appends it once.
func diff(prev, next *Store, at time.Time) []sources.Change {
	var out []sources.Change
	for _, c := range sources.Collections {
		old, cur := prev.ids[c], next.ids[c]
		for k, d := range cur {
			id := k.String()
			now := codec.AppendJSON(nil, d)
			o, ok := old[k]
			switch {
			case !ok:
				out = append(out, sources.Change{Collection: c, ID: id, Op: sources.OpInsert, At: at, Version: versionOf(now)})
			case !bytes.Equal(codec.AppendJSON(nil, o), now):
				out = append(out, sources.Change{Collection: c, ID: id, Op: sources.OpUpdate, At: at, Version: versionOf(now), Before: o})
			}
		}
		for k, o := range old {
			if _, ok := cur[k]; !ok {
				out = append(out, sources.Change{Collection: c, ID: k.String(), Op: sources.OpDelete, At: at, Version: deletedVersion, Before: o})
			}
		}
	}
	return out
}

// versionOf is the Version of a document of this JSON: CatchUp compares
// what diff reported with it.
func versionOf(doc []byte) string { return sources.VersionOf(doc) }

// deletedVersion is the Version of a deletion: a document deleted, then
// written again, has changed twice.
const deletedVersion = "deleted"

// String is the id as URLs and Change carry it.
func (k idKey) String() string {
	if k.isOID {
		s, _ := sources.IDString(k.oid)
		return s
	}
	return k.str
}

// Counts reports the documents per collection.
func (l *Live) Counts() map[string]int { return l.cur.Load().Counts() }

// Get reads a document by id from the newest load.
func (l *Live) Get(ctx context.Context, res *sources.Resource, id string) (*sources.Doc, error) {
	return l.cur.Load().Get(ctx, res, id)
}

// Find answers a list from the newest load.
func (l *Live) Find(ctx context.Context, q *sources.Query) (*sources.Result, error) {
	return l.cur.Load().Find(ctx, q)
}

// Lookup runs an enrichment lookup on the newest load.
func (l *Live) Lookup(ctx context.Context, lk sources.Lookup) ([]*sources.Doc, error) {
	return l.cur.Load().Lookup(ctx, lk)
}

// Asset reads a media file of the newest load.
func (l *Live) Asset(ctx context.Context, mediaID string) (*sources.Asset, error) {
	return l.cur.Load().Asset(ctx, mediaID)
}
