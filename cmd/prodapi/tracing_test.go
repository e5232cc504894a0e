package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prodapi/prodapi/config"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/realserver"
)

// consoleSpan is what the console exporter (stdouttrace) writes of a span.
type consoleSpan struct {
	Name        string
	SpanContext struct{ TraceID, SpanID string }
	Parent      struct{ TraceID, SpanID string }
	Attributes  []struct {
		Key   string
		Value struct{ Value any }
	}
}

func (s consoleSpan) attr(key string) any {
	for _, a := range s.Attributes {
		if a.Key == key {
			return a.Value.Value
		}
	}
	return nil
}

// OTEL_TRACES_EXPORTER=console prints, for a request carrying a W3C
// traceparent, one trace continuing the client's: the request, the cache
// lookup with the tier that answered, the flight, and the Redis, MongoDB
// and Elasticsearch calls under them; and the request histogram carries
// the trace as an exemplar in OpenMetrics.
func TestTracesOnConsole(t *testing.T) {
	rds := realserver.StartRedis(t, 0)
	in, _, _ := platform(t, "1s", "OTEL_TRACES_EXPORTER", "console", "OTEL_SERVICE_NAME", "prodapi-test", "REDIS_URL", rds.URL())
	tok := bearer(t, devSecret, sources.AllScopes...)

	const (
		listTrace   = "4bf92f3577b34da6a3ce929d0e0e4736"
		detailTrace = "0af7651916cd43dd8448eb211c80319c"
		clientSpan  = "00f067aa0ba902b7"
	)
	send := func(target, trace string) []byte {
		t.Helper()
		traceparent := ""
		if trace != "" {
			traceparent = "00-" + trace + "-" + clientSpan + "-01"
		}
		base := in.base
		if target == "/metrics" {
			base = in.ops
		}
		status, _, b := request(t, http.MethodGet, base+target, "Authorization", tok,
			"Accept", "application/openmetrics-text; version=1.0.0", "Traceparent", traceparent)
		if status != 200 {
			t.Fatalf("%s: %d %s", target, status, b)
		}
		return b
	}
	var list struct {
		Items []struct {
			ID string `json:"_id"`
		} `json:"_items"`
	}
	if err := json.Unmarshal(send("/prodapi/v1/items", listTrace), &list); err != nil || len(list.Items) == 0 {
		t.Fatalf("list: %v, %d items", err, len(list.Items))
	}
	send("/prodapi/v1/items/"+list.Items[0].ID, detailTrace)
	send("/prodapi/v1/items/"+list.Items[0].ID, "") // a hit, from the in-process tier
	metrics := string(send("/metrics", ""))
	if err := in.stop(); err != nil { // flushes every span
		t.Fatal(err)
	}

	var spans []consoleSpan
	sc := bufio.NewScanner(strings.NewReader(in.stdout.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s consoleSpan
		if json.Unmarshal(sc.Bytes(), &s) == nil && s.Name != "" {
			spans = append(spans, s)
		}
	}
	find := func(trace string, match func(consoleSpan) bool) *consoleSpan {
		for i, s := range spans {
			if (trace == "" || s.SpanContext.TraceID == trace) && match(s) {
				return &spans[i]
			}
		}
		return nil
	}
	named := func(name string) func(consoleSpan) bool { return func(s consoleSpan) bool { return s.Name == name } }
	must := func(what, trace string, match func(consoleSpan) bool) *consoleSpan {
		t.Helper()
		s := find(trace, match)
		if s == nil {
			t.Errorf("no %s span in trace %s among %d spans:\n%s", what, trace, len(spans), in.stdout)
		}
		return s
	}

	for _, tc := range []struct{ trace, route, tier, backend string }{
		{listTrace, "/prodapi/v1/items", "backend", "elastic"},
		{detailTrace, "/prodapi/v1/items/{id}", "backend", "mongodb"},
	} {
		req := must("request", tc.trace, named("GET "+tc.route))
		if req != nil && req.Parent.SpanID != clientSpan {
			t.Errorf("request span's parent %s, want the client's %s", req.Parent.SpanID, clientSpan)
		}
		lookup := must("cache.lookup", tc.trace, named("cache.lookup"))
		if req != nil && lookup != nil && lookup.Parent.SpanID != req.SpanContext.SpanID {
			t.Errorf("cache.lookup is not under the request span")
		}
		if lookup != nil && lookup.attr("prodapi.cache.tier") != tc.tier {
			t.Errorf("%s: cache.lookup tier %v, want %s", tc.route, lookup.attr("prodapi.cache.tier"), tc.tier)
		}
		must("cache.flight", tc.trace, named("cache.flight"))
		must("redis", tc.trace, func(s consoleSpan) bool { return s.attr("db.system") == "redis" || s.attr("db.system.name") == "redis" })
		switch tc.backend {
		case "mongodb":
			must("mongodb", tc.trace, func(s consoleSpan) bool { return s.attr("db.system.name") == "mongodb" })
		case "elastic":
			must("elasticsearch", tc.trace, func(s consoleSpan) bool { return s.Name == "search" })
		}
	}
	hit := must("hit lookup", "", func(s consoleSpan) bool {
		return s.Name == "cache.lookup" && s.attr("prodapi.cache.outcome") == "hit"
	})
	if hit != nil && hit.attr("prodapi.cache.tier") != "local" {
		t.Errorf("hit served from tier %v, want local", hit.attr("prodapi.cache.tier"))
	}
	if !strings.Contains(metrics, `trace_id="`+detailTrace+`"`) {
		t.Errorf("no exemplar of trace %s in OpenMetrics", detailTrace)
	}
}

// Without OTEL_ variables there is no tracing, and a bad one stops the
// start.
func TestTracingSettings(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		on   bool
		err  string
	}{
		{"unset", nil, false, ""},
		{"none", []string{"OTEL_TRACES_EXPORTER", "none"}, false, ""},
		{"console", []string{"OTEL_TRACES_EXPORTER", "console"}, true, ""},
		{"otlp by endpoint", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"}, true, ""},
		{"disabled", []string{"OTEL_TRACES_EXPORTER", "console", "OTEL_SDK_DISABLED", "true"}, false, ""},
		{"ratio", []string{"OTEL_TRACES_EXPORTER", "console", "OTEL_TRACES_SAMPLER", "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG", "0.25"}, true, ""},
		{"unknown exporter", []string{"OTEL_TRACES_EXPORTER", "jaeger"}, false, `unknown exporter "jaeger"`},
		{"grpc", []string{"OTEL_TRACES_EXPORTER", "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, false, "only http/protobuf"},
		{"bad endpoint", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "localhost:4318"}, false, "OTEL_EXPORTER_OTLP_ENDPOINT must be an http(s) URL"},
		{"bad ratio", []string{"OTEL_TRACES_EXPORTER", "console", "OTEL_TRACES_SAMPLER", "traceidratio", "OTEL_TRACES_SAMPLER_ARG", "2"}, false, "ratio"},
		{"unknown sampler", []string{"OTEL_TRACES_EXPORTER", "console", "OTEL_TRACES_SAMPLER", "sometimes"}, false, "unknown sampler"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vars := map[string]string{"PRODAPI_AUTH_ENABLED": "false"}
			for i := 0; i+1 < len(tc.env); i += 2 {
				vars[tc.env[i]] = tc.env[i+1]
			}
			cfg, err := config.LoadFrom(config.Env{Getenv: func(k string) string { return vars[k] }})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tp, err := tracing(t.Context(), cfg.Tracing, io.Discard, "test")
			if err != nil {
				t.Fatal(err)
			}
			if got := tp != nil; got != tc.on {
				t.Fatalf("tracing on = %v, want %v", got, tc.on)
			}
			if tp != nil {
				tp.Shutdown(t.Context())
			}
		})
	}
}

// What `OTEL_TRACES_EXPORTER=console make run` shows: one request on the
// sandbox prints a trace with the request, cache and backend spans.
func TestSandboxTraceOnConsole(t *testing.T) {
	in := start(t, "OTEL_TRACES_EXPORTER", "console")
	if status, _, body := in.get(t, "/prodapi/v1/items", bearer(t, devSecret, sources.AllScopes...)); status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if err := in.stop(); err != nil {
		t.Fatal(err)
	}
	traces := map[string][]string{}
	sc := bufio.NewScanner(strings.NewReader(in.stdout.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s consoleSpan
		if json.Unmarshal(sc.Bytes(), &s) == nil && s.Name != "" {
			traces[s.SpanContext.TraceID] = append(traces[s.SpanContext.TraceID], s.Name)
		}
	}
	for _, names := range traces {
		if strings.Contains(strings.Join(names, "|"), "GET /prodapi/v1/items") {
			for _, want := range []string{"cache.lookup", "cache.flight", "sandbox search items"} {
				if !strings.Contains(strings.Join(names, "|"), want) {
					t.Errorf("trace %v lacks %s", names, want)
				}
			}
			return
		}
	}
	t.Fatalf("no trace of the request in:\n%s", in.stdout)
}

// With tracing on, the access line of a request names its trace and the
// request span; behind a trusted proxy, the client address is the
// right-most of the header the operator named.
func TestAccessLogCorrelates(t *testing.T) {
	in := start(t, "OTEL_TRACES_EXPORTER", "console", "PRODAPI_TRUSTED_PROXY_HEADER", "X-Forwarded-For")
	const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	status, _, body := request(t, http.MethodGet, in.base+"/prodapi/v1/items", "Authorization", bearer(t, devSecret, sources.AllScopes...),
		"Traceparent", "00-"+clientTrace+"-00f067aa0ba902b7-01", "X-Forwarded-For", "203.0.113.9, 198.51.100.7")
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	if err := in.stop(); err != nil { // flushes the log and the spans
		t.Fatal(err)
	}
	var line map[string]any
	for l := range strings.Lines(in.stderr.String()) {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "request" {
			line = m
		}
	}
	var span *consoleSpan
	sc := bufio.NewScanner(strings.NewReader(in.stdout.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s consoleSpan
		if json.Unmarshal(sc.Bytes(), &s) == nil && s.Name == "GET /prodapi/v1/items" {
			span = &s
		}
	}
	if line == nil || span == nil {
		t.Fatalf("no access line or no request span:\n%s\n%s", in.stderr, in.stdout)
	}
	if line["trace_id"] != clientTrace || span.SpanContext.TraceID != clientTrace || line["span_id"] != span.SpanContext.SpanID {
		t.Errorf("access line trace %v span %v; the request span is %s %s", line["trace_id"], line["span_id"],
			span.SpanContext.TraceID, span.SpanContext.SpanID)
	}
	if line["client_ip"] != "198.51.100.7" || line["client_id"] != "e2e" {
		t.Errorf("client_ip %v client_id %v, want 198.51.100.7 and e2e", line["client_ip"], line["client_id"])
	}
}
