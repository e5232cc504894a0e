package enrich

import (
	"strings"

	"github.com/prodapi/prodapi/sources"
)

// The _links graph, in one place. An edge is one link an enricher
// follows: a document of from names documents of to by the values at
// fromFields, which match their toField. The enrichers build their
// lookups from the edges (edge.lookup); chains say which documents each
// served document embeds, and the Deriver (derive.go) walks them
// backwards to find the documents a change obsoletes. A new link is an
// edge here and a place in chains: its entries come with it.
type edge struct {
	from string
	// fromFields are the paths in a from document that hold the values,
	// MongoDB's dotted paths (arrays on the way are traversed).
	fromFields []string
	to         string
	toField    string
	// within, when set, is an edge from the same documents whose targets
	// include every target of this one: the reverse derivation follows
	// that one instead. (A coverage syncs with an assignment it found by
	// coverage_item only when the coverage names the assignment's _id.)
	within *edge
}

// The edges. Each names its enricher's lookup.
var (
	// items: the content type of the profile.
	itemProfile = edge{from: "archive", fromFields: []string{"profile"}, to: "content_types", toField: "_id"}
	// items: the assignment the item fulfils.
	itemAssignment = edge{from: "archive", fromFields: []string{"assignment_id"}, to: "assignments", toField: "_id"}
	// items (through their assignment) and assignments: the planning,
	// whose event_item gives the event link.
	assignmentPlanning = edge{from: "assignments", fromFields: []string{"planning_item"}, to: "planning", toField: "_id"}
	// assignments, and planning and events through their assignments:
	// the archive items that fulfil them.
	assignmentContent = edge{from: "assignments", fromFields: []string{"_id"}, to: "archive", toField: "assignment_id"}
	// planning, and events through their planning: the assignments the
	// coverages and their scheduled updates name.
	planningAssignments = edge{from: "planning",
		fromFields: []string{"coverages.assigned_to.assignment_id", "coverages.scheduled_updates.assigned_to.assignment_id"},
		to:         "assignments", toField: "_id"}
	// planning: the coverage sync, by coverage and by scheduled update.
	planningCoverages = edge{from: "planning", fromFields: []string{"coverages.coverage_id"}, to: "assignments", toField: "coverage_item",
		within: &planningAssignments}
	planningUpdates = edge{from: "planning", fromFields: []string{"coverages.scheduled_updates.scheduled_update_id"}, to: "assignments",
		toField: "scheduled_update_id", within: &planningAssignments}
	// events: the planning items that name the event.
	eventPlannings = edge{from: "events", fromFields: []string{"guid"}, to: "planning", toField: "event_item"}
)

// A chain is a path of edges from a served document outwards, each
// starting where the one before ends: the document embeds what every
// edge of it reaches (a link's href, state, order or content).
type chain []*edge

// chains lists, per collection whose documents are enriched, the chains
// its enricher follows: everything its served documents embed.
var chains = []struct {
	collection string
	chains     []chain
}{
	{"archive", []chain{{&itemProfile}, {&itemAssignment, &assignmentPlanning}}},
	{"assignments", []chain{{&assignmentPlanning}, {&assignmentContent}}},
	{"planning", []chain{{&planningCoverages}, {&planningUpdates}, {&planningAssignments, &assignmentContent}}},
	{"events", []chain{{&eventPlannings, &planningAssignments, &assignmentContent}}},
}

// lookup is the enrichers' lookup along e: the documents of e.to whose
// toField holds one of values. The caller sets the order, the limit and
// the backend.
func (e *edge) lookup(values valueSet) sources.Lookup {
	return sources.Lookup{Collection: e.to, Field: e.toField, Values: values.values}
}

// reverse is the lookups that find the documents of e.from naming one of
// values (of e.to's toField): one per field, on the document database,
// which shows a write before the search index does.
func (e *edge) reverse(values []any, limit int) []sources.Lookup {
	out := make([]sources.Lookup, len(e.fromFields))
	for i, f := range e.fromFields {
		out[i] = sources.Lookup{Collection: e.from, Field: f, Values: values, Limit: limit}
	}
	return out
}

// pathValues returns the ids at a dotted path of d, traversing arrays on
// the way as MongoDB does (each element that is a document is followed),
// in document order.
func pathValues(d *sources.Doc, path string) []string {
	var out []string
	var walk func(v any, path string)
	walk = func(v any, path string) {
		if arr, ok := v.([]any); ok {
			for _, e := range arr {
				walk(e, path)
			}
			return
		}
		if path == "" {
			if id, ok := idOf(v); ok {
				out = append(out, id)
			}
			return
		}
		doc, ok := asDoc(v)
		if !ok {
			return
		}
		head, rest, _ := strings.Cut(path, ".")
		next, _ := doc.Get(head)
		walk(next, rest)
	}
	walk(d, path)
	return out
}

// recentFirst is the order of link lists of documents that name the
// linking one: most recently updated first.
func recentFirst() []sources.SortKey { return []sources.SortKey{{Field: "_updated", Desc: true}} }
