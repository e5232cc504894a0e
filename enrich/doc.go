// Package enrich shapes the documents a backend returned into what the
// production API serves, and computes the enrichment entries of their
// _links: the original's post-processing hooks (the sections below say
// what each did), rebuilt so that a page costs a small constant number of backend
// queries instead of several per document.
//
// # Shaping
//
// Per document, in place, in the original's hook order:
//
//  1. details only: the datasource projection of items and contacts
//     (Resource.Projection), which Mongo applied before anything else;
//  2. the resource's excluded fields, top-level and dotted (update._etag);
//     a parent that is not a document is skipped (the original crashed);
//  3. renditions: media → href (MEDIA_PREFIX + "/" + media + extension),
//     old hrefs replaced in the top-level body_html, on the document and on
//     every association, whose own excluded fields then go too;
//  4. items: profile → the content type's output name;
//  5. planning: sync_assignment_details_to_coverages.
//
// # Links
//
// Enrich returns, per document, the enrichment links the renderer appends
// to _links after self, parent and collection, in the original's key
// order: items get assignment, planning, event; assignments get planning,
// event, content; planning gets event, assignments; events get plannings,
// assignments. Hrefs are relative ("planning/<id>").
//
// # Queries
//
// Every lookup is one sources.Lookup for the whole page, whatever its size;
// a step with nothing to look up makes no query. Lookups lists their
// shapes, for `prodapi check`'s index report:
//
//	resource     lookups (at most)                                          original, per document
//	items        assignments by _id, content_types by _id, planning by _id  up to 3
//	assignments  planning by _id, archive by assignment_id (search)         2
//	planning     assignments by coverage_item, by scheduled_update_id,      1 + 1 per coverage with updates
//	             assignments by _id (search), archive by assignment_id         + 2
//	events       planning by event_item, assignments by _id (search),       1 + 2
//	             archive by assignment_id (search)
//
// Independent lookups run concurrently (items: assignments with
// content_types, then planning; assignments: both at once; planning: all
// four at once, because syncing a coverage never changes which assignment
// id it names; events: planning, then the other two). They use a
// sync.WaitGroup rather than errgroup.WithContext on purpose: every lookup
// is optional, so no failure may cancel its siblings, and the request's own
// context already cancels them all.
//
// # Derived changes
//
// A served document embeds data of others: an item its assignment's
// state, a planning its assignments' states and their content, an event
// its plannings' order. When one of them changes, the documents that
// embed it change too, and a Deriver (derive.go) names them, so that the
// change feed (package cache/feed) gives each an update entry after the
// change's and obsoletes its cache entries. The links are one table of
// edges, graph.go, which the enrichers build their lookups from; chains
// there say what each served document embeds, and the Deriver walks them
// backwards:
//
//	a change of    derives updates of
//	items          their assignment (before and now), the planning naming it, its events
//	assignments    their items, the planning naming them, its events
//	planning       the assignments whose planning_item it is and their items, its event
//	               (before and now)
//	events         nothing (links name them by href only)
//	content types  the items of the profile
//
// Dependents are those that embed the changed document now (lookups on
// current data, on the document database: the search index lags) and
// those that embedded it before: where the link is a field of the changed
// document (an item's assignment_id, a planning's event_item), what it
// held before the change, from Change.Before when the feed has it (the
// sandbox) and else from what the Deriver kept at the document's previous
// change (a RefStore: Redis, or memory without it). Past Options.Bound
// (100) documents of one resource, a flush of the resource replaces their
// entries; a flush derives flushes of what embeds its collection. Its
// lookups (DeriveLookups) run once per change the feed reports:
//
//	changed        lookups (each at most Bound+1 documents)
//	items          the item by _id; assignments by _id; planning by the coverages' assignment ids
//	               (two paths); events by guid
//	assignments    archive by assignment_id; planning by the coverages' assignment ids; events by guid
//	planning       the planning by _id; assignments by planning_item; archive by assignment_id;
//	               events by guid
//	content types  archive by profile
//
// # Degrade policy
//
// Every lookup is optional. When one fails for any reason but the request's
// own context ending (an unavailable backend, a refused query, the
// per-lookup Options.Timeout), Enrich omits what the lookup would have
// produced, logs one Warn line naming the resource and the step, and
// reports the step missing: the response is incomplete, and is served
// marked as such but never cached (see the cache package). When
// the request's context is cancelled or past its deadline, Enrich returns
// its error and the request fails.
//
//	resource     step (Warn log "step")   on failure
//	all          shaping                  makes no query, cannot fail
//	items        content_types            profile becomes the lower-case content type id
//	                                      (what a missing content type gives)
//	items        assignments              no assignment, planning or event link
//	items        planning                 no event link
//	assignments  planning                 no event link
//	assignments  content                  no content link
//	planning     coverage sync            coverages keep their stored assigned_to (an empty
//	                                      one still becomes {}, scheduled_updates still [])
//	planning     scheduled update sync    scheduled updates keep their stored assigned_to
//	planning     assignment links         no assignments link
//	planning     assignment content       assignment links lack the content_* keys
//	events       plannings                no plannings and no assignments link
//	events       assignment links         no assignments link
//	events       assignment content       assignment links lack the content_* keys
//	any          request context ends     required: Enrich returns the context's error
//
// # Where we differ from the original, on purpose
//
//   - No N+1: one lookup per step per page (above).
//   - No silent cap of 10 (Elasticsearch's default size): every link list
//     (content, assignments, plannings) is complete up to Options.LinkLimit.
//     A lookup that feeds lists for a whole page asks for at most
//     len(ids)×LinkLimit documents (10000 on the search index, its result
//     window), so one id with an outlandish number of matches could crowd
//     others out of that window; real newsroom data is nowhere near it.
//   - When several archive items name one assignment, the assignment link
//     of a planning or event carries the most recently updated item. The
//     original's dictionary let the least recently updated of the first ten
//     hits win, by accident.
//   - Assignments whose planning.scheduled ties are ordered by id (the hex
//     of an ObjectId, or the string). Elasticsearch returned ties in index
//     order, which for ObjectIds created one after another is the same
//     order (the original's planning example in testdata/want: P1 lists
//     A1 before A2) but may
//     differ between replicas; ours is the same on every backend and every
//     request, so ETags and cached copies agree.
//   - Where the original answered 500, we serve the rest and skip the part
//     that cannot be computed: a null update, renditions or associations;
//     a coverage without coverage_id (it only contributes no lookup value);
//     a missing planning (no event link); an item without state or
//     pubstatus (null in the content link); an int profile (left as is); a
//     content type with a null label (treated as missing).
//   - An event without guid gets no links (the original matched every
//     planning without an event).
//   - A media id that already has an extension or a "/" (object storage)
//     gets no extension added, as the original's S3 storage did; GridFS ids
//     get the extension of their mimetype from a fixed table: Python
//     3.11's built-in mimetypes table (3.10's lacked image/bmp and
//     image/avif) plus image/webp, whatever the server's /etc/mime.types.
//   - A rendition whose media is not a string or an ObjectID (null, a
//     number) is left untouched rather than linked to ".../None".
//   - When a planning names assignment ids and none of them is found, the
//     original set "assignments": []; so do we. A failed lookup omits the
//     key instead.
package enrich
