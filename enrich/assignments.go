package enrich

import (
	"context"

	"github.com/prodapi/prodapi/sources"
)

// assignments links each assignment to its planning, the planning's event
// and the archive items that fulfil it, most recently updated first:
//
//	"planning": {"title": "Planning", "href": "planning/<planning_item>"},
//	"event":    {"title": "Event", "href": "events/<event_item>"},
//	"content":  [{"title": "Item", "href": "items/<_id>", "state": ..., "pubstatus": ...}, ...]
//
// Two lookups, together: planning by _id, archive by assignment_id.
func (r *request) assignments(ctx context.Context, docs []*sources.Doc, links []*sources.Doc) error {
	var ids, plannings valueSet
	for _, d := range docs {
		if d == nil {
			continue
		}
		if id, ok := docID(d); ok {
			ids.add(id)
		}
		if id, ok := idOf(get(d, "planning_item")); ok {
			plannings.add(id)
		}
	}
	pl := &call{step: "planning", l: assignmentPlanning.lookup(plannings)}
	content := &call{step: "content", l: assignmentContent.lookup(ids)}
	content.l.Sort, content.l.Limit, content.l.Search = recentFirst(), r.listLimit(ids.len(), true), true
	if err := r.run(ctx, pl, content); err != nil {
		return err
	}
	planningByID := byKey(pl.docs, "_id")
	items := groupByKey(content.docs, "assignment_id")

	for i, d := range docs {
		if d == nil {
			continue
		}
		l := sources.NewDoc()
		if pid, ok := idOf(get(d, "planning_item")); ok {
			l.Set("planning", sources.Link("Planning", "planning/"+pid))
			if ev, ok := idOf(get(planningByID[key(pid)], "event_item")); ok {
				l.Set("event", sources.Link("Event", "events/"+ev))
			}
		}
		if k, ok := docKey(d, "_id"); ok {
			var list []any
			for _, item := range items[k] {
				if len(list) == r.e.linkLimit {
					break
				}
				if cl, ok := contentLink(item); ok {
					list = append(list, cl)
				}
			}
			if len(list) > 0 {
				l.Set("content", list)
			}
		}
		if l.Len() > 0 {
			links[i] = l
		}
	}
	return nil
}
