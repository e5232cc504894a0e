package cache

import (
	"context"
	"errors"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// shapedBy names, per collection that no resource serves, the resources
// whose documents are shaped from it: an item's shape reads its content
// type, so a change to content_types obsoletes every item entry.
var shapedBy = map[string][]string{"content_types": {"items"}}

// Apply invalidates what a change feed reports: for each resource served
// from a changed collection, the entries including the changed documents
// and its lists (Changed), or everything of the resource for OpFlush.
// Changes to one resource go out as one invalidation.
func (c *Cache) Apply(ctx context.Context, changes []sources.Change) error {
	now := c.now()
	for _, ch := range changes {
		if !ch.At.IsZero() {
			c.metrics.changeLag.Set(now.Sub(ch.At).Seconds())
		}
		c.metrics.changes.Inc(ch.Op)
	}
	sets, again := invalidationsOf(changes)
	var errs []error
	for _, tags := range sets {
		errs = append(errs, c.invalidate(ctx, tags))
	}
	if len(again) > 0 {
		c.invalidateLater(again)
	}
	return errors.Join(errs...)
}

// ApplyLocal applies changes to this process alone: the in-process part
// of Apply, with the same tags (the in-process tier's entries, the
// generations remembered, the fence of the fills under way), and no
// write to Redis, no message to the other replicas. It is what a replica
// does with an entry of the fleet's change log that another replica
// appended (and applied with Apply): once it returns, this replica
// serves nothing it held from before the changes.
func (c *Cache) ApplyLocal(_ context.Context, changes []sources.Change) {
	sets, _ := invalidationsOf(changes)
	for _, tags := range sets {
		c.applyInvalidation(tags)
	}
}

// invalidationsOf is what Apply invalidates for changes: one set of tags
// per resource, in the order of the changes (Changed's tags, or
// PurgeResource's for a flush), and the search lists' tags to invalidate
// once more after Options.SearchLag.
func invalidationsOf(changes []sources.Change) (sets [][]string, again []string) {
	type work struct {
		ids    []string
		flush  bool
		search bool
	}
	byRes := map[string]*work{}
	var order []string
	at := func(res string) *work {
		w := byRes[res]
		if w == nil {
			w = &work{}
			byRes[res] = w
			order = append(order, res)
		}
		return w
	}
	for _, ch := range changes {
		for _, r := range sources.ResourcesOf(ch.Collection) {
			w := at(r.Name)
			w.search = r.Search
			if ch.Op == sources.OpFlush || ch.ID == "" {
				w.flush = true
			} else {
				w.ids = append(w.ids, ch.ID)
			}
		}
		for _, name := range shapedBy[ch.Collection] {
			at(name).flush = true
		}
	}
	for _, res := range order {
		w := byRes[res]
		if w.search {
			again = append(again, tagList+res)
		}
		if w.flush {
			sets = append(sets, resourceTags(res))
		} else {
			sets = append(sets, changedTags(res, w.ids))
		}
	}
	return sets, again
}

// invalidateLater invalidates tags once more after Options.SearchLag: a
// search index shows a write a moment after the database reported it,
// and a list loaded in between would hold the old version until its TTL.
func (c *Cache) invalidateLater(tags []string) {
	if c.searchLag <= 0 {
		return
	}
	// Ends after searchLag, or at once when Close cancels the base.
	c.bg.goRun(func(base context.Context) {
		after := c.bg.after
		if after == nil {
			t := time.NewTimer(c.searchLag)
			defer t.Stop()
			after = func(time.Duration) <-chan time.Time { return t.C }
		}
		select {
		case <-base.Done():
			return
		case <-after(c.searchLag):
		}
		if err := c.invalidate(base, tags); err != nil {
			c.log.Warn("cache: the second invalidation of search lists failed", "error", err)
		}
	})
}
