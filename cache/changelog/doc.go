// Package changelog is the fleet's change log: every change a feed
// reports (the database's change stream, the poll that stands in for it,
// a sandbox directory's watcher), appended once, kept for a while, and
// followed by every replica, which serves it at /changes (package
// server/changes reads it through its Log interface).
//
// # Entries and tokens
//
// A change becomes one entry per resource served from its collection
// (sources.ResourcesOf); a change to a collection no resource serves
// (content_types) becomes none, though the cache still invalidates for
// it. An entry holds the resource, the document's id, the operation and
// the time of the change when its feed knows it (sources.LogEntry).
//
// Each entry has a position, a Redis stream id (ms-seq), and a client
// resumes from a token: the log's epoch, then the position,
// "<epoch>-<ms>-<seq>", valid on every replica. The epoch names one life
// of the log: the Redis stream's, renewed whenever the stream is found
// gone (Redis restarted without persistence, the key was deleted), or,
// without Redis, the process's. A token of another epoch, or one older
// than the newest entry trimmed away, has expired (sources.ErrExpired:
// the client resyncs); it is never read as a position it does not mean.
//
// # With Redis: one stream for the fleet
//
// The log is one Redis Stream (package redistier: prodapi:v1:{changes}:
// stream, its meta hash and seen keys, one hash slot, so that a Cluster
// runs the scripts). An append is one script: for each change, unless
// the document's seen key already holds the change's Version, XADD its
// entries and set the key (an hour); then trim, exactly and at most 1000
// entries a call, by length (Options.MaxEntries) and by age
// (Options.Retain, by Redis's clock), recording the newest id trimmed.
//
// Versions make "appended once" hold whoever reports a change:
//
//   - The change stream (one replica, under the feed's lease): the
//     Version is the event's id. The watcher appends, then saves its
//     resume token; a replica that dies in between leaves the token
//     before the event, and the one that takes over resumes there and
//     reports the event again, which the seen key drops. Nothing is
//     lost: an event's token is saved only once it is in the log.
//   - A sandbox directory (every replica watches it): the Version is a
//     hash of the document's new content. Every replica appends what its
//     own watcher saw; the first one's entry stands, the others are
//     duplicates. A replica that dies before it appends loses nothing,
//     since the others saw the same edit; one whose append fails tries
//     it again, before anything it saw later (package feed's Local).
//     Two edits between a replica's reads are one change to it and two
//     to another: the log gets the entries of both, and a later read
//     that finds the first version again (an edit undone) is a new
//     change, since the seen key holds the last version appended, not
//     every one.
//   - The poll: the Version is the document's _etag (its _updated
//     without one). The poller saves its watermark after appending; a
//     takeover polls again from the saved one and the seen keys drop
//     what was appended.
//
// A duplicate is counted, never an error. Entries may still come twice:
// a replica whose watcher reads an edit long after the others, or a
// resume after the seen key expired; a client reads a change as "fetch
// this document again", which is safe to repeat.
//
// Each replica follows the stream with one reader (XREAD BLOCK, on a
// connection of the pool it holds while it waits) and keeps its newest
// entries in memory (Options.Tail): Wait wakes the replica's waiters
// from that one follower, never a Redis call per waiter, and a Read
// after a position the follower holds costs no round trip. Older
// positions, the oldest entry and tokens ahead of this replica's
// follower are read from the stream (XRANGE, in a script that reads the
// trim mark with it). After each batch the follower checks that the
// stream is the one it was reading (same epoch, nothing trimmed past
// it); otherwise it reads the newest entries again.
//
// Redis is needed for the log to be shared, not for the service: while
// it is unreachable, Reads answer from what a replica holds or fail
// (503), appends fail and are counted, and every feed retries them in
// order (the change stream from its saved token, the poll from its
// saved watermark, a sandbox replica from its queue). Redis replicates
// asynchronously: a failover may lose the newest entries, and tokens
// after them read as if nothing happened since, while a restart without
// persistence starts a new epoch (every client resyncs).
//
// # Without Redis: a ring
//
// The log is a ring in the process: the same entries, bounded by
// MaxEntries and Retain, positions from the process's clock, the epoch
// a boot id (so a token from before a restart expires).
//
// # Metrics
//
// Registered on Options.Metrics:
//
//	prodapi_changes_appended_total{source,op}     entries appended (source: stream, poll, sandbox)
//	prodapi_changes_duplicates_total{source}      changes the log held already
//	prodapi_changes_append_errors_total{source}   appends that failed
//	prodapi_changes_trimmed_total                 entries this replica's appends trimmed
//	prodapi_changes_log_entries                   entries kept, as this replica last saw
//	prodapi_changes_follower_lag_seconds          from the newest entry's append to its arrival here
//	prodapi_changes_following                     1 while the replica follows the log
package changelog
