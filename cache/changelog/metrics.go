package changelog

import (
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
)

// Sources of appended changes, the source label of the log's metrics.
const (
	SourceStream  = "stream"  // the database's change stream, watched by one replica
	SourcePoll    = "poll"    // a poll of _updated, where there is no change stream
	SourceSandbox = "sandbox" // every replica's watcher of a sandbox directory
)

// sourceOps are the operations each source reports, whose series exist
// at 0 from the start.
var sourceOps = map[string][]string{
	SourceStream:  ops, // every one
	SourcePoll:    {sources.OpUpdate, sources.OpFlush},
	SourceSandbox: {sources.OpInsert, sources.OpUpdate, sources.OpDelete},
}

// series are the log's metrics; every field is nil-safe.
type series struct {
	appended    *metrics.Counter // source, op
	duplicates  *metrics.Counter // source
	failed      *metrics.Counter // source
	trimmed     *metrics.Counter
	length      *metrics.Gauge
	lag         *metrics.Gauge
	following   *metrics.Gauge
	applyErrors *metrics.Counter
	lost        *metrics.Counter
}

func newSeries(m *metrics.Metrics) *series {
	if m == nil {
		return &series{}
	}
	s := &series{
		appended: m.Counter("prodapi_changes_appended_total",
			"Entries appended to the change log by this replica, by source (stream, poll, sandbox) and operation.",
			"source", "op"),
		duplicates: m.Counter("prodapi_changes_duplicates_total",
			"Changes not appended because the log already held them (another replica's watcher, or a watcher resuming after a takeover, appended them), by source.",
			"source"),
		failed: m.Counter("prodapi_changes_append_errors_total",
			"Appends to the change log that failed (Redis unreachable or erring), by source; every feed retries them, in order.",
			"source"),
		trimmed: m.Counter("prodapi_changes_trimmed_total",
			"Entries this replica's appends trimmed from the change log, past PRODAPI_CHANGES_RETAIN or the cap on entries."),
		length: m.Gauge("prodapi_changes_log_entries",
			"Entries the change log keeps, as this replica last saw."),
		lag: m.Gauge("prodapi_changes_follower_lag_seconds",
			"Time from the newest entry's append (Redis's clock) to its arrival at this replica's follower (its clock)."),
		following: m.Gauge("prodapi_changes_following",
			"1 while this replica follows the change log (the ring: always), 0 while it cannot read the stream (/changes answers 503)."),
		applyErrors: m.Counter("prodapi_changes_apply_errors_total",
			"Times applying entries of the change log on this replica (its cache's invalidation, a sandbox's catch-up) failed; they are retried, and no later entry counts as applied before."),
		lost: m.Counter("prodapi_changes_epochs_ended_total",
			"Epochs of the change log this replica ended because the stream had lost entries it had handed out (a restart on persistence lacking them, a failover to a replica lacking them, a token ahead of the stream): every client resyncs (410)."),
	}
	for src, list := range sourceOps {
		s.duplicates.Declare(src)
		s.failed.Declare(src)
		for _, op := range list {
			s.appended.Declare(src, op)
		}
	}
	return s
}
