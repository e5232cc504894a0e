// Package metrics is the registry of counters and gauges the cache, the
// adapters and the server count into, written in the Prometheus text
// format at /metrics.
package metrics

import (
	"bufio"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Metrics is a registry of counters and gauges, exposed in the Prometheus
// text format. main creates one and hands it (or single counters) to the
// parts that count; there is no global registry. The metric names and
// labels are part of the contract with ops:
//
//	prodapi_source_queries_total{backend,resource,op}
//	prodapi_cache_requests_total{resource,outcome}
//
// and the cache's own gauges and counters.
type Metrics struct {
	mu       sync.Mutex
	families []metricFamily
}

type metricFamily interface {
	writeText(b []byte) []byte
}

// NewMetrics returns an empty registry.
func NewMetrics() *Metrics { return &Metrics{} }

// SourceQueries returns the counter every backend query increments, with
// labels backend, resource and op.
func (m *Metrics) SourceQueries() *Counter {
	return m.Counter("prodapi_source_queries_total",
		"Queries sent to a backend, by backend (sandbox, mongo, elastic, s3), resource and operation.",
		"backend", "resource", "op")
}

// Counter registers a counter, or returns the one registered under name.
func (m *Metrics) Counter(name, help string, labels ...string) *Counter {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.families {
		if c, ok := f.(*Counter); ok && c.name == name {
			return c
		}
	}
	if len(labels) > maxLabels {
		panic("sources: a metric with more than 4 labels") // a programming error, caught at start-up
	}
	c := &Counter{name: name, help: help, labels: labels}
	m.families = append(m.families, c)
	return c
}

// Gauge registers a gauge with labels, or returns the one registered under
// name.
func (m *Metrics) Gauge(name, help string, labels ...string) *Gauge {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, f := range m.families {
		if g, ok := f.(*Gauge); ok && g.c.name == name {
			return g
		}
	}
	if len(labels) > maxLabels {
		panic("sources: a metric with more than 4 labels") // a programming error, caught at start-up
	}
	g := &Gauge{c: Counter{name: name, help: help, labels: labels}}
	m.families = append(m.families, g)
	return g
}

// GaugeFunc registers a gauge whose value is read from f when metrics are
// written.
func (m *Metrics) GaugeFunc(name, help string, f func() float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.families = append(m.families, gaugeFunc{name: name, help: help, f: f})
}

// WriteText writes every metric in the Prometheus text exposition format.
func (m *Metrics) WriteText(w io.Writer) error {
	m.mu.Lock()
	families := slices.Clone(m.families)
	m.mu.Unlock()
	bw := bufio.NewWriter(w)
	var b []byte
	for _, f := range families {
		b = f.writeText(b[:0])
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// A Counter is a monotonically increasing count per label set. A nil
// *Counter counts nothing, so counting is optional for its users.
type Counter struct {
	name, help string
	labels     []string
	// series maps a seriesKey to its *series. A sync.Map: counting reads a
	// key that rarely changes, lock-free, on every request.
	series sync.Map
}

// seriesKey holds up to maxLabels label values: a comparable map key
// that costs no allocation to build, so counting on the hot path is free
// of garbage.
type seriesKey [maxLabels]string

const maxLabels = 4

type series struct {
	values []string
	bits   atomic.Uint64 // a uint64 count, or float64 bits for gauges
}

// Inc adds one to the series with these label values.
func (c *Counter) Inc(values ...string) { c.Add(1, values...) }

// Add adds n to the series with these label values.
func (c *Counter) Add(n uint64, values ...string) {
	if c == nil {
		return
	}
	c.get(values).bits.Add(n)
}

// Value returns the count of one series.
func (c *Counter) Value(values ...string) uint64 {
	if c == nil {
		return 0
	}
	return c.get(values).bits.Load()
}

// Sum returns the total over every series whose label values match the
// given ones; an empty string matches any value.
func (c *Counter) Sum(values ...string) uint64 {
	if c == nil {
		return 0
	}
	var total uint64
	for _, v := range c.series.Range {
		if s := v.(*series); matches(s.values, values) {
			total += s.bits.Load()
		}
	}
	return total
}

func matches(have, want []string) bool {
	for i, w := range want {
		if w != "" && (i >= len(have) || have[i] != w) {
			return false
		}
	}
	return true
}

func (c *Counter) get(values []string) *series {
	var key seriesKey
	copy(key[:], values)
	if s, ok := c.series.Load(key); ok {
		return s.(*series)
	}
	s, _ := c.series.LoadOrStore(key, &series{values: slices.Clone(values)})
	return s.(*series)
}

func (c *Counter) writeText(b []byte) []byte {
	return c.write(b, "counter", func(s *series) []byte {
		return strconv.AppendUint(nil, s.bits.Load(), 10)
	})
}

func (c *Counter) write(b []byte, kind string, value func(*series) []byte) []byte {
	b = append(b, "# HELP "+c.name+" "+c.help+"\n# TYPE "+c.name+" "+kind+"\n"...)
	var all []*series
	for _, v := range c.series.Range {
		all = append(all, v.(*series))
	}
	slices.SortFunc(all, func(x, y *series) int { return slices.Compare(x.values, y.values) })
	for _, s := range all {
		b = append(b, c.name...)
		if len(c.labels) > 0 {
			b = append(b, '{')
			for i, l := range c.labels {
				if i > 0 {
					b = append(b, ',')
				}
				v := ""
				if i < len(s.values) {
					v = s.values[i]
				}
				b = append(b, l+`="`...)
				b = append(b, labelEscaper.Replace(v)...)
				b = append(b, '"')
			}
			b = append(b, '}')
		}
		b = append(b, ' ')
		b = append(b, value(s)...)
		b = append(b, '\n')
	}
	return b
}

var labelEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// A Gauge is a value per label set that goes up and down. A nil *Gauge
// records nothing.
type Gauge struct{ c Counter }

// Set sets the series with these label values.
func (g *Gauge) Set(v float64, values ...string) {
	if g == nil {
		return
	}
	g.c.get(values).bits.Store(math.Float64bits(v))
}

// Value returns the value of one series.
func (g *Gauge) Value(values ...string) float64 {
	if g == nil {
		return 0
	}
	return math.Float64frombits(g.c.get(values).bits.Load())
}

func (g *Gauge) writeText(b []byte) []byte {
	return g.c.write(b, "gauge", func(s *series) []byte {
		return strconv.AppendFloat(nil, math.Float64frombits(s.bits.Load()), 'g', -1, 64)
	})
}

type gaugeFunc struct {
	name, help string
	f          func() float64
}

func (g gaugeFunc) writeText(b []byte) []byte {
	b = append(b, "# HELP "+g.name+" "+g.help+"\n# TYPE "+g.name+" gauge\n"+g.name+" "...)
	b = strconv.AppendFloat(b, g.f(), 'g', -1, 64)
	return append(b, '\n')
}
