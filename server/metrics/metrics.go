// Package metrics is the registry the cache, the adapters and the server
// count and time into, on prometheus/client_golang, exposed at /metrics in
// the Prometheus text format or OpenMetrics, as the scraper asks.
//
// main creates one registry and hands it (or single series) to the parts
// that count; there is no global registry (never
// prometheus.DefaultRegisterer). Consumers declare what they need through
// Counter, Gauge and Histogram, which return the one already registered
// under a name. The metric names and label names are part of the contract
// with ops:
//
//	prodapi_source_queries_total{backend,resource,op}
//	prodapi_source_query_duration_seconds{backend,resource,op}
//	prodapi_source_errors_total{backend,resource,kind}
//	prodapi_cache_requests_total{resource,outcome}
//
// and the cache's, the server's and the process's own series (see the
// README). Exposition sorts labels by name, as client_golang does.
//
// A counter whose label values are all known at start is declared at 0
// by its owner (Counter.Declare), so that rate() over it has data before
// its first event, and the first event counts.
//
// Counting on the request path allocates nothing: a series is looked up
// by its label values in a map keyed by a fixed-size array, and resolved
// once per label set.
package metrics

import (
	"fmt"
	"io"
	"net/http"
	"runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Metrics is a registry of counters, gauges and histograms.
type Metrics struct {
	reg *prometheus.Registry

	mu     sync.Mutex
	byName map[string]any // *Counter, *Gauge, *Histogram
}

// NewMetrics returns an empty registry. Register adds the Go, process and
// build series.
func NewMetrics() *Metrics {
	return &Metrics{reg: prometheus.NewRegistry(), byName: map[string]any{}}
}

// Build names the running binary in prodapi_build_info, as the caller
// resolved it (cmd/prodapi: the link-time values, else the build
// information Go recorded; the same that `prodapi version` prints).
type Build struct {
	Version, Revision string
}

// Register adds the Go runtime collector (go_*), the process collector
// (process_*) and prodapi_build_info{version,revision,goversion} = 1.
func (m *Metrics) Register(b Build) {
	version, revision := b.Version, b.Revision
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "prodapi_build_info",
		Help:        "The running binary: version, VCS revision and Go version; always 1.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": runtime.Version()},
	})
	info.Set(1)
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		info,
	)
}

// Handler serves the registry: OpenMetrics when the scraper's Accept asks
// for it (with exemplars), the Prometheus text format otherwise.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{EnableOpenMetrics: true})
}

// WriteText writes every metric in the Prometheus text exposition format.
func (m *Metrics) WriteText(w io.Writer) error {
	families, err := m.reg.Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			return err
		}
	}
	return nil
}

// Gatherer is the registry, for tests that lint it (testutil.GatherAndLint).
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.reg }

// SourceQueries returns the counters and histogram every backend query
// goes through, with labels backend, resource and op (kind for errors).
func (m *Metrics) SourceQueries() *Queries {
	labels := []string{"backend", "resource", "op"}
	return &Queries{
		count: m.Counter("prodapi_source_queries_total",
			"Queries sent to a backend, by backend (sandbox, mongo, elastic, s3), resource and operation.",
			labels...),
		duration: m.Histogram("prodapi_source_query_duration_seconds",
			"Time a backend query took, from sending it to reading its answer, by backend, resource and operation.",
			nil, labels...),
		errors: m.Counter("prodapi_source_errors_total",
			"Backend queries that failed, by backend, resource and kind (unavailable, timeout, invalid: refused by the backend, other); "+
				"a document not found is an answer, not an error, and a query the caller gave up on is not counted.",
			"backend", "resource", "kind"),
	}
}

// The caps whose refusals prodapi_cap_refusals_total counts, its cap
// label: a client's own, answered 429, and a replica's, answered 503.
const (
	CapClientLoads    = "client_loads"    // a client's backend loads in flight (PRODAPI_CLIENT_MAX_LOADS)
	CapClientWaits    = "client_waits"    // a client's event streams and long polls (PRODAPI_CLIENT_MAX_WAITS)
	CapChangesPolls   = "changes_polls"   // the replica's long polls (PRODAPI_CHANGES_MAX_POLLS)
	CapChangesStreams = "changes_streams" // the replica's event streams (PRODAPI_CHANGES_MAX_STREAMS)
)

