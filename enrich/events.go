package enrich

import (
	"context"

	"github.com/prodapi/prodapi/sources"
)

// events links each event to the plannings that name it (event_item),
// most recently updated first, and to the assignments of those plannings'
// coverages as stored (no sync):
//
//	"plannings":   [{"title": "Planning", "href": "planning/<_id>"}, ...],
//	"assignments": [<assignment link, as for planning>, ...]
//
// Three lookups: planning by event_item, then assignments by _id and
// archive by assignment_id together. An event without guid gets nothing
// (the original's {"event_item": null} matched every planning without an
// event).
func (r *request) events(ctx context.Context, docs []*sources.Doc, links []*sources.Doc) error {
	var guids valueSet
	for _, d := range docs {
		if d == nil {
			continue
		}
		if id, ok := idOf(get(d, "guid")); ok {
			guids.add(id)
		}
	}
	pl := &call{step: "plannings", l: eventPlannings.lookup(guids)}
	pl.l.Sort, pl.l.Limit = recentFirst(), r.listLimit(guids.len(), false)
	if err := r.run(ctx, pl); err != nil {
		return err
	}
	if !pl.ok() {
		return nil
	}
	byEvent := groupByKey(pl.docs, "event_item")

	plannings := make([][]*sources.Doc, len(docs))
	ids := make([][]string, len(docs))
	var assignments valueSet
	for i, d := range docs {
		if d == nil {
			continue
		}
		k, ok := docKey(d, "guid")
		if !ok {
			continue
		}
		ps := byEvent[k]
		if len(ps) > r.e.linkLimit {
			ps = ps[:r.e.linkLimit]
		}
		plannings[i] = ps
		for _, p := range ps {
			ids[i] = append(ids[i], assignmentIDs(p)...)
		}
		for _, id := range ids[i] {
			assignments.add(id)
		}
	}

	asg, content := r.assignmentCalls(assignments)
	if err := r.run(ctx, asg, content); err != nil {
		return err
	}
	al := r.newAssignmentLinker(asg, content)
	for i, d := range docs {
		if d == nil || len(plannings[i]) == 0 {
			continue
		}
		l := sources.NewDoc()
		list := make([]any, 0, len(plannings[i]))
		for _, p := range plannings[i] {
			if id, ok := docID(p); ok {
				list = append(list, sources.Link("Planning", "planning/"+id))
			}
		}
		if len(list) > 0 {
			l.Set("plannings", list)
		}
		if len(ids[i]) > 0 && asg.ok() {
			l.Set("assignments", al.links(ids[i]))
		}
		if l.Len() > 0 {
			links[i] = l
		}
	}
	return nil
}
