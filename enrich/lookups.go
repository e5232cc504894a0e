package enrich

import "github.com/prodapi/prodapi/sources"

// Lookups lists the shape of every batched lookup Enrich makes (the
// collection, the field it matches, the sort and the backend; no values
// or limits), for what reads the platform's indexes: `prodapi check`
// asks whether an index serves each one on the document database.
// TestLookupsListsEveryLookup keeps it in step with the enrichers.
func Lookups() []sources.Lookup {
	recent := []sources.SortKey{{Field: "_updated", Desc: true}}
	return []sources.Lookup{
		// items
		{Collection: "content_types", Field: "_id"},
		{Collection: "assignments", Field: "_id"},
		{Collection: "planning", Field: "_id"},
		// assignments, planning and events: delivered content
		{Collection: "archive", Field: "assignment_id", Sort: recent, Search: true},
		// planning: coverage sync, assignment links
		{Collection: "assignments", Field: "coverage_item"},
		{Collection: "assignments", Field: "scheduled_update_id"},
		{Collection: "assignments", Field: "_id", Sort: []sources.SortKey{{Field: "planning.scheduled"}}, Search: true},
		// events: their planning items
		{Collection: "planning", Field: "event_item", Sort: recent},
	}
}
