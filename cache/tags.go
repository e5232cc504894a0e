package cache

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strings"
	"sync"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/sources"
)

// Tags name what an entry was built from (see "Invalidation" in the
// package documentation):
//
//	all              every entry
//	res:<resource>   every entry of a resource, details and lists
//	list:<resource>  every list of a resource
//	doc:<res>/<id>   every entry that includes the document
const (
	tagAll      = "all"
	tagResource = "res:"
	tagList     = "list:"
	tagDoc      = "doc:"
)

// Limits of tagging: an entry with more tags than maxTags is served but
// not stored; the in-process log of recent invalidations (which fences
// fills against invalidations that happen during their load) holds
// recentInvalidations of them.
const (
	maxTags             = 1024
	recentInvalidations = 1024
)

// genUnknown is the generation recorded for a tag whose generation could
// not be read: it matches no current generation, so such an entry is
// never taken as current from Redis.
const genUnknown = redistier.UnknownGen

// staticTags are the tags of an entry for q known before it is loaded.
func staticTags(q *sources.Query) []string {
	res := q.Resource.Name
	if q.IsDetail() {
		return []string{tagAll, tagResource + res, tagDoc + res + "/" + q.ID}
	}
	return []string{tagAll, tagResource + res, tagList + res}
}

// entryTags are the static tags of q followed by a doc tag for every
// document rep was built from, without duplicates.
func entryTags(static []string, rep *sources.Representation) []string {
	tags := slices.Clip(static)
	seen := make(map[string]struct{}, len(static)+len(rep.Docs))
	for _, t := range static {
		seen[t] = struct{}{}
	}
	for _, d := range rep.Docs {
		t := tagDoc + d
		if _, ok := seen[t]; ok {
			continue
		}
		seen[t] = struct{}{}
		tags = append(tags, t)
	}
	return tags
}

// tagBytes estimates the memory of e's tags.
func (e *entry) tagBytes() int64 {
	n := int64(len(e.tags)) * (16 + 8 + 48) // string header, generation, index slot
	for _, t := range e.tags {
		n += int64(len(t))
	}
	return n
}

// A fence is what a fill notes before its load: the generations of the
// key's static tags, and the in-process invalidation sequence. An
// invalidation during the load then keeps the result out of both tiers.
type fence struct {
	static []string
	gens   []uint64 // of static; nil when unknown
	seq    uint64
}

func (c *Cache) beginFill(ctx context.Context, q *sources.Query) fence {
	f := fence{static: staticTags(q), seq: c.inval.seqNow()}
	if c.redis != nil {
		if gens, ok := c.redis.Gens(ctx, f.static); ok {
			f.gens = gens
		}
	}
	return f
}

// tag gives e the tags of rep and the generations they are stored under.
// It reports false when e must not be stored: too many tags, or an
// invalidation of one of them arrived since f was taken.
func (c *Cache) tag(ctx context.Context, f fence, rep *sources.Representation, e *entry) bool {
	tags := entryTags(f.static, rep)
	if len(tags) > maxTags {
		return false
	}
	if c.inval.since(f.seq, tags) {
		c.metrics.fencedFills.Inc()
		return false
	}
	e.tags = tags
	e.gens = make([]uint64, len(tags))
	if c.redis == nil {
		return true
	}
	n := len(f.static)
	if f.gens != nil {
		copy(e.gens, f.gens)
	} else {
		for i := range n {
			e.gens[i] = genUnknown
		}
	}
	if len(tags) > n {
		gens, ok := c.redis.Gens(ctx, tags[n:])
		if !ok {
			for i := n; i < len(tags); i++ {
				e.gens[i] = genUnknown
			}
		} else {
			copy(e.gens[n:], gens)
		}
	}
	return true
}

// The tagged value: a prefix carrying the tags and their generations,
// then the value encode makes.
//
//	"PDT\x01"  uvarint count, then per tag: uvarint length, the tag,
//	           uint64 generation (big-endian)
//
// A value without the prefix is untagged (asset redirects): always
// current. The inner value's CRC covers the key, not the tags: a tag
// section that does not parse is a corrupt value.
const tagMagic = "PDT\x01"

