package enrich

import (
	"context"

	"github.com/prodapi/prodapi/sources"
)

// items converts profiles to content type names and links each item that
// names an assignment to it, its planning and the planning's event:
//
//	"assignment": {"title": "Assignment", "href": "assignments/<id>", "state": ..., "scheduled": ..., "content_type": ...},
//	"planning":   {"title": "Planning", "href": "planning/<planning_item>"},
//	"event":      {"title": "Event", "href": "events/<event_item>"}
//
// At most three lookups: assignments and content types together, then
// planning.
func (r *request) items(ctx context.Context, docs []*sources.Doc, links []*sources.Doc) error {
	// Profiles: only truthy ones; a string that is not an ObjectId is the
	// literal "None"; a non-string (an int) stays as it is.
	profiles := make([]string, len(docs)) // lower-case hex per doc, "" when none
	var types, assignments valueSet
	for i, d := range docs {
		if d == nil {
			continue
		}
		if v, _ := d.Get("profile"); truthy(v) {
			switch p := v.(type) {
			case string:
				if id, ok := sources.ParseObjectID(p); ok {
					profiles[i] = id.Hex()
				} else {
					d.Set("profile", "None")
				}
			case sources.ObjectID:
				profiles[i] = p.Hex()
			}
			if profiles[i] != "" {
				types.add(profiles[i])
			}
		}
		if v, _ := d.Get("assignment_id"); truthy(v) {
			if id, ok := idOf(v); ok {
				assignments.add(id)
			}
		}
	}

	ct := &call{step: "content_types", l: itemProfile.lookup(types)}
	as := &call{step: "assignments", l: itemAssignment.lookup(assignments)}
	if err := r.run(ctx, ct, as); err != nil {
		return err
	}

	// A failed content type lookup gives what a missing content type
	// gives: the id.
	contentTypes := byKey(ct.docs, "_id")
	for i, d := range docs {
		if profiles[i] != "" {
			d.Set("profile", profileName(contentTypes[profiles[i]], profiles[i]))
		}
	}

	if !as.ok() {
		return nil
	}
	byID := byKey(as.docs, "_id")
	var plannings valueSet
	for _, a := range as.docs {
		if id, ok := idOf(get(a, "planning_item")); ok {
			plannings.add(id)
		}
	}
	pl := &call{step: "planning", l: assignmentPlanning.lookup(plannings)}
	if err := r.run(ctx, pl); err != nil {
		return err
	}
	planningByID := byKey(pl.docs, "_id")

	for i, d := range docs {
		if d == nil {
			continue
		}
		k, ok := docKey(d, "assignment_id")
		if !ok {
			continue
		}
		a := byID[k]
		if a == nil {
			continue
		}
		l := sources.NewDoc()
		if al, ok := assignmentLink(a); ok {
			l.Set("assignment", al)
		}
		if pid, ok := idOf(get(a, "planning_item")); ok {
			l.Set("planning", sources.Link("Planning", "planning/"+pid))
			if ev, ok := idOf(get(planningByID[key(pid)], "event_item")); ok {
				l.Set("event", sources.Link("Event", "events/"+ev))
			}
		}
		if l.Len() > 0 {
			links[i] = l
		}
	}
	return nil
}

// profileName is the original's format_content_type_name: the content
// type's output_name if non-empty, else its label if it has one (a null
// label counts as none), else the id, without any character outside
// [0-9A-Za-z_].
func profileName(ct *sources.Doc, id string) string {
	name := id
	if s, _ := ct.String("output_name"); s != "" {
		name = s
	} else if s, ok := ct.String("label"); ok {
		name = s
	}
	b := make([]byte, 0, len(name))
	for i := 0; i < len(name); i++ {
		if isWord(name[i]) {
			b = append(b, name[i])
		}
	}
	return string(b)
}

// assignmentLink is the original's construct_assignment_link. The three
// extra keys are always present, null when the assignment lacks them.
func assignmentLink(a *sources.Doc) (*sources.Doc, bool) {
	id, ok := docID(a)
	if !ok {
		return nil, false
	}
	return sources.NewDoc(
		sources.Field{Key: "title", Value: "Assignment"},
		sources.Field{Key: "href", Value: "assignments/" + id},
		sources.Field{Key: "state", Value: get(a, "assigned_to.state")},
		sources.Field{Key: "scheduled", Value: get(a, "planning.scheduled")},
		sources.Field{Key: "content_type", Value: get(a, "planning.g2_content_type")},
	), true
}

// contentLink is the original's construct_content_link; an item without
// state or pubstatus gets null (the original answered 500).
func contentLink(item *sources.Doc) (*sources.Doc, bool) {
	id, ok := docID(item)
	if !ok {
		return nil, false
	}
	return sources.NewDoc(
		sources.Field{Key: "title", Value: "Item"},
		sources.Field{Key: "href", Value: "items/" + id},
		sources.Field{Key: "state", Value: get(item, "state")},
		sources.Field{Key: "pubstatus", Value: get(item, "pubstatus")},
	), true
}

// docID returns the _id of d as an href carries it.
func docID(d *sources.Doc) (string, bool) {
	v, _ := d.Get("_id")
	return idOf(v)
}
