package metrics

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestExposition checks what operators read: the names and label values,
// the standard collectors and build info, and that the exposition passes
// the Prometheus linter (what promtool check metrics runs).
func TestExposition(t *testing.T) {
	m := NewMetrics()
	m.Register(Build{Version: "v1.2.3", Revision: "abc"})
	q := m.SourceQueries()
	q.Start("mongo", "items", "find")("") // a query answered in well under 2.5 ms
	m.Counter("prodapi_http_panics_total", "Handler panics recovered.")
	m.Gauge("prodapi_cache_redis_breaker_state", "State of the breaker.").Set(0.5)
	m.Histogram("prodapi_http_request_duration_seconds", "Request time.", nil, "route", "outcome").Observer("/x", "hit").Observe(0.0003)
	m.Gauge("prodapi_cache_local_entries", "Entries.").Set(7)

	var b strings.Builder
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`prodapi_source_queries_total{backend="mongo",op="find",resource="items"} 1`,
		`prodapi_source_query_duration_seconds_bucket{backend="mongo",op="find",resource="items",le="0.0025"} 1`,
		`prodapi_source_query_duration_seconds_count{backend="mongo",op="find",resource="items"} 1`,
		`prodapi_http_panics_total 0`,
		`prodapi_cache_redis_breaker_state 0.5`,
		`prodapi_http_request_duration_seconds_bucket{outcome="hit",route="/x",le="0.0005"} 1`,
		`prodapi_cache_local_entries 7`,
		`prodapi_build_info{goversion="go`,
		`revision="abc",version="v1.2.3"} 1`,
		"\ngo_goroutines ",
		"\nprocess_cpu_seconds_total ",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	problems, err := testutil.GatherAndLint(m.Gatherer())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

func TestLookupReturnsTheRegisteredMetric(t *testing.T) {
	m := NewMetrics()
	c := m.Counter("prodapi_x_total", "X.", "a", "b")
	c.Inc("1", "2")
	c.Add(2, "1", "3")
	if got := m.Counter("prodapi_x_total", "").Value("1", "2"); got != 1 {
		t.Errorf("Value = %d, want 1", got)
	}
	if got := c.Sum("1"); got != 3 {
		t.Errorf("Sum(1) = %d, want 3", got)
	}
	if got := c.Sum(); got != 3 {
		t.Errorf("Sum() = %d, want 3", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a counter's name as a gauge did not panic")
		}
	}()
	m.Gauge("prodapi_x_total", "X.")
}

// TestOpenMetrics: a scraper asking for OpenMetrics gets it, with the
// trace exemplar of an observation.
func TestOpenMetrics(t *testing.T) {
	m := NewMetrics()
	o := m.Histogram("prodapi_http_request_duration_seconds", "Request time.", nil, "route", "outcome").Observer("/x", "miss")
	ObserveWithTrace(o, 0.01, "4bf92f3577b34da6a3ce929d0e0e4736")
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	req, _ := http.NewRequest("GET", srv.URL, nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/openmetrics-text") {
		t.Errorf("Content-Type %q, want OpenMetrics", ct)
	}
	if !strings.Contains(string(body), `# {trace_id="4bf92f3577b34da6a3ce929d0e0e4736"} 0.01`) {
		t.Errorf("no exemplar in\n%s", body)
	}
	if !strings.HasSuffix(string(body), "# EOF\n") {
		t.Error("OpenMetrics body does not end in # EOF")
	}
}

// Counting and observing a resolved or looked-up series allocates
// nothing: they run on every request.
func TestNoAllocations(t *testing.T) {
	m := NewMetrics()
	c := m.Counter("prodapi_x_total", "X.", "resource", "outcome")
	h := m.Histogram("prodapi_y_seconds", "Y.", nil, "op")
	o := h.Observer("get")
	g := m.Gauge("prodapi_z", "Z.").Series()
	c.Inc("items", "hit")
	h.Observe(1, "get")
	if n := testing.AllocsPerRun(100, func() {
		c.Inc("items", "hit")
		h.Observe(0.001, "get")
		o.Observe(0.001)
		g.Inc()
		g.Dec()
	}); n != 0 {
		t.Errorf("%v allocations per run, want 0", n)
	}
}

// A failed query is timed like any other and counted by kind; the error
// series an adapter declares exist at 0 before the first failure.
func TestSourceErrors(t *testing.T) {
	m := NewMetrics()
	q := m.SourceQueries()
	q.Declare("mongo", "items", "desks")
	q.Start("mongo", "items", "get")("")
	q.Start("mongo", "items", "find")(KindTimeout)
	q.Start("elastic", "events", "search")(KindUnavailable)

	var b strings.Builder
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`prodapi_source_errors_total{backend="mongo",kind="timeout",resource="items"} 1`,
		`prodapi_source_errors_total{backend="mongo",kind="unavailable",resource="items"} 0`,
		`prodapi_source_errors_total{backend="mongo",kind="other",resource="desks"} 0`,
		`prodapi_source_errors_total{backend="mongo",kind="invalid",resource="desks"} 0`,
		`prodapi_source_errors_total{backend="elastic",kind="unavailable",resource="events"} 1`,
		`prodapi_source_query_duration_seconds_count{backend="mongo",op="find",resource="items"} 1`,
		`prodapi_source_queries_total{backend="elastic",op="search",resource="events"} 1`,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
	if got := q.Errors("mongo", "items", KindTimeout); got != 1 {
		t.Errorf("Errors(mongo, items, timeout) = %d, want 1", got)
	}
	if got := strings.Count(b.String(), "prodapi_source_errors_total{"); got != 2*len(ErrorKinds)+1 {
		t.Errorf("%d error series, want %d (two resources declared, one failure undeclared)", got, 2*len(ErrorKinds)+1)
	}
	var nilQ *Queries
	nilQ.Declare("mongo", "items")
	nilQ.Start("mongo", "items", "get")(KindOther) // counts nothing, does not panic
}