func encodeTagged(key string, e *entry) []byte {
	if len(e.tags) == 0 {
		return encode(key, e)
	}
	// One allocation for the tags and the value: the body is copied
	// once.
	b := make([]byte, 0, 16+int(e.tagBytes())+encodedLen(e))
	b = append(b, tagMagic...)
	b = binary.AppendUvarint(b, uint64(len(e.tags)))
	for i, t := range e.tags {
		b = binary.AppendUvarint(b, uint64(len(t)))
		b = append(b, t...)
		b = binary.BigEndian.AppendUint64(b, e.gens[i])
	}
	return appendEncoded(b, key, e)
}

func decodeTagged(key string, b []byte) (*entry, error) {
	if len(b) < len(tagMagic) || string(b[:len(tagMagic)]) != tagMagic {
		return decode(key, b)
	}
	b = b[len(tagMagic):]
	n, w := binary.Uvarint(b)
	if w <= 0 || n > maxTags {
		return nil, errCorrupt
	}
	b = b[w:]
	// The tags are substrings of one copy of the tag section: a list's
	// fifty tags cost three allocations, not fifty-two. The first pass
	// checks the section and finds its end.
	end := 0
	for range n {
		l, w := binary.Uvarint(b[end:])
		if w <= 0 || l > uint64(len(b)) || uint64(len(b)-end-w) < l+8 {
			return nil, errCorrupt
		}
		end += w + int(l) + 8
	}
	section := string(b[:end])
	tags := make([]string, n)
	gens := make([]uint64, n)
	off := 0
	for i := range tags {
		l, w := binary.Uvarint(b[off:])
		off += w
		tags[i] = section[off : off+int(l)]
		gens[i] = binary.BigEndian.Uint64(b[off+int(l):])
		off += int(l) + 8
	}
	e, err := decode(key, b[off:])
	if err != nil {
		return nil, err
	}
	e.tags, e.gens = tags, gens
	return e, nil
}

// invalLog is the in-process record of recent invalidations: a sequence
// number and the tags of the last recentInvalidations. A fill compares
// its entry's tags with what arrived during its load.
type invalLog struct {
	mu   sync.Mutex
	seq  uint64
	ring [recentInvalidations][]string
}

func (l *invalLog) seqNow() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seq
}

func (l *invalLog) add(tags []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	l.ring[l.seq%recentInvalidations] = tags
}

// since reports whether an invalidation after seq touched any of tags
// (or whether the log no longer reaches back to seq).
func (l *invalLog) since(seq uint64, tags []string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seq == seq {
		return false
	}
	if l.seq-seq > recentInvalidations {
		return true
	}
	var set map[string]struct{}
	for s := seq + 1; s <= l.seq; s++ {
		for _, t := range l.ring[s%recentInvalidations] {
			if t == tagAll {
				return true
			}
			if set == nil {
				set = make(map[string]struct{}, len(tags))
				for _, t := range tags {
					set[t] = struct{}{}
				}
			}
			if _, ok := set[t]; ok {
				return true
			}
		}
	}
	return false
}

// Changed tells the cache that documents of a resource were written
// (inserted, updated, replaced or deleted): every entry including one of
// them is obsolete, and so is every list of the resource, whose
// membership or order the write may have changed. Details of other
// documents stay. This is what a change feed calls.
func (c *Cache) Changed(ctx context.Context, resource string, ids ...string) error {
	return c.invalidate(ctx, changedTags(resource, ids))
}

// changedTags are the tags Changed invalidates.
func changedTags(resource string, ids []string) []string {
	tags := make([]string, 0, len(ids)+1)
	tags = append(tags, tagList+resource)
	for _, id := range ids {
		tags = append(tags, tagDoc+resource+"/"+id)
	}
	return tags
}

