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
// it. An entry holds the resource, the document's id, the operation, the
// time of the change when its feed knows it and the change's Version
// (sources.LogEntry; the Version is the replicas' business, never
// served).
//
// Each entry has a position, a Redis stream id (ms-seq), and a client
// resumes from a token: the log's epoch, then the position,
// "<epoch>-<ms>-<seq>", valid on every replica. The epoch names one life
// of the log: the Redis stream's, renewed whenever the stream is found
// gone (Redis restarted without persistence, the key was deleted) or
// found to have lost entries it had handed out (below), or, without
// Redis, the process's. A token of another epoch, one older than the
// newest entry trimmed, one ahead of the log's head, or, in front of
// Redis, one newer than the newest entry trimmed that names no entry the
// stream holds (lost) has expired (sources.ErrExpired: the client
// resyncs); it is never read as a position it does not mean, and never
// waited on.
//
// # What a client can rely on
//
//   - At least once, in order: every change a feed reports reaches the
//     log (the feeds retry a failed append, in order, before anything
//     after it), and a token reads every entry after it, or expires.
//   - No silent loss: entries the log handed out and then lost (Redis
//     restarted on persistence that lacks the newest writes, a failover
//     to a replica that lacks them) end the epoch, so every token of it
//     is a 410, never a 200 with entries missing. A replica's follower
//     finds the loss when it reads the stream's state (after every read:
//     the last id is older than one it had read, or the newest entry it
//     read is gone without having been trimmed), and so does a read or
//     a wait with a token ahead of the stream's last id (an honest
//     client's, after a lost tail), and so does a read with a token
//     newer than the trim mark that names no entry of the stream (a
//     client's lost position, after the feeds' retried appends moved
//     the last id past it, on any replica: one whose follower never
//     read the lost entries, when the replica that served them is
//     gone): the epoch ends with a
//     compare-and-set on the old one (redistier.StreamRenew), by
//     whichever replica finds it first. A trimmed gap is a 410 as well
//     (the trim mark). Entries lost before any follower read them (every
//     follower behind: an Apply slow, a sandbox reloading) are changes
//     lost all the same: the replica that appended them keeps the newest
//     it appended until its follower reads that far, and its follower
//     (after each read) and its next Append (first) look for it, so
//     that the epoch ends then too. The follower looks for both, the
//     newest entry it read and the newest its replica appended: a
//     replica's feed retrying, after the loss, what failed while Redis
//     was down appends entries that are there and move the last id past
//     what was read, hiding neither. What was written in Redis with the
//     lost entries is lost with them (the cache's invalidations of their
//     documents): a follower whose epoch ends under it tells its
//     Applier first (EpochApplier; cmd/prodapi purges the whole cache,
//     Redis's too), so that the clients' resyncs read nothing the lost
//     entries had made obsolete.
//   - Applied before handed out: a replica calls Options.Apply with each
//     entry, in log order, before it serves the entry or counts it
//     applied (WaitApplied: every entry up to a token is applied here;
//     cmd/prodapi drops the documents from this process's cache and
//     brings a watched sandbox directory up to the entry's Version). A
//     failed Apply is retried; nothing after it counts as applied
//     meanwhile. Reads from what the follower holds stop at what it
//     applied; older positions, read from the stream, were applied
//     already.
//   - Unavailable is said: while the follower cannot read the stream,
//     Read, Wait and WaitApplied fail with sources.ErrUnavailable (503),
//     and the waiters under way wake to say so; nothing is served from
//     what the replica held. The follower cannot read from the moment
//     one of its calls to the stream fails (an error, a dropped
//     connection, or no answer to a read within its block (a second)
//     and the tier's control timeout) until it has read the stream's
//     state again, or while Apply has gone on failing for applyGrace (5
//     s). A quiet log, read after read with nothing new, is available.
//     Without Redis (the ring) the log is always available.
//
// # With Redis: one stream for the fleet
//
// The log is one Redis Stream (package redistier: prodapi:v1:{changes}:
// stream, its meta hash, seen keys and the feeds' saved tokens, one hash
// slot, so that a Cluster runs the scripts and replicates them in
// order). An append is one script: for each change, unless
// the document's seen key already holds the change's Version, XADD its
// entries and set the key (an hour); then trim, exactly and at most 1000
// entries a call, by length (Options.MaxEntries) and by age
// (Options.Retain, by Redis's clock), recording the newest id trimmed
// (the trim mark; a new stream's is the id of the marker it was created
// with, trimmed at once). Every position the log hands out names an
// entry or is the trim mark, so that one that names neither was lost.
// A stream from before the creation marker was recorded has a trim mark
// of 0-0 until its first trim: no position of it counts as lost so.
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
// connection of the pool it holds while it waits), applies what it reads
// (Options.Apply) and keeps its newest entries in memory (Options.Tail):
// Wait and WaitApplied wake the replica's waiters from that one
// follower, never a Redis call per waiter (but one to check a token the
// follower has not reached: another epoch, or ahead of it), and a Read
// after a position the follower holds costs no round trip. Older
// positions and the oldest entry are read from the stream (a MULTI of
// reads, with the trim mark). After each read, quiet ones too, the
// follower checks that the stream is the one it was reading (same
// epoch, nothing trimmed past it, its newest entry still there);
// otherwise it reads the state and the newest entries again (resync),
// and applies what it had not: the entries after its position when the
// newest entries continue it, else a flush of every resource first (its
// first read, a new epoch, a gap it cannot read). The follower's reads
// and the requests' are read-only, so a CLIENT PAUSE WRITE (a failover's)
// holds appends only.
//
// Redis is needed for the log to be shared, not for the service: while
// it is unreachable, the log is unavailable (503), appends fail and are
// counted, and every feed retries them in order (the change stream from
// its saved token, the poll from its saved watermark, a sandbox replica
// from its queue). The saved token and watermark live in the stream's
// hash slot ({changes}), so a Cluster replicates them in order with the
// entries: a failover that loses entries loses the saves after them, and
// the feed reports those changes again. A restart without persistence,
// or on persistence that lacks the newest entries, and a failover to a
// replica that lacks them, start a new epoch (every client resyncs).
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
//	prodapi_changes_following                     1 while the replica follows the log (0: /changes is 503)
//	prodapi_changes_apply_errors_total            calls of Options.Apply that failed (retried)
//	prodapi_changes_epochs_ended_total            epochs this replica ended, finding entries lost
package changelog
