package cache

import (
	"context"
	"errors"

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
	type work struct {
		ids   []string
		flush bool
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
	now := c.now()
	for _, ch := range changes {
		if !ch.At.IsZero() {
			c.metrics.changeLag.Set(now.Sub(ch.At).Seconds())
		}
		c.metrics.changes.Inc(ch.Op)
		for _, r := range sources.ResourcesOf(ch.Collection) {
			w := at(r.Name)
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
	var errs []error
	for _, res := range order {
		w := byRes[res]
		var err error
		if w.flush {
			err = c.PurgeResource(ctx, res)
		} else {
			err = c.Changed(ctx, res, w.ids...)
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
