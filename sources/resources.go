package sources

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// A Resource is one endpoint of the API: how its URL maps to a collection,
// which backend answers its lists, who may read it and what never leaves
// the service. Resources lists the API's; the README's table in "Using the
// API" gives each one's scope, backend, default sort and id.
type Resource struct {
	Name       string // URL segment: "items"
	Collection string // Mongo collection and Elastic index suffix: "archive"
	Title      string // list self-link and home title: "Item", "desks"
	ItemTitle  string // item self-link title: "Item", "Desk"
	// Search is true when lists read the search index (Elasticsearch);
	// details always read the document database.
	Search      bool
	DefaultSort []SortKey
	// Tiebreaker is the keyword field, unique per document, on which a
	// cursor walk of a search list breaks ties ("guid"); empty: the
	// search backend's own (the document id, or a point in time's
	// shard order where the id cannot be sorted on).
	Tiebreaker string
	Scope      string // the JWT scope that reads it
	// Excluded fields are removed from every document before it is
	// served; dotted names reach one level into a sub-document. Clients
	// can never filter, sort, aggregate or project on them (see Hidden).
	Excluded []string
	// Nested names fields whose values are documents shaped like the
	// resource's own (an item's associations): their excluded fields are
	// removed too, one level down, and hidden from queries.
	Nested []string
	// Projection, when set, is the datasource projection of details: the
	// only top-level fields a detail response can carry.
	Projection []string
	// NoLinks drops _links from this resource's documents (contacts).
	NoLinks bool
}

// Scopes a token may carry.
const (
	ScopeArchive     = "ARCHIVE_READ"
	ScopeDesks       = "DESKS_READ"
	ScopePlanning    = "PLANNING_READ"
	ScopeContacts    = "CONTACTS_READ"
	ScopeUsers       = "USERS_READ"
	ScopeAssignments = "ASSIGNMENTS_READ"
	ScopeEvents      = "EVENTS_READ"
)

// AllScopes lists every scope, as Superdesk's auth server defines them.
var AllScopes = []string{ScopeArchive, ScopeDesks, ScopePlanning, ScopeContacts, ScopeUsers, ScopeAssignments, ScopeEvents}

var (
	base  = []string{"_etag", "_type", "_updated", "_created", "_current_version", "fields_meta"}
	lock4 = []string{"lock_action", "lock_user", "lock_time", "lock_session"}
)

func fields(groups ...[]string) []string {
	var all []string
	for _, g := range groups {
		all = append(all, g...)
	}
	return all
}

// itemFields is the datasource projection of items: the top-level keys of
// Superdesk's metadata_schema (superdesk-core's content schema) plus Eve's
// automatic fields. fields_meta is projected out.
var itemFields = strings.Fields(`_id guid uri unique_id unique_name version ingest_id ingest_version
family_id related_to original_creator version_creator firstcreated versioncreated firstpublished
ingest_provider source original_source ingest_provider_sequence usageterms copyrightnotice
copyrightholder anpa_category subject genre company_codes type package_type language abstract
headline slugline anpa_take_key correction_sequence rewrite_sequence rewrite_of rewritten_by
sequence keywords word_count priority urgency profile state revert_state pubstatus signal byline
ednote authors description_text archive_description groups deleted_groups body_html body_text
dateline expiry media mimetype poi renditions filemeta filemeta_json media_file contents
associations refs alt_text place event person object organisation creditline linked_in_packages
highlight highlights marked_desks more_coming sign_off task task_id lock_user lock_time
lock_session lock_action template body_footer flags sms_message format auto_publish annotations
extra attachments assignment_id translated_from translation_id translations processed_from
embargoed embargoed_text marked_for_user marked_for_sign_off broadcast event_id embargo
publish_schedule schedule_settings used used_count used_updated metrics _type operation
es_highlight target_regions target_types target_subscribers scope _updated _created _etag`)

// contactFields is the datasource projection of contacts: the schema of
// Superdesk's contacts resource plus Eve's automatic fields.
var contactFields = strings.Fields(`_id is_active public uri organisation first_name last_name
honorific job_title mobile contact_phone fax contact_email twitter facebook instagram website
contact_address locality city contact_state postcode country notes contact_type
_updated _created _etag`)

// resources, in the order the home endpoint lists them (the original's
// DOMAIN order, without the broken "upload").
var resources = []*Resource{
	{Name: "items", Collection: "archive", Title: "Item", ItemTitle: "Item", Search: true,
		DefaultSort: []SortKey{{"_updated", true}}, Tiebreaker: "guid", Scope: ScopeArchive,
		Excluded:   fields(base, []string{"unique_id", "family_id", "event_id"}, lock4),
		Nested:     []string{"associations"},
		Projection: itemFields},
	{Name: "desks", Collection: "desks", Title: "desks", ItemTitle: "Desk",
		DefaultSort: []SortKey{{"name", false}}, Scope: ScopeDesks,
		Excluded: fields(base, []string{"default_content_template", "working_stage", "incoming_stage", "desk_metadata", "content_expiry"})},
	{Name: "assignments", Collection: "assignments", Title: "Assignment", ItemTitle: "Assignment", Search: true,
		DefaultSort: []SortKey{{"_updated", true}}, Scope: ScopeAssignments,
		Excluded: fields(base, lock4)},
	{Name: "events", Collection: "events", Title: "Event", ItemTitle: "Event", Search: true,
		DefaultSort: []SortKey{{"dates.start", false}}, Tiebreaker: "guid", Scope: ScopeEvents,
		Excluded: fields(base, lock4)},
	{Name: "events_history", Collection: "events_history", Title: "events_history", ItemTitle: "Events_history",
		DefaultSort: []SortKey{{"_updated", true}}, Scope: ScopeEvents,
		Excluded: fields(base, []string{"update._etag", "update._links", "update._status", "update._updated", "update._created"})},
	{Name: "events_files", Collection: "events_files", Title: "events_files", ItemTitle: "Events_file",
		DefaultSort: []SortKey{{"_updated", true}}, Scope: ScopeEvents,
		Excluded: base},
	{Name: "planning", Collection: "planning", Title: "Planning", ItemTitle: "Planning", Search: true,
		DefaultSort: []SortKey{{"_updated", true}}, Tiebreaker: "guid", Scope: ScopePlanning,
		Excluded: fields(base, lock4, []string{"item_class", "flags", "_planning_schedule", "_updates_schedule"})},
	{Name: "contacts", Collection: "contacts", Title: "contacts", ItemTitle: "Contact", Search: true,
		DefaultSort: []SortKey{{"last_name.keyword", false}}, Scope: ScopeContacts,
		Excluded:   []string{"_etag", "_type", "_updated", "_created", "_links"},
		Projection: contactFields, NoLinks: true},
	{Name: "users", Collection: "users", Title: "users", ItemTitle: "User",
		DefaultSort: []SortKey{{"username", false}}, Scope: ScopeUsers,
		Excluded: fields(base, []string{"user_preferences", "session_preferences", "password"})},
}

