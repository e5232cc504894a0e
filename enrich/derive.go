package enrich

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// DefaultBound is how many documents of one resource a change may
// obsolete before one flush of the resource stands for their entries.
const DefaultBound = 100

// deletedRefsTTL is how long the references of a deleted document are
// kept: long enough for its change to be retried.
const deletedRefsTTL = 24 * time.Hour

// A RefStore keeps, between changes, what each document linked to, where
// every replica reads it (package redistier's Tier is one, in Redis). The
// bytes are the Deriver's.
type RefStore interface {
	// Refs returns what SaveRefs kept for the document, nil when nothing.
	Refs(ctx context.Context, collection, id string) ([]byte, error)
	// SaveRefs keeps refs for the document, for ttl (0: with no
	// expiry); nil refs drops what was kept.
	SaveRefs(ctx context.Context, collection, id string, refs []byte, ttl time.Duration) error
}

// DeriveOptions configure a Deriver. The zero value is usable.
type DeriveOptions struct {
	// Refs keeps the documents' references; nil keeps them in this
	// process's memory.
	Refs RefStore
	// Bound is how many documents of one resource a change may obsolete
	// before a flush of the resource replaces their entries; 0 means
	// DefaultBound.
	Bound  int
	Logger *slog.Logger // nil: discard
	// Now is the clock of the in-memory references' expiry; nil:
	// time.Now.
	Now func() time.Time
}

// A Deriver finds the documents whose served representation embeds a
// changed one: their entries in /changes and their cache entries follow
// the change's (package cache/feed calls it for every source). It is safe
// for concurrent use.
//
// The dependents of a change are the documents that embed the changed one
// now, found by walking the chains of the _links graph (graph.go)
// backwards over current data, on the document database, and those that
// embedded it before: where the link is the changed document's own field
// (an item's assignment_id, a planning's event_item), what the field held
// before, kept per document in a RefStore (or given by the feed, as
// Change.Before). A document's first change after the references were
// last kept (the first since they were kept at all) finds the documents
// it links to now only.
type Deriver struct {
	store sources.Looker
	refs  RefStore
	bound int
	log   *slog.Logger
}

