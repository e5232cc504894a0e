package changes

import (
	"time"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
)

// Transports, the label of the delivery metrics.
const (
	transportJSON = "json"
	transportSSE  = "sse"
)

// Reasons a stream is ended by the server, the label of
// prodapi_changes_consumers_dropped_total.
const (
	dropSlow        = "slow"        // a write did not complete in Options.WriteTimeout
	dropExpired     = "expired"     // the token expired
	dropMaxAge      = "max_age"     // the stream reached Options.MaxStreamAge
	dropGone        = "gone"        // the stream's position can no longer be followed
	dropUnavailable = "unavailable" // the log failed
	dropShutdown    = "shutdown"    // the server drains
)

// changeMetrics are the HTTP side's series of the change feed (the log
// counts what it appends).
type changeMetrics struct {
	streams   metrics.GaugeSeries
	polls     metrics.GaugeSeries
	delivered *metrics.Counter
	lag       *metrics.Histogram
	dropped   *metrics.Counter
	gone      metrics.CounterSeries
	refused   metrics.CounterSeries
	// The requests that wait, timed here rather than in the server's
	// request-duration histogram, whose latency they would swamp.
	pollTime   metrics.Observer
	streamTime metrics.Observer
}

// lagBuckets are the delivery lag's buckets, in seconds: from a stream
// that follows within milliseconds to a client catching up on a day.
var lagBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600, 86400}

// waitBuckets are the buckets of the requests that wait, in seconds:
// from a long poll answered at once to a stream held for an hour.
var waitBuckets = []float64{.1, .5, 1, 2.5, 5, 10, 15, 30, 45, 60, 90, 120, 300, 600, 1200, 1800, 3600}

func newChangeMetrics(m *metrics.Metrics) *changeMetrics {
	cm := &changeMetrics{
		streams: m.Gauge("prodapi_changes_streams", "Open /changes event streams.").Series(),
		polls:   m.Gauge("prodapi_changes_polls", "/changes long polls waiting (at most PRODAPI_CHANGES_MAX_POLLS).").Series(),
		delivered: m.Counter("prodapi_changes_delivered_total",
			"Change-log entries written to clients, by transport: json (/changes answers, long polls included), sse (events of a stream).",
			"transport"),
		lag: m.Histogram("prodapi_changes_delivery_lag_seconds",
			"Time from a change (its entry's time, when its feed reported one) to the write of its entry to a client, by transport.",
			lagBuckets, "transport"),
		dropped: m.Counter("prodapi_changes_consumers_dropped_total",
			"Event streams the server ended, by reason: slow (a write did not complete within PRODAPI_CHANGES_WRITE_TIMEOUT), "+
				"expired (the token expired), max_age (the stream reached PRODAPI_CHANGES_MAX_STREAM_AGE: the client reconnects at once), gone (the stream's position can no longer be followed), unavailable (the log or a document failed), "+
				"shutdown (the server drained).",
			"reason"),
		gone: m.Counter("prodapi_changes_gone_total",
			"/changes requests and streams, and reads with min_position, answered 410: a position that can no longer be followed "+
				"(older than the changes kept, past the log's end after it lost entries, or sealed under another secret).").Series(),
		refused: m.Counter("prodapi_changes_streams_refused_total",
			"Event streams refused with 503: PRODAPI_CHANGES_MAX_STREAMS were open (counted in prodapi_cap_refusals_total{cap=\"changes_streams\"} too), or the server was draining.").Series(),
		pollTime: m.Histogram("prodapi_changes_wait_seconds",
			"Whole duration of /changes long polls (GET with wait=), from the request to its answer written; "+
				"they are not in prodapi_http_request_duration_seconds.",
			waitBuckets).Observer(),
		streamTime: m.Histogram("prodapi_changes_stream_seconds",
			"Lifetime of /changes event streams, from the stream's opening to its end; "+
				"they are not in prodapi_http_request_duration_seconds.",
			waitBuckets).Observer(),
	}
	// Every series exposed from the start, at 0.
	for _, t := range []string{transportJSON, transportSSE} {
		cm.delivered.Add(0, t)
		cm.lag.Observer(t)
	}
	for _, r := range []string{dropSlow, dropExpired, dropMaxAge, dropGone, dropUnavailable, dropShutdown} {
		cm.dropped.Add(0, r)
	}
	return cm
}

// deliver counts entries written to a client at now.
func (cm *changeMetrics) deliver(transport string, entries []sources.LogEntry, now time.Time) {
	cm.delivered.Add(uint64(len(entries)), transport)
	lag := cm.lag.Observer(transport)
	for _, e := range entries {
		if !e.At.IsZero() {
			lag.Observe(max(now.Sub(e.At), 0).Seconds())
		}
	}
}
