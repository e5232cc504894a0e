package changelog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/sources"
)

// appendBatch bounds the changes of one script: Redis runs nothing else
// meanwhile.
const appendBatch = 500

// Append adds the entries of changes to the log, from source (one of the
// Source constants): one per resource served from the change's
// collection, none for a collection no resource serves. In front of
// Redis, a change with a Version is appended only when the log's last
// version of its document differs (see sources.Change), so that every
// replica may report a change and a resumed watcher may report it again.
// An error means some changes may not be in the log: the caller retries
// them (a change stream resumes from its last saved token) or reports
// them lost.
func (l *Log) Append(ctx context.Context, source string, changes []sources.Change) error {
	if l.stream == nil {
		if err := l.appendRing(ctx, source, changes); err != nil {
			l.m.failed.Inc(source)
			return fmt.Errorf("changelog: append: %w", err)
		}
		return nil
	}
	for len(changes) > 0 {
		n := min(len(changes), appendBatch)
		if err := l.appendStream(ctx, source, changes[:n]); err != nil {
			l.m.failed.Inc(source)
			return fmt.Errorf("changelog: append: %w", err)
		}
		changes = changes[n:]
	}
	return nil
}

func (l *Log) appendStream(ctx context.Context, source string, changes []sources.Change) error {
	var apps []redistier.StreamAppend
	var ops []string
	for _, ch := range changes {
		app := redistier.StreamAppend{Version: ch.Version}
		for _, r := range sources.ResourcesOf(ch.Collection) {
			app.Records = append(app.Records, recordFields(r.Name, ch))
		}
		if len(app.Records) == 0 {
			continue
		}
		if ch.Version != "" && ch.ID != "" && ch.Op != sources.OpFlush {
			app.Seen = seenKey(ch.Collection, ch.ID)
		}
		apps = append(apps, app)
		ops = append(ops, ch.Op)
	}
	if len(apps) == 0 {
		return nil
	}
	if err := l.checkMine(ctx); err != nil {
		return err
	}
	st, trimmed, ids, err := l.stream.StreamAppend(ctx, apps, redistier.StreamLimits{
		MaxLen: int64(l.opts.MaxEntries), Retain: l.opts.Retain, SeenTTL: seenTTL,
	})
	if err != nil {
		return err
	}
	l.noteMine(st.Epoch, apps, ids)
	for i, added := range ids {
		if added == nil {
			l.m.duplicates.Inc(source)
			continue
		}
		l.m.appended.Add(uint64(len(added)), source, ops[i])
	}
	l.m.trimmed.Add(uint64(trimmed))
	l.m.length.Set(float64(st.Length))
	return nil
}

// checkMine looks, before an append, for the newest entry this replica
// appended and its follower has not read: when the stream no longer
// holds it (neither there nor trimmed), the stream lost its tail after
// the entry was handed to it, maybe before any replica read it, and the
// epoch ends before anything more goes into it (410 for every client,
// which resyncs). Nothing to look for costs nothing; otherwise it costs
// a round trip, while the follower is behind this replica's appends.
func (l *Log) checkMine(ctx context.Context) error {
	l.mu.RLock()
	mine, epoch := l.mine, l.mineEpoch
	l.mu.RUnlock()
	if epoch == "" {
		return nil
	}
	lk, ok, err := l.look(ctx, []entry{mine})
	if err != nil {
		return err
	}
	if ok && lk.st.Epoch == epoch {
		if lk.gone == nil {
			return nil // still there, or trimmed: the follower reads it
		}
		if err := l.renew(ctx, epoch, "an entry this replica appended is not in the stream, and was not trimmed", "entry", mine.pos.String()); err != nil {
			return err
		}
	}
	// The epoch ended, or the stream is gone (its next life is another
	// epoch): nothing of this one is left to look for.
	l.mu.Lock()
	if l.mineEpoch == epoch && l.mine == mine {
		l.mine, l.mineEpoch = entry{}, ""
	}
	l.mu.Unlock()
	return nil
}

// noteMine keeps the newest entry an append added (ids, per change of
// apps, the ids of its records) as this replica's newest, unless the
// follower has read that far already.
func (l *Log) noteMine(epoch string, apps []redistier.StreamAppend, ids [][]string) {
	for i := len(ids) - 1; i >= 0; i-- {
		added := ids[i]
		if len(added) == 0 {
			continue
		}
		e, ok := recordEntry(redistier.StreamRecord{ID: added[len(added)-1], Fields: apps[i].Records[len(added)-1]})
		if !ok {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.mineEpoch != epoch || l.mine.pos.less(e.pos) {
			l.mine, l.mineEpoch = e, epoch
			l.confirmMine()
		}
		return
	}
}

// seenKey names a document in the stream's seen keys: a hash, so that
// every key has the same short length whatever the id.
func seenKey(collection, id string) string {
	h := sha256.Sum256([]byte(collection + "\x00" + id))
	return hex.EncodeToString(h[:16])
}

// appendRing adds the entries to the ring, at positions of this
// process's clock, once Options.Apply has applied them (retried until it
// succeeds or ctx ends: then nothing is added, and the caller retries),
// and trims it by length and age. The ring is one replica's: nothing
// else reports the same change.
func (l *Log) appendRing(ctx context.Context, source string, changes []sources.Change) error {
	l.ringMu.Lock()
	defer l.ringMu.Unlock()
	now := l.now()
	l.mu.RLock()
	last, epoch := l.t.last, l.epoch
	l.mu.RUnlock()
	ms := uint64(max(now.UnixMilli(), 0))
	var added []entry
	for _, ch := range changes {
		op, ok := opIndex(ch.Op)
		if !ok {
			continue
		}
		e := entry{op: op, id: ch.ID, version: ch.Version}
		if !ch.At.IsZero() {
			e.at = ch.At.UnixMilli()
		}
		for _, r := range sources.ResourcesOf(ch.Collection) {
			e.res = resourceIndex(r.Name)
			if ms > last.ms {
				e.pos = position{ms: ms}
			} else {
				e.pos = position{ms: last.ms, seq: last.seq + 1}
			}
			last = e.pos
			added = append(added, e)
		}
	}
	// Only this call changes the ring's positions (ringMu): they hold
	// while Apply runs, and a wait for one of them waits.
	l.mu.Lock()
	l.reserved = last
	l.mu.Unlock()
	err := l.applyEntries(ctx, epoch, false, false, position{}, added)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.reserved = l.t.last
		return err
	}
	for _, e := range added {
		l.t.push(e)
		l.m.appended.Inc(source, ops[e.op])
	}
	trimmed := 0
	oldest := uint64(max(now.Add(-l.opts.Retain).UnixMilli(), 0))
	for l.t.len() > 0 && (l.t.len() > l.opts.MaxEntries || l.t.oldest().pos.ms < oldest) {
		l.t.drop()
		trimmed++
	}
	l.m.trimmed.Add(uint64(trimmed))
	l.m.length.Set(float64(l.t.len()))
	if len(added) > 0 || trimmed > 0 {
		l.moved()
	}
	return nil
}
