package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/prodapi/prodapi/sources"
)

// PRODAPI_ACCESS_LOG_HITS: hits are logged one in round(1/share); every
// other request always.
func TestAccessLogSamplesHits(t *testing.T) {
	loader := LoaderFunc(func(_ context.Context, q *sources.Query) (*sources.Representation, error) {
		outcome := "hit"
		if strings.HasPrefix(q.ID, "miss") {
			outcome = "miss"
		}
		return &sources.Representation{Status: 200, Body: []byte(`{}`), Total: -1, Outcome: outcome, CacheStatus: "prodapi; " + outcome}, nil
	})
	tok := token(t, sources.AllScopes...)
	for _, tc := range []struct {
		share     *float64
		wantHits  int
		wantOther int
	}{
		{nil, 200, 10},
		{ptr(1.0), 200, 10},
		{ptr(0.01), 2, 10},
		{ptr(0.1), 20, 10},
		{ptr(0.0), 0, 10},
	} {
		var log bytes.Buffer
		h := New(loader, Options{Auth: AuthOptions{Enabled: true, Secret: testSecret, Now: func() time.Time { return testNow }},
			Now: func() time.Time { return testNow }, AccessLog: &log, AccessLogHits: tc.share}).Handler()
		serve := func(target string) {
			r := httptest.NewRequest(http.MethodGet, target, nil)
			r.Header.Set("Authorization", tok)
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
		for range 200 {
			serve("/prodapi/v1/items/hit")
		}
		for range 5 {
			serve("/prodapi/v1/items/miss")
			serve("/prodapi/v1/nothing-here") // 404, no outcome
		}
		hits, other := 0, 0
		for line := range strings.Lines(log.String()) {
			if strings.Contains(line, `"cache":"hit"`) {
				hits++
			} else {
				other++
			}
		}
		if hits != tc.wantHits || other != tc.wantOther {
			share := "nil"
			if tc.share != nil {
				share = fmt.Sprint(*tc.share)
			}
			t.Errorf("share %s: %d hit lines and %d others, want %d and %d", share, hits, other, tc.wantHits, tc.wantOther)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// accessLines parses an access log, one JSON object a line.
func accessLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for line := range strings.Lines(log) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("access line is not JSON: %v\n%s", err, line)
		}
		lines = append(lines, m)
	}
	return lines
}

// A logPair is one configuration served twice, once with each
// access-log encoder: our own (a writer) and log/slog's JSON handler (no
// writer).
type logPair struct {
	own, viaSlog       http.Handler
	ownLog, viaSlogLog bytes.Buffer
}

func newLogPair(opts Options) *logPair {
	p := &logPair{}
	o := opts
	o.AccessLog = &p.ownLog
	p.own = New(staticLoader(okRep(`{}`), nil), o).Handler()
	o = opts
	o.Logger = slog.New(slog.NewJSONHandler(&p.viaSlogLog, nil))
	p.viaSlog = New(staticLoader(okRep(`{}`), nil), o).Handler()
	return p
}

// line serves a request with each encoder and returns the line ours
// wrote. The two lines must agree, but for the time and duration.
func (p *logPair) line(t *testing.T, newRequest func() *http.Request) map[string]any {
	t.Helper()
	p.ownLog.Reset()
	p.viaSlogLog.Reset()
	for _, h := range []http.Handler{p.own, p.viaSlog} {
		r := newRequest()
		r.Header.Set("X-Request-Id", "test-request")
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	got, want := accessLines(t, p.ownLog.String()), accessLines(t, p.viaSlogLog.String())
	if len(got) != 1 || len(want) != 1 {
		t.Fatalf("%d and %d lines, want one each:\n%s\n%s", len(got), len(want), p.ownLog.String(), p.viaSlogLog.String())
	}
	for _, key := range []string{"time", "duration_us"} {
		delete(got[0], key)
		delete(want[0], key)
	}
	if diff := cmp.Diff(want[0], got[0]); diff != "" {
		t.Errorf("our line differs from slog's (-slog +ours):\n%s", diff)
	}
	return got[0]
}

// client_ip is the TCP peer's address unless a trusted proxy header is
// configured; then the right-most address of that header, and the
// peer's again when it holds none. Unconfigured, no header is believed.
func TestAccessLogClientIP(t *testing.T) {
	pairs := map[string]*logPair{}
	for _, tc := range []struct {
		name, setting, remote string
		header                []string // name, value, name, value...
		want                  string   // "": no client_ip
	}{
		{"peer", "", "192.0.2.1:1234", nil, "192.0.2.1"},
		{"peer, IPv6", "", "[2001:db8::2]:5000", nil, "2001:db8::2"},
		{"peer, no address", "", "@", nil, ""},
		{"header not configured", "", "192.0.2.1:1234", []string{"X-Forwarded-For", "203.0.113.9"}, "192.0.2.1"},
		{"another header than configured", "X-Forwarded-For", "192.0.2.1:1234", []string{"X-Real-Ip", "203.0.113.9"}, "192.0.2.1"},
		{"right-most", "X-Forwarded-For", "192.0.2.1:1234", []string{"X-Forwarded-For", "203.0.113.9, 198.51.100.7"}, "198.51.100.7"},
		{"right-most of two lines", "x-forwarded-for", "192.0.2.1:1234",
			[]string{"X-Forwarded-For", "203.0.113.9", "X-Forwarded-For", "203.0.113.10,198.51.100.7"}, "198.51.100.7"},
		{"with a port", "X-Forwarded-For", "192.0.2.1:1234", []string{"X-Forwarded-For", "198.51.100.7:443"}, "198.51.100.7"},
		{"IPv6", "X-Forwarded-For", "192.0.2.1:1234", []string{"X-Forwarded-For", "2001:db8::1"}, "2001:db8::1"},
		{"IPv6 with a port", "X-Forwarded-For", "192.0.2.1:1234", []string{"X-Forwarded-For", "[2001:db8::1]:443"}, "2001:db8::1"},
		{"IPv4-mapped", "X-Forwarded-For", "192.0.2.1:1234", []string{"X-Forwarded-For", "::ffff:198.51.100.7"}, "198.51.100.7"},
		{"a zone is dropped", "X-Forwarded-For", "192.0.2.1:1234", []string{"X-Forwarded-For", `fe80::1%eth0"}`}, "fe80::1"},
		{"unknown", "X-Forwarded-For", "192.0.2.1:1234", []string{"X-Forwarded-For", "203.0.113.9, unknown"}, "192.0.2.1"},
		{"garbage", "X-Forwarded-For", "192.0.2.1:1234", []string{"X-Forwarded-For", `"}, {"level":"ERROR"`}, "192.0.2.1"},
		{"empty", "X-Forwarded-For", "192.0.2.1:1234", []string{"X-Forwarded-For", ""}, "192.0.2.1"},
		{"absent", "X-Forwarded-For", "192.0.2.1:1234", nil, "192.0.2.1"},
		{"X-Real-IP", "X-Real-IP", "192.0.2.1:1234", []string{"X-Real-Ip", "203.0.113.9"}, "203.0.113.9"},
		{"Forwarded", "Forwarded", "192.0.2.1:1234",
			[]string{"Forwarded", `for=192.0.2.60;proto=http;by=203.0.113.43, Proto=https;For="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17"},
		{"Forwarded, IPv4", "forwarded", "192.0.2.1:1234", []string{"Forwarded", "for=198.51.100.7"}, "198.51.100.7"},
		{"Forwarded, obfuscated", "Forwarded", "192.0.2.1:1234", []string{"Forwarded", "for=_hidden"}, "192.0.2.1"},
		{"Forwarded without for", "Forwarded", "192.0.2.1:1234", []string{"Forwarded", "for=198.51.100.7, proto=https"}, "192.0.2.1"},
	} {
		if pairs[tc.setting] == nil {
			pairs[tc.setting] = newLogPair(Options{TrustedProxyHeader: tc.setting})
		}
		t.Run(tc.name, func(t *testing.T) {
			line := pairs[tc.setting].line(t, func() *http.Request {
				r := httptest.NewRequest(http.MethodGet, "/prodapi/v1/items", nil)
				r.RemoteAddr = tc.remote
				for i := 0; i+1 < len(tc.header); i += 2 {
					r.Header.Add(tc.header[i], tc.header[i+1])
				}
				return r
			})
			got, present := line["client_ip"]
			if tc.want == "" && present || tc.want != "" && got != tc.want {
				t.Errorf("client_ip %v, want %q", got, tc.want)
			}
		})
	}
}

// client_id is the verified token's, also when its scope falls short;
// an unverified token names nobody. The User-Agent is logged as sent, up
// to 256 bytes cut at a rune, JSON-escaped: it cannot forge a line.
func TestAccessLogNamesTheCaller(t *testing.T) {
	pair := newLogPair(Options{Auth: AuthOptions{Enabled: true, Secret: testSecret, Now: func() time.Time { return testNow }},
		Now: func() time.Time { return testNow }})
	forged := "Bearer " + sign(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), validClaims([]string{"ARCHIVE_READ"}))
	for _, tc := range []struct {
		name, auth, userAgent string
		status                float64
		clientID, wantUA      string // "": absent
	}{
		{"granted", token(t, sources.AllScopes...), "curl/8.5.0", 200, "test-client", "curl/8.5.0"},
		{"scope lacking", token(t, "DESKS_READ"), "curl/8.5.0", 403, "test-client", "curl/8.5.0"},
		{"forged", forged, "curl/8.5.0", 401, "", "curl/8.5.0"},
		{"no token", "", "", 401, "", ""},
		{"long", token(t, sources.AllScopes...), strings.Repeat("a", 1000), 200, "test-client", strings.Repeat("a", 256)},
		{"cut at a rune", token(t, sources.AllScopes...), "a" + strings.Repeat("é", 200), 200, "test-client", "a" + strings.Repeat("é", 127)},
		{"a forged line", token(t, sources.AllScopes...), "x\"}\n{\"level\":\"ERROR\",\"msg\":\"forged\"", 200, "test-client",
			"x\"}\n{\"level\":\"ERROR\",\"msg\":\"forged\""},
		{"invalid UTF-8", token(t, sources.AllScopes...), "bot\xff/1", 200, "test-client", "bot\ufffd/1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := pair.line(t, func() *http.Request {
				r := httptest.NewRequest(http.MethodGet, "/prodapi/v1/items", nil)
				if tc.auth != "" {
					r.Header.Set("Authorization", tc.auth)
				}
				if tc.userAgent != "" {
					r.Header.Set("User-Agent", tc.userAgent)
				}
				return r
			})
			if line["status"] != tc.status {
				t.Errorf("status %v, want %v", line["status"], tc.status)
			}
			for key, want := range map[string]string{"client_id": tc.clientID, "user_agent": tc.wantUA} {
				if got, present := line[key]; want == "" && present || want != "" && got != want {
					t.Errorf("%s %q, want %q", key, got, want)
				}
			}
			for _, v := range line {
				if s, ok := v.(string); ok && tc.auth != "" && strings.Contains(s, strings.TrimPrefix(tc.auth, "Bearer ")) {
					t.Errorf("the token reached the log: %v", line)
				}
			}
		})
	}
}

// With tracing on, a line names the request's span and its trace (the
// client's, when it sent a traceparent); with tracing off, neither, even
// when the client sent one.
func TestAccessLogCarriesTheTrace(t *testing.T) {
	const clientTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	for _, tc := range []struct {
		name        string
		tracer      bool
		traceparent string
	}{
		{"client's trace", true, "00-" + clientTrace + "-00f067aa0ba902b7-01"},
		{"a trace of its own", true, ""},
		{"tracing off", false, "00-" + clientTrace + "-00f067aa0ba902b7-01"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log bytes.Buffer
			opts := Options{AccessLog: &log}
			if tc.tracer {
				opts.Tracer = tp
			}
			r := httptest.NewRequest(http.MethodGet, "/prodapi/v1/items", nil)
			if tc.traceparent != "" {
				r.Header.Set("Traceparent", tc.traceparent)
			}
			New(staticLoader(okRep(`{}`), nil), opts).Handler().ServeHTTP(httptest.NewRecorder(), r)
			line := accessLines(t, log.String())[0]
			if !tc.tracer {
				if _, ok := line["trace_id"]; ok {
					t.Errorf("tracing off, and the line names a trace: %v", line)
				}
				if _, ok := line["span_id"]; ok {
					t.Errorf("tracing off, and the line names a span: %v", line)
				}
				return
			}
			ended := spans.Ended()
			span := ended[len(ended)-1].SpanContext()
			if line["trace_id"] != span.TraceID().String() || line["span_id"] != span.SpanID().String() {
				t.Errorf("trace %v span %v, want the request span's %s %s", line["trace_id"], line["span_id"], span.TraceID(), span.SpanID())
			}
			if tc.traceparent != "" && line["trace_id"] != clientTrace {
				t.Errorf("trace %v, want the client's %s", line["trace_id"], clientTrace)
			}
		})
	}
}

// Who asked costs a cache hit no allocation, whichever header names the
// client: a hit allocates as many times as one with no User-Agent and no
// proxy header (TestHitAllocations counts those, chi's and the header
// values').
func TestAccessLogHitAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	var ranges []netip.Prefix
	allocs := func(setting string, header ...string) float64 {
		h, tok := hitHandler(t, func(o *Options) { o.TrustedProxyHeader, o.TrustedProxies = setting, ranges })
		r := httptest.NewRequest(http.MethodGet, "/prodapi/v1/items/x", nil)
		r.Header.Set("Authorization", tok)
		r.Header.Set("Accept-Encoding", "gzip")
		for i := 0; i+1 < len(header); i += 2 {
			r.Header.Set(header[i], header[i+1])
		}
		w := &discardWriter{h: http.Header{}}
		h.ServeHTTP(w, r) // the miss
		return testing.AllocsPerRun(1000, func() {
			clear(w.h)
			h.ServeHTTP(w, r)
		})
	}
	base := allocs("")
	for _, tc := range []struct{ setting, header, value string }{
		{"", "", ""},
		{"X-Forwarded-For", "X-Forwarded-For", "203.0.113.9, 198.51.100.7"},
		{"X-Forwarded-For", "X-Forwarded-For", "[2001:db8::1]:443"},
		{"Forwarded", "Forwarded", `for=192.0.2.60;proto=http, for="[2001:db8:cafe::17]:4711"`},
	} {
		header := []string{"User-Agent", benchUserAgent}
		if tc.header != "" {
			header = append(header, tc.header, tc.value)
		}
		// From any peer, and from a trusted one (httptest's 192.0.2.1),
		// through trusted hops.
		for _, ranges = range [][]netip.Prefix{nil, {netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.100.0/24")}} {
			if got := allocs(tc.setting, header...); got != base {
				t.Errorf("%s %q, ranges %v: %.2f allocations per hit, %.2f without who asked", tc.header, tc.value, ranges, got, base)
			}
		}
	}
}

// BenchmarkAccessLine is the cost of writing one line, with and without
// who asked (trace, client id, address, User-Agent).
func BenchmarkAccessLine(b *testing.B) {
	a := &accessLogger{w: io.Discard, hits: newSampler(nil)}
	base := accessLine{time: testNow, method: "GET", route: "/prodapi/v1/items/{id}", path: "/prodapi/v1/items/urn:newsml:x:a3a0921f",
		status: 200, bytes: 1432, duration: 17 * time.Microsecond, id: "c6dd9b656791-1", outcome: "hit"}
	who := base
	who.traceID, who.spanID = trace.TraceID{0x4b, 0xf9, 1}, trace.SpanID{0x00, 0xf0, 1}
	who.clientID, who.clientIP, who.userAgent = "5dad7ee94269dd1d5a78e6a1", netip.MustParseAddr("198.51.100.7"), benchUserAgent
	for _, bc := range []struct {
		name string
		line accessLine
	}{{"base", base}, {"who", who}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a.log(context.Background(), bc.line)
			}
		})
	}
}
