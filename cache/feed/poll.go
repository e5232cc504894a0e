package feed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// A Poller finds what was written to a collection since a time, where
// the server has no change streams (sources/mongo's Store is one).
type Poller interface {
	// Poll returns the documents of collection whose _updated is at or
	// after since, in order of _updated then _id, at most limit.
	Poll(ctx context.Context, collection string, since time.Time, limit int) ([]sources.Stamp, error)
	// Latest returns the newest _updated of collection (zero: none).
	Latest(ctx context.Context, collection string) (time.Time, error)
}

// DefaultPollEvery is how often the holder polls every collection.
const DefaultPollEvery = time.Second

// The poll. Each collection has a watermark, the newest _updated the
// poll reported, and remembers the documents it reported at or after
// the watermark less pollOverlap, with their versions (_etag, or the
// _updated itself without one). Each poll asks for _updated at or after
// the watermark less the overlap, and reports the documents it does not
// remember at their version:
//
//   - _updated has one-second resolution: a write in the watermark's
//     second after the last poll is found (>=), and what the poll
//     reported then is not reported again;
//   - a write whose _updated is a little older than one reported
//     already (Superdesk stamps _updated before it writes, so two
//     writers may commit out of order) is found within the overlap;
//   - a document written twice in one second is reported twice when
//     its _etag changed, once when it has none;
//   - a watermark never passes the poller's clock: a document stamped
//     in the future (a clock ahead, imported data) would otherwise hide
//     every write made before its time. It is remembered, and found
//     again by every poll until the watermark reaches it.
//
// The watermarks and what they remember are saved with the feed's
// resume token after each poll that reported something, once the
// changes are in the cache and the log: a holder that dies in between
// leaves the previous watermark, and its successor reports those changes
// again, which the log appends once. A change the cache did not take (an
// invalidation that did not reach Redis) fails the poll like an append
// that failed: the watermark stays, and the change comes again.
//
// A deleted document leaves nothing for a poll to find: reconcile.go
// finds deletions.
const (
	// pollOverlap is how far behind the watermark a poll looks.
	pollOverlap = 2 * time.Second
	// pollBatch is the documents one query returns at first; pollMaxBatch
	// the most, when one second holds more than a batch.
	pollBatch    = 1000
	pollMaxBatch = 64 * pollBatch
	// pollSaved bounds what a saved watermark remembers, per collection:
	// a takeover that remembers less reports more again, and the log's
	// versions drop it.
	pollSaved = 1000
)

// pollState is the poll's state of one collection.
type pollState struct {
	Mark time.Time `json:"mark"`
	// Floor, after a flush, is where the poll starts at the earliest:
	// the crowded seconds are behind it, and their documents are not
	// remembered.
	Floor time.Time `json:"floor,omitzero"`
	// Seen are the documents reported at or after Mark less pollOverlap:
	// their ids, versions and _updated.
	Seen map[string]seenDoc `json:"seen,omitempty"`
}

type seenDoc struct {
	Version string    `json:"v"`
	Updated time.Time `json:"u"`
}

// pollToken names where the watermarks are kept, beside the resume token.
func (f *Feed) pollToken() string { return f.opts.Name + "-poll" }

// poll polls every collection every PollEvery, and reconciles their ids
// alongside, until ctx ends or a poll or a round fails.
func (f *Feed) poll(ctx context.Context) error {
	if f.opts.IDs == nil {
		return f.pollEvery(ctx)
	}
	pctx, cancel := context.WithCancel(ctx)
	var failed error
	var wg sync.WaitGroup
	wg.Go(func() {
		// Ends with pctx (the poll returned), or when a round fails,
		// which then ends the poll.
		if err := f.reconcile(pctx); pctx.Err() == nil {
			failed = err
			cancel()
		}
	})
	err := f.pollEvery(pctx)
	cancel()
	wg.Wait()
	if failed != nil {
		return failed
	}
	return err
}

// pollEvery polls every collection every PollEvery until ctx ends or a
// poll fails.
func (f *Feed) pollEvery(ctx context.Context) error {
	states, err := f.loadPoll(ctx)
	if err != nil {
		return err
	}
	for {
		moved := false
		for _, coll := range f.opts.Collections {
			m, err := f.pollOne(ctx, states, coll)
			moved = moved || m
			if err != nil {
				if moved { // what was reported stays reported
					err = errors.Join(err, f.savePoll(ctx, states))
				}
				return err
			}
		}
		// Once a round, after what it found is in the cache and the log:
		// a holder that dies before saving makes the next one report
		// again, and the log keeps each version once.
		if moved {
			if err := f.savePoll(ctx, states); err != nil {
				return err
			}
		}
		if !sleep(ctx, f.opts.PollEvery) {
			return ctx.Err()
		}
	}
}

// loadPoll reads the saved watermarks.
func (f *Feed) loadPoll(ctx context.Context) (map[string]*pollState, error) {
	b, err := f.coord.Token(ctx, f.pollToken())
	if err != nil {
		return nil, err
	}
	states := map[string]*pollState{}
	if len(b) > 0 {
		if err := json.Unmarshal(b, &states); err != nil {
			f.log.Warn("feed: the saved poll watermarks do not read; polling from each collection's newest write", "error", err)
			states = map[string]*pollState{}
		}
	}
	return states, nil
}

