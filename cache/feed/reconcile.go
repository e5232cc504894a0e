package feed

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// An IDLister walks the ids of a collection, where the feed polls
// (sources/mongo's Store is one).
type IDLister interface {
	// IDs returns at most limit ids of collection after cursor (nil:
	// from the first), in a fixed order, and the cursor to go on from;
	// next is nil when the walk is done.
	IDs(ctx context.Context, collection string, cursor []byte, limit int) (ids []string, next []byte, err error)
	// Present returns those of ids that collection holds.
	Present(ctx context.Context, collection string, ids []string) ([]string, error)
}

// KnownIDs keeps the ids the poll knows of each collection, each scored
// with the last round that saw it (package redistier's Tier is one, in
// Redis).
type KnownIDs interface {
	// MarkKnown scores ids with round; with onlyNew, only those it does
	// not hold yet.
	MarkKnown(ctx context.Context, collection string, round int64, ids []string, onlyNew bool) error
	// Unmarked returns at most limit ids scored below round.
	Unmarked(ctx context.Context, collection string, round int64, limit int) ([]string, error)
	// ForgetKnown removes ids.
	ForgetKnown(ctx context.Context, collection string, ids []string) error
}

// DefaultReconcileEvery is how often the poll's holder reconciles each
// collection's ids.
const DefaultReconcileEvery = 10 * time.Minute

// ReconcilePage is how many ids one query of a reconcile's walk reads, and
// one call of the known ids handles.
const ReconcilePage = 1000

// reconciledVersion is the Version of a deletion the reconcile found: a
// successor that reconciles the same round again appends it once.
const reconciledVersion = "deleted"

// The reconcile. A round walks each collection's ids in pages
// (IDLister.IDs) and scores them in the known ids with the round (the
// time it began, in milliseconds: the rounds of a holder and of its
// successors grow). Then each id known with a lower score, which the walk
// did not see, is a candidate: those the collection still holds (written
// behind the walk) are scored with the round, and the others are
// deletions, reported like any change (what they derive, the cache,
// then the log) and then forgotten. An id the poll reports joins the
// known ids if it is new to them, so that a document inserted and
// deleted between two walks is found gone too. What was deleted before
// the first round is not.
//
// Memory is a page of ids, whatever the collection's size: the known ids
// live in Redis (a sorted set per collection; in this process's memory
// without Redis). A round reads every collection's ids once, in pages of
// ReconcilePage, on the _id index. Rounds begin ReconcileEvery apart,
// the last one's end kept beside the feed's token, so that a successor
// waits out the period; the first begins at once. A round that fails
// fails the poll, which is retried; the next round starts over.

type reconcileState struct {
	Done time.Time `json:"done"` // when the last round ended
}

// reconcileToken names where the reconcile's state is kept, beside the
// resume token.
func (f *Feed) reconcileToken() string { return f.opts.Name + "-reconcile" }

// reconcileEvery is how often the feed reconciles; 0 when it does not.
func (f *Feed) reconcileEvery() time.Duration {
	if f.opts.IDs == nil {
		return 0
	}
	return f.opts.ReconcileEvery
}

// reconcile runs a round whenever one is due until ctx ends or a round
// fails.
func (f *Feed) reconcile(ctx context.Context) error {
	for {
		b, err := f.coord.Token(ctx, f.reconcileToken())
		if err != nil {
			return err
		}
		var st reconcileState
		if len(b) > 0 && json.Unmarshal(b, &st) != nil {
			st = reconcileState{} // unreadable: a round at once
		}
		if wait := st.Done.Add(f.opts.ReconcileEvery).Sub(f.opts.Now()); !st.Done.IsZero() && wait > 0 {
			if !sleep(ctx, wait) {
				return ctx.Err()
			}
			continue
		}
		if err := f.reconcileRound(ctx); err != nil {
			return err
		}
	}
}