// NewDeriver returns a Deriver that looks documents up in store.
func NewDeriver(store sources.Looker, opts DeriveOptions) *Deriver {
	d := &Deriver{store: store, refs: opts.Refs, bound: opts.Bound, log: opts.Logger}
	if d.bound <= 0 {
		d.bound = DefaultBound
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.refs == nil {
		now := opts.Now
		if now == nil {
			now = time.Now
		}
		d.refs = &memRefs{now: now, m: map[string]memRef{}}
	}
	return d
}

// Derive returns changes, each followed by the updates of the documents
// it obsoletes (a flush of their collection past the bound, or for a
// flush), with the collection, the time and a version derived from the
// change's (so that every replica that derives it appends it once). A
// derived change that a later one of the same document supersedes is
// left out. It fails when a lookup or the references fail: the caller
// retries, and deriving again gives the same.
func (d *Deriver) Derive(ctx context.Context, changes []sources.Change) ([]sources.Change, error) {
	out := make([]sources.Change, 0, len(changes))
	derived := make([]bool, 0, len(changes))
	for _, ch := range changes {
		deps, err := d.Dependents(ctx, ch)
		if err != nil {
			return nil, err
		}
		out = append(out, ch)
		derived = append(derived, false)
		for _, dep := range deps {
			out = append(out, dep)
			derived = append(derived, true)
		}
	}
	return superseded(out, derived), nil
}

// superseded drops the derived changes that a later change of the same
// document (or a later flush of the same collection) follows.
func superseded(changes []sources.Change, derived []bool) []sources.Change {
	type doc struct{ collection, id string }
	last := make(map[doc]int, len(changes))
	for i, ch := range changes {
		last[doc{ch.Collection, key(ch.ID)}] = i
	}
	out := changes[:0]
	for i, ch := range changes {
		if derived[i] && last[doc{ch.Collection, key(ch.ID)}] != i {
			continue
		}
		out = append(out, ch)
	}
	return out
}

// Dependents returns the changes ch derives: an update of each document
// that embeds the changed one, now or before it, by collection in the
// order of the chains table and by id; a flush of a collection in
// place of more than the bound of its documents, or for a flush of one
// it embeds.
func (d *Deriver) Dependents(ctx context.Context, ch sources.Change) ([]sources.Change, error) {
	if ch.Op == sources.OpFlush || ch.ID == "" {
		var out []sources.Change
		for _, coll := range embedders(ch.Collection) {
			out = append(out, sources.Change{Collection: coll, Op: sources.OpFlush, At: ch.At})
		}
		return out, nil
	}
	hops := reaching(ch.Collection)
	if len(hops) == 0 {
		return nil, nil
	}
	values, err := d.values(ctx, ch)
	if err != nil {
		return nil, err
	}
	w := walker{d: d, memo: map[string]found{}}
	byColl := map[string]*found{}
	for _, h := range hops {
		f := byColl[h.collection]
		if f == nil {
			f = &found{}
			byColl[h.collection] = f
		}
		if f.over {
			continue
		}
		got, err := w.back(ctx, h.chain, values[h.chain[len(h.chain)-1].toField])
		if err != nil {
			return nil, fmt.Errorf("enrich: the documents that embed %s/%s: %w", ch.Collection, ch.ID, err)
		}
		f.add(got, d.bound)
	}
	var out []sources.Change
	for _, c := range chains {
		f := byColl[c.collection]
		if f == nil {
			continue
		}
		if f.over {
			d.log.LogAttrs(ctx, slog.LevelInfo, "enrich: a change obsoletes too many documents to list; flushing their collection",
				slog.String("collection", ch.Collection), slog.String("id", ch.ID), slog.String("flushed", c.collection), slog.Int("bound", d.bound))
			out = append(out, sources.Change{Collection: c.collection, Op: sources.OpFlush, At: ch.At})
			continue
		}
		var ids []string
		for _, doc := range f.docs {
			if id, ok := docID(doc); ok && (c.collection != ch.Collection || key(id) != key(ch.ID)) {
				ids = append(ids, id)
			}
		}
		slices.Sort(ids)
		for _, id := range slices.Compact(ids) {
			out = append(out, sources.Change{Collection: c.collection, ID: id, Op: sources.OpUpdate, At: ch.At, Version: derivedVersion(ch)})
		}
	}
	return out, nil
}

// derivedVersion is the Version of a change derived from ch: the same on
// every replica that derives it, "" when ch has none.
func derivedVersion(ch sources.Change) string {
	if ch.Version == "" {
		return ""
	}
	return sources.VersionOf([]byte("derived\x00" + ch.Collection + "\x00" + ch.ID + "\x00" + ch.Version))
}

// A hop is where a chain of collection reaches a changed document: the
// chain's edges up to the one that does.
type hop struct {
	collection string
	chain      chain
}

// reaching lists the hops that reach documents of coll, in the order of
// the chains table. An edge within another is skipped: that one reaches
// every document it does.
func reaching(coll string) []hop {
	var out []hop
	for _, c := range chains {
		for _, ch := range c.chains {
			for k, e := range ch {
				if e.to == coll && e.within == nil {
					out = append(out, hop{collection: c.collection, chain: ch[:k+1]})
				}
			}
		}
	}
	return out
}

// embedders lists the collections whose documents embed documents of
// coll, in the order of the chains table.
func embedders(coll string) []string {
	var out []string
	for _, c := range chains {
		if slices.ContainsFunc(c.chains, func(ch chain) bool {
			return slices.ContainsFunc(ch, func(e *edge) bool { return e.to == coll })
		}) {
			out = append(out, c.collection)
		}
	}
	return out
}

// refFields are the fields of coll's documents that links match other
// than _id: what a document of coll links to by its own fields.
func refFields(coll string) []string {
	var out []string
	for _, h := range reaching(coll) {
		if f := h.chain[len(h.chain)-1].toField; f != "_id" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// found is what the walks found of one collection: its documents, or
// over when there are more than the bound.
type found struct {
	docs []*sources.Doc
	over bool
}

func (f *found) add(g found, bound int) {
	if g.over {
		f.over, f.docs = true, nil
		return
	}
	f.docs = append(f.docs, g.docs...)
	if distinct(f.docs) > bound {
		f.over, f.docs = true, nil
	}
}

// distinct counts the documents of docs by _id.
func distinct(docs []*sources.Doc) int {
	seen := map[string]bool{}
	for _, d := range docs {
		if id, ok := docKey(d, "_id"); ok {
			seen[id] = true
		}
	}
	return len(seen)
}

// A walker walks chains backwards for one change, each lookup once.
type walker struct {
	d    *Deriver
	memo map[string]found
}

// back returns the documents at the start of c that reach, along c, a
// document of the last edge's target whose toField holds one of values.
func (w *walker) back(ctx context.Context, c chain, values []any) (found, error) {
	for j := len(c) - 1; j >= 0; j-- {
		if len(values) == 0 {
			return found{}, nil
		}
		f, err := w.find(ctx, c[j], values)
		if err != nil || f.over || j == 0 {
			return f, err
		}
		values = fieldValues(f.docs, c[j-1].toField)
	}
	return found{}, nil
}

// find returns the documents of e.from that name one of values, or over
// when more than the bound do.
func (w *walker) find(ctx context.Context, e *edge, values []any) (found, error) {
	var b strings.Builder
	b.WriteString(e.from + "\x00" + strings.Join(e.fromFields, ","))
	for _, v := range values {
		b.WriteString("\x00" + fmt.Sprint(v))
	}
	memo := b.String()
	if f, ok := w.memo[memo]; ok {
		return f, nil
	}
	var f found
	for _, l := range e.reverse(values, w.d.bound+1) {
		docs, err := w.d.store.Lookup(ctx, l)
		if err != nil {
			return found{}, err
		}
		f.add(found{docs: docs, over: len(docs) > w.d.bound}, w.d.bound)
		if f.over {
			break
		}
	}
	w.memo[memo] = f
	return f, nil
}

// fieldValues returns the distinct ids at field of docs, as lookup
// values.
func fieldValues(docs []*sources.Doc, field string) []any {
	var set valueSet
	for _, d := range docs {
		for _, id := range pathValues(d, field) {
			set.add(id)
		}
	}
	return set.values
}

// refRecord is what a RefStore keeps of a document: the version of its
// last change, the ids its fields named after it (Now) and before it
// (Was), by field. Was makes deriving a change again (a retry, another
// replica) find what the first derivation found.
type refRecord struct {
	Version string              `json:"v,omitempty"`
	Now     map[string][]string `json:"now,omitempty"`
	Was     map[string][]string `json:"was,omitempty"`
}

// values returns, per field of ch's collection that links match, the ids
// it holds now and held before ch, as lookup values; and keeps the ids
// it holds now for the next change.
func (d *Deriver) values(ctx context.Context, ch sources.Change) (map[string][]any, error) {
	out := map[string][]any{"_id": {ch.ID}}
	fields := refFields(ch.Collection)
	if len(fields) == 0 {
		return out, nil
	}
	now := map[string][]string{}
	if ch.Op != sources.OpDelete {
		docs, err := d.store.Lookup(ctx, sources.Lookup{Collection: ch.Collection, Field: "_id", Values: []any{ch.ID}})
		if err != nil {
			return nil, fmt.Errorf("enrich: reading %s/%s: %w", ch.Collection, ch.ID, err)
		}
		for _, doc := range docs {
			for _, f := range fields {
				now[f] = append(now[f], pathValues(doc, f)...)
			}
		}
	}
	b, err := d.refs.Refs(ctx, ch.Collection, ch.ID)
	if err != nil {
		return nil, fmt.Errorf("enrich: the references of %s/%s: %w", ch.Collection, ch.ID, err)
	}
	var rec refRecord
	if len(b) > 0 {
		if err := json.Unmarshal(b, &rec); err != nil {
			d.log.Warn("enrich: kept references do not read; deriving from the document as it is", "collection", ch.Collection, "id", ch.ID, "error", err)
			rec = refRecord{}
		}
	}
	was := rec.Now
	if ch.Version != "" && rec.Version == ch.Version {
		was = rec.Was // derived before: what was there then
	}
	was = cloneRefs(was)
	if ch.Before != nil {
		for _, f := range fields {
			was[f] = append(was[f], pathValues(ch.Before, f)...)
		}
	}
	for _, f := range fields {
		var set valueSet
		for _, id := range append(slices.Clone(now[f]), was[f]...) {
			set.add(id)
		}
		out[f] = set.values
	}
	if err := d.keep(ctx, ch, refRecord{Version: ch.Version, Now: compactRefs(now), Was: compactRefs(was)}); err != nil {
		return nil, err
	}
	return out, nil
}

// keep saves a document's references: for a while after its deletion,
// dropped when there are none.
func (d *Deriver) keep(ctx context.Context, ch sources.Change, rec refRecord) error {
	var b []byte
	if len(rec.Now) > 0 || len(rec.Was) > 0 {
		var err error
		if b, err = json.Marshal(rec); err != nil {
			return err
		}
	}
	ttl := time.Duration(0)
	if ch.Op == sources.OpDelete {
		ttl = deletedRefsTTL
	}
	if err := d.refs.SaveRefs(ctx, ch.Collection, ch.ID, b, ttl); err != nil {
		return fmt.Errorf("enrich: keeping the references of %s/%s: %w", ch.Collection, ch.ID, err)
	}
	return nil
}

func cloneRefs(m map[string][]string) map[string][]string {
	out := make(map[string][]string, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}

// compactRefs drops empty fields and repeated ids; nil when nothing is
// left.
func compactRefs(m map[string][]string) map[string][]string {
	var out map[string][]string
	for k, v := range m {
		var set valueSet
		for _, id := range v {
			set.add(id)
		}
		if set.len() == 0 {
			continue
		}
		if out == nil {
			out = map[string][]string{}
		}
		ids := make([]string, set.len())
		for i, v := range set.values {
			ids[i] = v.(string)
		}
		out[k] = ids
	}
	return out
}

// memRefs is a RefStore in this process's memory: for a replica without
// Redis, which is the whole fleet.
type memRefs struct {
	now   func() time.Time
	mu    sync.Mutex
	m     map[string]memRef
	saves int
}

type memRef struct {
	b       []byte
	expires time.Time // zero: never
}

func (m *memRefs) Refs(_ context.Context, collection, id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.m[collection+"\x00"+id]
	if !ok || !r.expires.IsZero() && !m.now().Before(r.expires) {
		return nil, nil
	}
	return r.b, nil
}

func (m *memRefs) SaveRefs(_ context.Context, collection, id string, refs []byte, ttl time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := collection + "\x00" + id
	if refs == nil {
		delete(m.m, k)
		return nil
	}
	r := memRef{b: refs}
	now := m.now()
	if ttl > 0 {
		r.expires = now.Add(ttl)
	}
	m.m[k] = r
	// Now and then, forget what expired.
	if m.saves++; m.saves%1024 == 0 {
		for k, r := range m.m {
			if !r.expires.IsZero() && !now.Before(r.expires) {
				delete(m.m, k)
			}
		}
	}
	return nil
}

// DeriveLookups lists the shape of every lookup a Deriver makes (the
// collection and the field it matches; all on the document database,
// unsorted), for `prodapi check`'s index report, as Lookups does the
// enrichers'. They run once per change the feed reports, not per request.
func DeriveLookups() []sources.Lookup {
	var out []sources.Lookup
	add := func(l sources.Lookup) {
		if !slices.ContainsFunc(out, func(m sources.Lookup) bool { return m.Collection == l.Collection && m.Field == l.Field }) {
			out = append(out, l)
		}
	}
	for _, c := range chains {
		for _, ch := range c.chains {
			for _, e := range ch {
				if e.within != nil {
					continue
				}
				for _, l := range e.reverse(nil, 0) {
					add(l)
				}
				if e.toField != "_id" {
					add(sources.Lookup{Collection: e.to, Field: "_id"}) // the changed document, for what it links to now
				}
			}
		}
	}
	return out
}