// Caps lists every cap, in the order CapRefusals declares them.
var Caps = [...]string{CapClientLoads, CapClientWaits, CapChangesPolls, CapChangesStreams}

// CapRefusals returns prodapi_cap_refusals_total{cap}, the requests
// refused at a cap, with every cap's series at 0 from the start: the one
// declaration every part that refuses at a cap shares.
func (m *Metrics) CapRefusals() *Counter {
	c := m.Counter("prodapi_cap_refusals_total",
		"Requests refused at a cap, by cap: client_loads (a client's backend loads in flight, PRODAPI_CLIENT_MAX_LOADS) and "+
			"client_waits (its event streams, long polls and min_position waits, PRODAPI_CLIENT_MAX_WAITS), answered 429; "+
			"changes_polls and changes_streams (the replica's long polls and event streams, PRODAPI_CHANGES_MAX_POLLS and PRODAPI_CHANGES_MAX_STREAMS), answered 503.",
		"cap")
	for _, name := range Caps {
		c.Declare(name)
	}
	return c
}

// lookup returns the metric registered under name, or registers the one
// make returns. A name registered as another kind, or a registration
// client_golang refuses, is a programming error, caught at start-up.
func lookup[T any](m *Metrics, name string, make func() (T, prometheus.Collector)) T {
	m.mu.Lock()
	defer m.mu.Unlock()
	if x, ok := m.byName[name]; ok {
		t, ok := x.(T)
		if !ok {
			panic(fmt.Sprintf("metrics: %s registered as %T", name, x))
		}
		return t
	}
	t, c := make()
	m.reg.MustRegister(c)
	m.byName[name] = t
	return t
}

// help fills an empty help text, which client_golang refuses; tests look
// series up by name only.
func help(name, h string) string {
	if h == "" {
		return name
	}
	return h
}

func checkLabels(labels []string) {
	if len(labels) > maxLabels {
		panic("metrics: a metric with more than 4 labels") // a programming error, caught at start-up
	}
}

// Counter registers a counter, or returns the one registered under name.
func (m *Metrics) Counter(name, h string, labels ...string) *Counter {
	return lookup(m, name, func() (*Counter, prometheus.Collector) {
		checkLabels(labels)
		vec := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help(name, h)}, labels)
		c := &Counter{series: newSeriesSet(func(v []string) prometheus.Counter { return vec.WithLabelValues(v...) })}
		if len(labels) == 0 {
			c.series.get(nil) // exposed as 0 from the start
		}
		return c, vec
	})
}

// Gauge registers a gauge with labels, or returns the one registered under
// name.
func (m *Metrics) Gauge(name, h string, labels ...string) *Gauge {
	return lookup(m, name, func() (*Gauge, prometheus.Collector) {
		checkLabels(labels)
		vec := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help(name, h)}, labels)
		g := &Gauge{series: newSeriesSet(func(v []string) prometheus.Gauge { return vec.WithLabelValues(v...) })}
		if len(labels) == 0 {
			g.series.get(nil)
		}
		return g, vec
	})
}

// GaugeFunc registers a gauge whose value is read from f when metrics are
// gathered.
func (m *Metrics) GaugeFunc(name, h string, f func() float64) {
	lookup(m, name, func() (struct{}, prometheus.Collector) {
		return struct{}{}, prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help(name, h)}, f)
	})
}

// Histogram registers a histogram with the given bucket upper bounds (nil:
// DurationBuckets), or returns the one registered under name.
func (m *Metrics) Histogram(name, h string, buckets []float64, labels ...string) *Histogram {
	return lookup(m, name, func() (*Histogram, prometheus.Collector) {
		checkLabels(labels)
		if buckets == nil {
			buckets = DurationBuckets
		}
		vec := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help(name, h), Buckets: buckets}, labels)
		return &Histogram{series: newSeriesSet(func(v []string) prometheus.Observer { return vec.WithLabelValues(v...) })}, vec
	})
}

// DurationBuckets are the default buckets of the duration histograms, in
// seconds: from a hit served from memory (tens of microseconds) to a
// backend timeout.
var DurationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// seriesKey holds up to maxLabels label values: a comparable map key
// that costs no allocation to build, so counting on the hot path is free
// of garbage.
type seriesKey [maxLabels]string

const maxLabels = 4