// reconcileRound reconciles every collection once, and keeps when it
// ended.
func (f *Feed) reconcileRound(ctx context.Context) error {
	began := time.Now()
	round := max(f.opts.Now().UnixMilli(), f.round+1)
	f.round = round
	var docs, pages, deleted int
	for _, coll := range f.opts.Collections {
		n, p, d, err := f.reconcileOne(ctx, coll, round)
		docs, pages, deleted = docs+n, pages+p, deleted+d
		if err != nil {
			return fmt.Errorf("feed: reconciling the ids of %s: %w", coll, err)
		}
	}
	b, err := json.Marshal(reconcileState{Done: f.opts.Now()})
	if err != nil {
		return err
	}
	if err := f.coord.SaveToken(ctx, f.reconcileToken(), b); err != nil {
		return err
	}
	f.log.Info("feed: reconciled the ids of every collection", "documents", docs, "pages", pages, "deleted", deleted,
		"took", time.Since(began).Round(time.Millisecond), "next_in", f.opts.ReconcileEvery)
	return nil
}

// reconcileOne walks one collection's ids, then reports those it knew
// and did not see as deleted: docs and pages are what the walk read.
func (f *Feed) reconcileOne(ctx context.Context, coll string, round int64) (docs, pages, deleted int, err error) {
	var cursor []byte
	for {
		ids, next, err := f.opts.IDs.IDs(ctx, coll, cursor, ReconcilePage)
		if err != nil {
			return docs, pages, deleted, err
		}
		docs, pages = docs+len(ids), pages+1
		if err := f.opts.Known.MarkKnown(ctx, coll, round, ids, false); err != nil {
			return docs, pages, deleted, err
		}
		if next == nil {
			break
		}
		cursor = next
	}
	for {
		candidates, err := f.opts.Known.Unmarked(ctx, coll, round, ReconcilePage)
		if err != nil || len(candidates) == 0 {
			return docs, pages, deleted, err
		}
		present, err := f.opts.IDs.Present(ctx, coll, candidates)
		if err != nil {
			return docs, pages, deleted, err
		}
		if err := f.opts.Known.MarkKnown(ctx, coll, round, present, false); err != nil {
			return docs, pages, deleted, err
		}
		there := make(map[string]bool, len(present))
		for _, id := range present {
			there[id] = true
		}
		var gone []sources.Change
		var ids []string
		for _, id := range candidates {
			if !there[id] {
				gone = append(gone, sources.Change{Collection: coll, ID: id, Op: sources.OpDelete, Version: reconciledVersion})
				ids = append(ids, id)
			}
		}
		if len(gone) == 0 {
			continue
		}
		if err := f.report(ctx, sourcePoll, gone); err != nil {
			return docs, pages, deleted, err
		}
		if err := f.opts.Known.ForgetKnown(ctx, coll, ids); err != nil {
			return docs, pages, deleted, err
		}
		deleted += len(gone)
	}
}

// know adds the documents a poll reported to the known ids, where it does
// not know them yet.
func (f *Feed) know(ctx context.Context, coll string, changes []sources.Change) error {
	if f.opts.IDs == nil {
		return nil
	}
	var ids []string
	for _, ch := range changes {
		if ch.ID != "" && ch.Op != sources.OpDelete {
			ids = append(ids, ch.ID)
		}
	}
	if err := f.opts.Known.MarkKnown(ctx, coll, 0, ids, true); err != nil {
		return fmt.Errorf("feed: knowing the ids the poll found: %w", err)
	}
	return nil
}

// memKnown keeps the known ids in this process's memory: for a replica
// without Redis, which is the whole fleet.
type memKnown struct {
	mu   sync.Mutex
	sets map[string]map[string]int64
}

func (m *memKnown) MarkKnown(_ context.Context, coll string, round int64, ids []string, onlyNew bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.sets[coll]
	if set == nil {
		set = map[string]int64{}
		m.sets[coll] = set
	}
	for _, id := range ids {
		if _, ok := set[id]; !ok || !onlyNew {
			set[id] = round
		}
	}
	return nil
}

func (m *memKnown) Unmarked(_ context.Context, coll string, round int64, limit int) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	set := m.sets[coll]
	var out []string
	for id, r := range set {
		if r < round {
			out = append(out, id)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return cmp.Or(cmp.Compare(set[a], set[b]), cmp.Compare(a, b)) })
	return out[:min(len(out), limit)], nil
}

func (m *memKnown) ForgetKnown(_ context.Context, coll string, ids []string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		delete(m.sets[coll], id)
	}
	return nil
}
