package enrich

import (
	"cmp"
	"context"
	"slices"

	"github.com/prodapi/prodapi/sources"
)

// planning syncs each planning's coverages with their current assignments
// (sync_assignment_details_to_coverages) and links it to its event and to
// the assignments its coverages name:
//
//	"event":       {"title": "Event", "href": "events/<event_item>"},
//	"assignments": [{"title": "Assignment", "href": ..., "state": ..., "scheduled": ..., "content_type": ...,
//	                 "content_href": ..., "content_state": ..., "content_pubstatus": ...}, ...]
//
// Four lookups, together: assignments by coverage_item and by
// scheduled_update_id (document database), assignments by _id and archive
// by assignment_id (search index). They can run at once because syncing a
// coverage never changes which assignment it names: it only rewrites the
// id it found the assignment by.
func (r *request) planning(ctx context.Context, docs []*sources.Doc, links []*sources.Doc) error {
	var coverages, updates, assignments valueSet
	ids := make([][]string, len(docs))
	for i, d := range docs {
		if d == nil {
			continue
		}
		if !d.Has("coverages") {
			d.Set("coverages", []any{})
		}
		covs, _ := list(d, "coverages")
		for _, c := range covs {
			cov, ok := asDoc(c)
			if !ok {
				continue
			}
			if id, ok := idOf(get(cov, "coverage_id")); ok {
				coverages.add(id)
			}
			ups, _ := list(cov, "scheduled_updates")
			for _, u := range ups {
				if up, ok := asDoc(u); ok {
					if id, ok := idOf(get(up, "scheduled_update_id")); ok {
						updates.add(id)
					}
				}
			}
		}
		ids[i] = assignmentIDs(d)
		for _, id := range ids[i] {
			assignments.add(id)
		}
	}

	byCoverage := &call{step: "coverage sync", l: planningCoverages.lookup(coverages)}
	byUpdate := &call{step: "scheduled update sync", l: planningUpdates.lookup(updates)}
	asg, content := r.assignmentCalls(assignments)
	if err := r.run(ctx, byCoverage, byUpdate, asg, content); err != nil {
		return err
	}

	s := syncer{}
	if byCoverage.ok() {
		s.byCoverage = groupByKey(byCoverage.docs, "coverage_item")
	}
	if byUpdate.ok() {
		s.byUpdate = groupByKey(byUpdate.docs, "scheduled_update_id")
	}
	al := r.newAssignmentLinker(asg, content)
	for i, d := range docs {
		if d == nil {
			continue
		}
		s.sync(d)
		l := sources.NewDoc()
		if ev, ok := idOf(get(d, "event_item")); ok {
			l.Set("event", sources.Link("Event", "events/"+ev))
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

// assignmentIDs is the original's get_assignment_ids_from_planning: for
// each coverage in order, its assigned_to.assignment_id, then those of its
// scheduled updates; no de-duplication.
func assignmentIDs(p *sources.Doc) []string {
	var ids []string
	covs, _ := list(p, "coverages")
	for _, c := range covs {
		cov, ok := asDoc(c)
		if !ok {
			continue
		}
		if id, ok := idOf(get(cov, "assigned_to.assignment_id")); ok {
			ids = append(ids, id)
		}
		ups, _ := list(cov, "scheduled_updates")
		for _, u := range ups {
			if up, ok := asDoc(u); ok {
				if id, ok := idOf(get(up, "assigned_to.assignment_id")); ok {
					ids = append(ids, id)
				}
			}
		}
	}
	return ids
}

// A syncer holds the assignments found for a page's coverages and
// scheduled updates, grouped by the coverage_item or scheduled_update_id
// they were found by; a nil map means the lookup failed and nothing is
// overwritten.
type syncer struct {
	byCoverage, byUpdate map[string][]*sources.Doc
}

// sync is sync_assignment_details_to_coverages for one planning. As in the
// original, a planning only sees the assignments found by its own
// coverages' ids, and a coverage's scheduled updates only those found by
// that coverage's update ids.
func (s syncer) sync(p *sources.Doc) {
	covs, ok := list(p, "coverages")
	if !ok || len(covs) == 0 {
		return // null coverages stay null
	}
	found := foundBy(covs, "coverage_id", s.byCoverage)
	for _, c := range covs {
		if cov, ok := asDoc(c); ok {
			syncAssignedTo(cov, found)
		}
	}
	for _, c := range covs {
		cov, ok := asDoc(c)
		if !ok {
			continue
		}
		if !cov.Has("scheduled_updates") {
			cov.Set("scheduled_updates", []any{})
		}
		ups, _ := list(cov, "scheduled_updates")
		if len(ups) == 0 {
			continue
		}
		found := foundBy(ups, "scheduled_update_id", s.byUpdate)
		for _, u := range ups {
			if up, ok := asDoc(u); ok {
				syncAssignedTo(up, found)
			}
		}
	}
}

// foundBy maps assignment id keys to the assignments found by the field
// ids of objs.
func foundBy(objs []any, field string, groups map[string][]*sources.Doc) map[string]*sources.Doc {
	if groups == nil {
		return nil
	}
	found := make(map[string]*sources.Doc)
	for _, o := range objs {
		obj, ok := asDoc(o)
		if !ok {
			continue
		}
		k, ok := docKey(obj, field)
		if !ok {
			continue
		}
		for _, a := range groups[k] {
			if ak, ok := docKey(a, "_id"); ok {
				found[ak] = a
			}
		}
	}
	return found
}

// syncedKeys are copied from the assignment's assigned_to onto the
// coverage's, in the original's order (it decides where new keys land).
var syncedKeys = []string{"desk", "user", "contact", "state", "assignor_user", "assignor_desk",
	"assigned_date_desk", "assigned_date_user", "coverage_provider"}

// syncAssignedTo sets an empty assigned_to of obj (a coverage or a
// scheduled update) to {}, and overwrites a non-empty one with the current
// details of the assignment it names, when that was found.
func syncAssignedTo(obj *sources.Doc, found map[string]*sources.Doc) {
	v, _ := obj.Get("assigned_to")
	if !truthy(v) {
		obj.Set("assigned_to", sources.NewDoc())
		return
	}
	at, ok := asDoc(v)
	if !ok {
		return
	}
	k, ok := docKey(at, "assignment_id")
	if !ok {
		return
	}
	a := found[k]
	if a == nil {
		return
	}
	id, _ := a.Get("_id")
	at.Set("assignment_id", id)
	src, _ := a.Doc("assigned_to")
	for _, f := range syncedKeys {
		v, _ := src.Get(f)
		at.Set(f, sources.CloneValue(v))
	}
	at.Set("priority", get(a, "priority"))
}

// assignmentCalls are the two search lookups behind assignment link lists
// (construct_assignment_links): the assignments, by planning.scheduled, and
// the archive items that name them, most recently updated first.
func (r *request) assignmentCalls(ids valueSet) (asg, content *call) {
	asg = &call{step: "assignment links", l: planningAssignments.lookup(ids)}
	asg.l.Sort, asg.l.Limit, asg.l.Search = []sources.SortKey{{Field: "planning.scheduled"}}, min(ids.len(), searchWindow), true
	content = &call{step: "assignment content", l: assignmentContent.lookup(ids)}
	content.l.Sort, content.l.Limit, content.l.Search = recentFirst(), r.listLimit(ids.len(), true), true
	return asg, content
}

// An assignmentLinker builds assignment link lists from the results of
// assignmentCalls.
type assignmentLinker struct {
	found   map[string]*sources.Doc // by assignment id key
	rank    map[string]int          // position of the assignment's planning.scheduled among the distinct values, in lookup order
	content map[string]*sources.Doc // the most recently updated item per assignment id key; nil when its lookup failed
	limit   int
}

func (r *request) newAssignmentLinker(asg, content *call) *assignmentLinker {
	al := &assignmentLinker{found: map[string]*sources.Doc{}, rank: map[string]int{}, limit: r.e.linkLimit}
	if asg.ok() {
		// The lookup is sorted by planning.scheduled; number its runs of
		// equal values so that ties can be ordered by id, whatever order
		// the backend gave them.
		var prev any
		group := -1
		for _, a := range asg.docs {
			k, ok := docKey(a, "_id")
			if !ok {
				continue
			}
			s, _ := a.Path("planning.scheduled")
			if group < 0 || !sameScheduled(prev, s) {
				group++
				prev = s
			}
			if _, dup := al.found[k]; !dup {
				al.found[k] = a
				al.rank[k] = group
			}
		}
	}
	if content.ok() {
		al.content = byKey(content.docs, "assignment_id")
	}
	return al
}

// links is construct_assignment_links(ids): one link per distinct found
// assignment, by planning.scheduled and, on ties, by assignment id; at
// most limit of them. Each carries content_href, content_state and
// content_pubstatus when an archive item names the assignment.
func (al *assignmentLinker) links(ids []string) []any {
	keys := make([]string, 0, len(ids))
	var seen map[string]bool // for long lists; short ones are scanned
	if len(ids) > 16 {
		seen = make(map[string]bool, len(ids))
	}
	for _, id := range ids {
		k := key(id)
		if al.found[k] == nil {
			continue
		}
		if seen != nil {
			if seen[k] {
				continue
			}
			seen[k] = true
		} else if slices.Contains(keys, k) {
			continue
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(al.rank[a], al.rank[b]), cmp.Compare(a, b))
	})
	if len(keys) > al.limit {
		keys = keys[:al.limit]
	}
	out := make([]any, 0, len(keys))
	for _, k := range keys {
		l, ok := assignmentLink(al.found[k])
		if !ok {
			continue
		}
		if item := al.content[k]; item != nil {
			if id, ok := docID(item); ok {
				l.Set("content_href", "items/"+id)
				l.Set("content_state", get(item, "state"))
				l.Set("content_pubstatus", get(item, "pubstatus"))
			}
		}
		out = append(out, l)
	}
	return out
}