// seriesSet resolves the client_golang series of a label set once and
// keeps it under the label values.
type seriesSet[T any] struct {
	resolve func([]string) T
	// m maps a seriesKey to its *entry. A sync.Map: counting reads a key
	// that rarely changes, lock-free, on every request.
	m sync.Map
}

type entry[T any] struct {
	values []string
	metric T
}

func newSeriesSet[T any](resolve func([]string) T) seriesSet[T] {
	return seriesSet[T]{resolve: resolve}
}

func (s *seriesSet[T]) get(values []string) T {
	var key seriesKey
	copy(key[:], values)
	if e, ok := s.m.Load(key); ok {
		return e.(*entry[T]).metric
	}
	vs := append([]string(nil), values...)
	e, _ := s.m.LoadOrStore(key, &entry[T]{values: vs, metric: s.resolve(vs)})
	return e.(*entry[T]).metric
}

// each calls f with every series whose label values match want; an empty
// string in want matches any value.
func (s *seriesSet[T]) each(want []string, f func(T)) {
	for _, v := range s.m.Range {
		if e := v.(*entry[T]); matches(e.values, want) {
			f(e.metric)
		}
	}
}

func matches(have, want []string) bool {
	for i, w := range want {
		if w != "" && (i >= len(have) || have[i] != w) {
			return false
		}
	}
	return true
}

func read(m prometheus.Metric) *dto.Metric {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err) // client_golang's own metrics always write
	}
	return &d
}

// A Counter is a monotonically increasing count per label set. A nil
// *Counter counts nothing, so counting is optional for its users.
type Counter struct {
	series seriesSet[prometheus.Counter]
}

// Inc adds one to the series with these label values.
func (c *Counter) Inc(values ...string) {
	if c == nil {
		return
	}
	c.series.get(values).Inc()
}

// Add adds n to the series with these label values.
func (c *Counter) Add(n uint64, values ...string) {
	if c == nil {
		return
	}
	c.series.get(values).Add(float64(n))
}

// Declare exposes the series with these label values at 0 until they
// count, for label values known at start: rate() and increase() then see
// the first event, and an alert on the series has data from the start.
func (c *Counter) Declare(values ...string) {
	if c == nil {
		return
	}
	c.series.get(values)
}

// Value returns the count of one series.
func (c *Counter) Value(values ...string) uint64 {
	if c == nil {
		return 0
	}
	return uint64(read(c.series.get(values)).GetCounter().GetValue())
}

// Sum returns the total over every series whose label values match the
// given ones; an empty string matches any value.
func (c *Counter) Sum(values ...string) uint64 {
	if c == nil {
		return 0
	}
	var total uint64
	c.series.each(values, func(s prometheus.Counter) { total += uint64(read(s).GetCounter().GetValue()) })
	return total
}

// A Gauge is a value per label set that goes up and down. A nil *Gauge
// records nothing.
type Gauge struct {
	series seriesSet[prometheus.Gauge]
}

// Set sets the series with these label values.
func (g *Gauge) Set(v float64, values ...string) {
	if g == nil {
		return
	}
	g.series.get(values).Set(v)
}

// Add adds v (which may be negative) to the series with these label
// values.
func (g *Gauge) Add(v float64, values ...string) {
	if g == nil {
		return
	}
	g.series.get(values).Add(v)
}

// Value returns the value of one series.
func (g *Gauge) Value(values ...string) float64 {
	if g == nil {
		return 0
	}
	return read(g.series.get(values)).GetGauge().GetValue()
}

// A Histogram is a distribution of observed values (durations in
// seconds) per label set. A nil *Histogram records nothing.
type Histogram struct {
	series seriesSet[prometheus.Observer]
}

// Observe records v in the series with these label values.
func (h *Histogram) Observe(v float64, values ...string) {
	if h == nil {
		return
	}
	h.series.get(values).Observe(v)
}

// Observer returns the series with these label values, for a caller that
// resolves its series once (a table per route and outcome). It also
// implements prometheus.ExemplarObserver. A nil *Histogram returns an
// Observer that records nothing.
func (h *Histogram) Observer(values ...string) prometheus.Observer {
	if h == nil {
		return discard{}
	}
	return h.series.get(values)
}

type discard struct{}

func (discard) Observe(float64) {}

// Count returns the number of observations in every series whose label
// values match the given ones; an empty string matches any value.
func (h *Histogram) Count(values ...string) uint64 {
	if h == nil {
		return 0
	}
	var total uint64
	h.series.each(values, func(o prometheus.Observer) {
		total += read(o.(prometheus.Metric)).GetHistogram().GetSampleCount()
	})
	return total
}