// Resources returns every resource of the API, in home-page order. The
// caller must not modify them.
func Resources() []*Resource { return resources }

// ResourceByName returns the resource served at /<name>.
func ResourceByName(name string) (*Resource, bool) {
	for _, r := range resources {
		if r.Name == name {
			return r, true
		}
	}
	return nil, false
}

// Collections lists every collection a backend may be asked for: the
// resources' own plus content_types, which item shaping reads.
var Collections = []string{"archive", "desks", "users", "contacts", "planning", "events",
	"events_files", "events_history", "assignments", "content_types"}

// Queryable timestamps: excluded from output because the original
// stripped them, but they hold no secret, they are the default sort of
// five resources and the field sync clients filter on. Clients may filter
// and sort on them. Every other excluded field is hidden.
var queryable = map[string]bool{"_updated": true, "_created": true}

// Hidden reports whether a client may not filter, sort, aggregate or
// project on the dotted field path: it names an excluded field, a field
// inside one, or a document that contains one (filtering on a whole
// sub-document is an oracle on its parts). Elasticsearch multi-field
// suffixes (password.keyword) are inside their field and hidden too.
//
// It is deliberately wider than MongoDB's and Elasticsearch's own
// matching, so that no spelling of a hidden path gets through:
//   - an all-digit segment may be an array index (update.0._etag reaches
//     update._etag when update is an array), so it may be skipped;
//   - names compare without regard to case (Unicode simple folding), as
//     nobody has a legitimate reason to ask for PASSWORD.
func (r *Resource) Hidden(path string) bool {
	var xbuf, nbuf [8]string // on the stack: Hidden runs for every field a request names
	for _, x := range r.Excluded {
		if queryable[x] {
			continue
		}
		xs := xbuf[:0]
		for seg := range strings.SplitSeq(x, ".") {
			xs = append(xs, seg)
		}
		if reaches(path, xs, 1) {
			return true
		}
		for _, n := range r.Nested {
			// <n>.<any name>.<x> is shaped like a top-level x; n and
			// n.<name> themselves may be asked for (they are served,
			// without their excluded fields).
			if reaches(path, append(append(nbuf[:0], n, anySegment), xs...), 3) {
				return true
			}
		}
	}
	return false
}

// anySegment in a pattern of reaches matches any one segment (a field
// path never holds NUL).
const anySegment = "\x00"

// reaches reports whether the dotted path can name pattern's field,
// something inside it, or a document holding it: whether path's segments
// (folded) and pattern agree one by one until either runs out, where an
// all-digit segment of path may also be skipped (an array index). A path
// that runs out first must have agreed on at least least segments.
func reaches(path string, pattern []string, least int) bool {
	if len(pattern) >= 63 {
		return true // no such pattern in the table; refuse rather than guess
	}
	on := uint64(1) // bit j: the segments so far can have consumed pattern[:j]
	full := uint64(1) << len(pattern)
	for rest, more := path, true; more; {
		if on&full != 0 {
			return true // at or inside the field
		}
		var seg string
		seg, rest, more = strings.Cut(rest, ".")
		seg = FoldName(seg)
		index := allDigits(seg)
		var next uint64
		for j, p := range pattern {
			if on&(1<<j) == 0 {
				continue
			}
			if index {
				next |= 1 << j
			}
			if p == anySegment || p == seg {
				next |= 1 << (j + 1)
			}
		}
		if next == 0 {
			return false
		}
		on = next
	}
	// The path ended: it names the field, or a document holding it.
	return on>>least != 0
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// FoldName maps a field name to a case-free form: every rune to the lower case of
// the smallest rune of its simple case-folding orbit, so that K, k and
// the Kelvin sign, or S, s and the long s, compare equal.
func FoldName(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf || 'A' <= c && c <= 'Z' {
			ascii = false
			break
		}
	}
	if ascii {
		return s
	}
	return strings.Map(func(r rune) rune {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		return unicode.ToLower(least)
	}, s)
}

// ResourceByCollection returns the resource whose collection is c, for
// labelling lookups ("archive" is "items"); content_types has none.
func ResourceByCollection(c string) (*Resource, bool) {
	for _, r := range resources {
		if r.Collection == c {
			return r, true
		}
	}
	return nil, false
}

// MetricName is how queries on collection c are labelled in
// prodapi_source_queries_total: the resource name, or the collection's
// own name when no resource serves it.
func MetricName(c string) string {
	if r, ok := ResourceByCollection(c); ok {
		return r.Name
	}
	return c
}