// savePoll keeps the watermarks, each remembering its newest documents
// only.
func (f *Feed) savePoll(ctx context.Context, states map[string]*pollState) error {
	saved := make(map[string]*pollState, len(states))
	for coll, st := range states {
		s := &pollState{Mark: st.Mark, Floor: st.Floor, Seen: st.Seen}
		if len(st.Seen) > pollSaved {
			ids := slices.SortedFunc(maps.Keys(st.Seen), func(a, b string) int {
				return st.Seen[b].Updated.Compare(st.Seen[a].Updated)
			})
			s.Seen = make(map[string]seenDoc, pollSaved)
			for _, id := range ids[:pollSaved] {
				s.Seen[id] = st.Seen[id]
			}
		}
		saved[coll] = s
	}
	b, err := json.Marshal(saved)
	if err != nil {
		return err
	}
	return f.coord.SaveToken(ctx, f.pollToken(), b)
}

// pollOne polls one collection: from its newest write the first time
// (reporting nothing), then from its watermark. moved says whether its
// state changed, to be saved.
func (f *Feed) pollOne(ctx context.Context, states map[string]*pollState, coll string) (moved bool, err error) {
	st := states[coll]
	if st == nil {
		latest, err := f.opts.Poller.Latest(ctx, coll)
		if err != nil {
			return false, err
		}
		st = &pollState{Mark: f.capped(latest), Seen: map[string]seenDoc{}}
		// What is there now is the starting point, not news.
		stamps, err := f.opts.Poller.Poll(ctx, coll, st.Mark.Add(-pollOverlap), pollMaxBatch)
		if err != nil {
			return false, err
		}
		for _, s := range stamps {
			st.Seen[s.ID] = seenDoc{Version: stampVersion(s), Updated: s.Updated}
		}
		states[coll] = st
		return true, nil
	}
	if st.Seen == nil {
		st.Seen = map[string]seenDoc{}
	}
	since, limit := st.Mark.Add(-pollOverlap), pollBatch
	if since.Before(st.Floor) {
		since = st.Floor
	}
	for {
		stamps, err := f.opts.Poller.Poll(ctx, coll, since, limit)
		if err != nil {
			return moved, err
		}
		full := len(stamps) == limit
		if full {
			// The newest second may go on past the batch: the next
			// query reads it whole.
			cut := stamps[len(stamps)-1].Updated
			whole := stamps
			for len(stamps) > 0 && stamps[len(stamps)-1].Updated.Equal(cut) {
				stamps = stamps[:len(stamps)-1]
			}
			if len(stamps) == 0 || stamps[len(stamps)-1].Updated.Equal(since) {
				// The seconds before the cut fill the batch, and the
				// next query would start where this one did: read more
				// at once.
				if limit < pollMaxBatch {
					limit = min(2*limit, pollMaxBatch)
					continue
				}
				return true, f.pollFlush(ctx, states, coll, cut, whole)
			}
		}
		reported, err := f.pollReport(ctx, states, coll, stamps)
		moved = moved || reported
		if err != nil {
			return moved, err
		}
		if !full {
			return moved, nil
		}
		// On from the newest second read: what it holds is remembered.
		since, limit = stamps[len(stamps)-1].Updated, pollBatch
	}
}

// pollReport reports what the poll found that it does not remember, then
// moves the watermark; reported says whether there was anything.
func (f *Feed) pollReport(ctx context.Context, states map[string]*pollState, coll string, stamps []sources.Stamp) (reported bool, err error) {
	st := states[coll]
	var changes []sources.Change
	mark := st.Mark
	for _, s := range stamps {
		v := stampVersion(s)
		if seen, ok := st.Seen[s.ID]; ok && seen.Version == v {
			continue
		}
		changes = append(changes, sources.Change{Collection: coll, ID: s.ID, Op: sources.OpUpdate, At: s.Updated, Version: v})
		if s.Updated.After(mark) {
			mark = s.Updated
		}
	}
	if len(changes) == 0 {
		return false, nil
	}
	if err := f.report(ctx, sourcePoll, changes); err != nil {
		return false, fmt.Errorf("feed: reporting what the poll found: %w", err)
	}
	if err := f.know(ctx, coll, changes); err != nil {
		return false, err
	}
	st.Mark = f.capped(mark)
	for _, ch := range changes {
		st.Seen[ch.ID] = seenDoc{Version: ch.Version, Updated: ch.At}
	}
	// Forget only what the next poll, from the capped watermark, will
	// not read again.
	for id, s := range st.Seen {
		if s.Updated.Before(st.Mark.Add(-pollOverlap)) {
			delete(st.Seen, id)
		}
	}
	return true, nil
}

// pollFlush gives up on seconds that hold more documents than the
// largest batch: the collection is reported flushed (its readers resync)
// and the poll goes on after the newest second read, never looking back
// past it. A write stamped with that second and made after the flush is
// missed: the price of a burst no poll can read. The state moves only
// when the flush was reported.
func (f *Feed) pollFlush(ctx context.Context, states map[string]*pollState, coll string, newest time.Time, read []sources.Stamp) error {
	f.log.Warn("feed: more documents share a second or two of _updated than a poll reads; reporting the collection flushed",
		"collection", coll, "updated", newest, "documents", len(read))
	if err := f.report(ctx, sourcePoll, []sources.Change{{Collection: coll, Op: sources.OpFlush}}); err != nil {
		return fmt.Errorf("feed: reporting a flush of %s: %w", coll, err)
	}
	after := newest.Add(time.Second)
	states[coll] = &pollState{Mark: after, Floor: after, Seen: map[string]seenDoc{}}
	return nil
}

// capped is t, or the poller's clock's second when t is later.
func (f *Feed) capped(t time.Time) time.Time {
	if now := f.opts.Now().Truncate(time.Second); t.After(now) {
		return now
	}
	return t
}

// stampVersion is a polled document's version: its _etag, else its
// _updated.
func stampVersion(s sources.Stamp) string {
	if s.Version != "" {
		return s.Version
	}
	return s.Updated.UTC().Format(time.RFC3339Nano)
}