// Queries counts and times backend queries and counts their failures:
// prodapi_source_queries_total, prodapi_source_query_duration_seconds and
// prodapi_source_errors_total. A nil *Queries records nothing.
type Queries struct {
	count    *Counter
	duration *Histogram
	errors   *Counter
}

// Kinds of backend failure: the kind label of prodapi_source_errors_total.
// The adapters name the kind of an error with sources.FailureKind.
const (
	KindUnavailable = "unavailable" // down, refusing, overloaded, partial results
	KindTimeout     = "timeout"     // no answer within the deadline
	KindInvalid     = "invalid"     // the backend refused the query
	KindOther       = "other"       // anything else (a document that does not decode...)
)

// ErrorKinds lists every kind, in the order Declare exposes them.
var ErrorKinds = [...]string{KindUnavailable, KindTimeout, KindInvalid, KindOther}

// Start counts one query and returns the func that records how long it
// took and, when kind is not empty, that it failed with that kind (one of
// ErrorKinds): every adapter calls both through this one entry, so none
// can count its queries without timing them and counting their failures.
func (q *Queries) Start(backend, resource, op string) (done func(kind string)) {
	if q == nil {
		return func(string) {}
	}
	q.count.Inc(backend, resource, op)
	start := time.Now()
	return func(kind string) {
		q.duration.Observe(time.Since(start).Seconds(), backend, resource, op)
		if kind != "" {
			q.errors.Inc(backend, resource, kind)
		}
	}
}

// Declare exposes at 0 the error series of backend for each resource and
// every kind: an adapter declares what it serves when it is made.
func (q *Queries) Declare(backend string, resources ...string) {
	if q == nil {
		return
	}
	for _, r := range resources {
		for _, k := range ErrorKinds {
			q.errors.Declare(backend, r, k)
		}
	}
}

// Errors returns the failures of one series (backend, resource, kind).
func (q *Queries) Errors(backend, resource, kind string) uint64 {
	if q == nil {
		return 0
	}
	return q.errors.Value(backend, resource, kind)
}

// Value returns the count of one series.
func (q *Queries) Value(values ...string) uint64 {
	if q == nil {
		return 0
	}
	return q.count.Value(values...)
}

// Sum returns the count over every series whose label values match the
// given ones; an empty string matches any value.
func (q *Queries) Sum(values ...string) uint64 {
	if q == nil {
		return 0
	}
	return q.count.Sum(values...)
}

// Timed returns the number of timed queries whose label values match the
// given ones.
func (q *Queries) Timed(values ...string) uint64 {
	if q == nil {
		return 0
	}
	return q.duration.Count(values...)
}

// An Observer is one resolved histogram series (prometheus.Observer).
type Observer = prometheus.Observer

// ObserveWithTrace records v in o with the trace as its exemplar
// (trace_id), which OpenMetrics scrapes carry; with no trace id, or an
// o that keeps no exemplars, it is a plain Observe.
func ObserveWithTrace(o Observer, v float64, traceID string) {
	if eo, ok := o.(prometheus.ExemplarObserver); ok && traceID != "" {
		eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": traceID})
		return
	}
	o.Observe(v)
}

// A CounterSeries is one resolved counter series.
type CounterSeries interface {
	Inc()
}

// Series returns the series with these label values, resolved once, for
// a caller on the request path. A nil *Counter returns one that counts
// nothing.
func (c *Counter) Series(values ...string) CounterSeries {
	if c == nil {
		return noCounter{}
	}
	return c.series.get(values)
}

type noCounter struct{}

func (noCounter) Inc() {}

// A GaugeSeries is one resolved gauge series.
type GaugeSeries interface {
	Inc()
	Dec()
	Set(float64)
	Add(float64)
}

// Series returns the series with these label values, resolved once, for
// a caller on the request path. A nil *Gauge returns one that records
// nothing.
func (g *Gauge) Series(values ...string) GaugeSeries {
	if g == nil {
		return noGauge{}
	}
	return g.series.get(values)
}

type noGauge struct{}

func (noGauge) Inc()        {}
func (noGauge) Dec()        {}
func (noGauge) Set(float64) {}
func (noGauge) Add(float64) {}