// PurgeDocs obsoletes every entry that includes one of the documents.
func (c *Cache) PurgeDocs(ctx context.Context, resource string, ids ...string) error {
	tags := make([]string, 0, len(ids))
	for _, id := range ids {
		tags = append(tags, tagDoc+resource+"/"+id)
	}
	return c.invalidate(ctx, tags)
}

// PurgeResource obsoletes every entry of a resource, details and lists.
func (c *Cache) PurgeResource(ctx context.Context, resource string) error {
	return c.invalidate(ctx, resourceTags(resource))
}

// resourceTags are the tags PurgeResource invalidates.
func resourceTags(resource string) []string { return []string{tagResource + resource} }

// PurgeAll obsoletes every entry (asset redirects, which are not built
// from documents, excepted).
func (c *Cache) PurgeAll(ctx context.Context) error {
	return c.invalidate(ctx, []string{tagAll})
}

// ErrNotPropagated reports an invalidation applied here but not written
// to Redis (unreachable, or the breaker is open): other replicas and
// Redis entries wait for their TTLs.
var ErrNotPropagated = errors.New("cache: the invalidation did not reach Redis")

// invalidate gives each tag a new generation in Redis, applies the
// invalidation to this process's tier, and publishes it to the other
// replicas. Generation values are random, never counters: a generation
// key that expired or was evicted reads as 0 and can never come back to
// a value an old entry recorded.
func (c *Cache) invalidate(ctx context.Context, tags []string) error {
	if len(tags) == 0 {
		return nil
	}
	var err error
	if c.redis != nil {
		if err = c.redis.NewGens(ctx, tags); err != nil {
			err = errors.Join(ErrNotPropagated, err)
		}
	}
	// Local first, then the others: this replica is fresh when the call
	// returns.
	c.applyInvalidation(tags)
	if c.redis != nil && err == nil {
		if perr := c.redis.Publish(ctx, invalidationMessage(tags)); perr != nil {
			err = errors.Join(ErrNotPropagated, perr)
		}
	}
	return err
}

// Invalidations counts the invalidations this process has applied: its
// own, the change feed's and those heard from the other replicas. What
// was read while it did not move is as current as a fill would be.
func (c *Cache) Invalidations() uint64 { return c.inval.seqNow() }

// applyInvalidation removes the in-process entries carrying any of tags
// and notes the invalidation for fills under way.
func (c *Cache) applyInvalidation(tags []string) {
	c.inval.add(tags)
	c.known.forget(tags)
	c.local.invalidate(tags)
	c.metrics.invalidationsApplied.Inc()
}

// An invalidation message (the payload the Redis tier sends after the
// sender's replica id) is one tag per line. A document id may hold a
// newline (MongoDB allows any string): its tag would read as two, and the
// document's entries would stay, so the message names the document's
// whole resource instead. The others drop more than they must; none keeps
// what it must drop.
func invalidationMessage(tags []string) string {
	var b strings.Builder
	for i, t := range tags {
		if strings.Contains(t, "\n") {
			doc, isDoc := strings.CutPrefix(t, tagDoc)
			res, _, _ := strings.Cut(doc, "/")
			t = tagResource + res
			if !isDoc || strings.Contains(res, "\n") {
				t = tagAll
			}
		}
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(t)
	}
	return b.String()
}

func parseInvalidation(payload string) []string { return strings.Split(payload, "\n") }

// A listener applies what the Redis tier hears on the invalidation
// channel to the cache.
type listener struct{ c *Cache }

// Subscribed starts using remembered generations again; after a time
// unsubscribed, when messages may have been missed, it first empties the
// in-process tier and fences the fills under way.
func (l listener) Subscribed(missed bool) {
	if missed {
		l.c.inval.add([]string{tagAll})
		l.c.local.clear()
	}
	l.c.known.setLive(true)
}

// Unsubscribed stops using remembered generations: invalidations may
// not arrive.
func (l listener) Unsubscribed() { l.c.known.setLive(false) }

// Message applies another replica's invalidation.
func (l listener) Message(payload string) { l.c.applyInvalidation(parseInvalidation(payload)) }
