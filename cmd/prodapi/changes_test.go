package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/config"
	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/server/changes"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
)

// countingLog is a change log of item updates whose tokens are their
// positions, "1", "2"...: enough to follow a stream through the
// listeners.
type countingLog struct {
	mu   sync.Mutex
	n    int
	grew chan struct{}
}

func newCountingLog() *countingLog { return &countingLog{grew: make(chan struct{})} }

func (l *countingLog) append() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n++
	close(l.grew)
	l.grew = make(chan struct{})
}

func (l *countingLog) Valid(tok string) bool { _, err := strconv.Atoi(tok); return err == nil }

// after is the position since names; ok is false while nothing follows it.
func (l *countingLog) after(since string) (from int, ok bool) {
	from, err := strconv.Atoi(since)
	if err != nil { // "" and "now": both from here, for these tests
		from = l.n
	}
	return from, l.n > from
}

func (l *countingLog) Read(_ context.Context, since string, _ []string, max int) ([]sources.LogEntry, string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	from, _ := l.after(since)
	var out []sources.LogEntry
	for i := from + 1; i <= l.n && len(out) < max; i++ {
		out = append(out, sources.LogEntry{Token: strconv.Itoa(i), Resource: "items", ID: strconv.Itoa(i), Op: sources.OpUpdate})
	}
	return out, strconv.Itoa(from + len(out)), nil
}

// WaitApplied: every entry is applied as it is appended.
func (l *countingLog) WaitApplied(context.Context, string) error { return nil }

func (l *countingLog) Wait(ctx context.Context, since string) error {
	for {
		l.mu.Lock()
		_, ok := l.after(since)
		grew := l.grew
		l.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-grew:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// A feedServer serves a change log as run does: the API's http.Server
// with the configuration its environment gives, on the connection cap
// over server.Listener.
type feedServer struct {
	addr    string
	hs      *http.Server
	limit   *connLimiter
	metrics *metrics.Metrics
}

func newFeedServer(t *testing.T, log changes.Log, maxConns int, heartbeat time.Duration, env ...string) *feedServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return newFeedServerOn(t, ln, log, maxConns, heartbeat, env...)
}

// newFeedServerOn is newFeedServer on ln.
func newFeedServerOn(t *testing.T, ln net.Listener, log changes.Log, maxConns int, heartbeat time.Duration, env ...string) *feedServer {
	t.Helper()
	vars := map[string]string{"PRODAPI_AUTH_ENABLED": "false"}
	for i := 0; i+1 < len(env); i += 2 {
		vars[env[i]] = env[i+1]
	}
	cfg, err := config.Load(func(k string) string { return vars[k] })
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.NewMetrics()
	srv := server.New(nil, server.Options{Metrics: m,
		Changes: changes.New(log, changes.Options{Metrics: m, Heartbeat: heartbeat, WriteTimeout: cfg.ChangesWriteTimeout,
			MaxPolls: cfg.ChangesMaxPolls, ClientMaxWaits: cfg.ClientMaxWaits})})
	limit := newConnLimiter(maxConns, m)
	hs := apiServer(cfg, srv, limit, slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	go func() { // ends when the server shuts down or closes
		defer close(done)
		hs.Serve(limit.listener(server.Listener(ln)))
	}()
	t.Cleanup(func() { hs.Close(); <-done })
	return &feedServer{addr: ln.Addr().String(), hs: hs, limit: limit, metrics: m}
}

// openStream sends a stream's request on a new connection and reads the
// response's header.
func openStream(t *testing.T, addr, target string) *bufio.Reader {
	t.Helper()
	c := dialRaw(t, addr)
	if _, err := io.WriteString(c.c, "GET /prodapi/v1/changes"+target+" HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(c.r, nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("stream: %v %v", res, err)
	}
	return bufio.NewReader(res.Body)
}

// nextEvent returns the data of the next event, skipping heartbeats.
func nextEvent(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended: %v", err)
		}
		if data, ok := strings.CutPrefix(line, "data: "); ok {
			return strings.TrimSpace(data)
		}
	}
}

// Streams and long polls outlive PRODAPI_WRITE_TIMEOUT and
// PRODAPI_READ_TIMEOUT, through every connection wrapper: each write of
// theirs gets its own deadline, and the flushes reach the socket.
func TestChangeStreamsOutliveTheServerTimeouts(t *testing.T) {
	log := newCountingLog()
	const timeout = 200 * time.Millisecond
	fs := newFeedServer(t, log, 10, 10*time.Millisecond,
		"PRODAPI_WRITE_TIMEOUT", "200ms", "PRODAPI_READ_TIMEOUT", "200ms", "PRODAPI_READ_HEADER_TIMEOUT", "200ms",
		"PRODAPI_BACKEND_TIMEOUT", "50ms")

	r := openStream(t, fs.addr, "?since=now")
	log.append()
	if got := nextEvent(t, r); !strings.Contains(got, `"_id":"1"`) {
		t.Fatalf("first event %s", got)
	}
	// Heartbeats keep coming well past both timeouts...
	start := time.Now()
	for time.Since(start) < 5*timeout {
		if line, err := r.ReadString('\n'); err != nil {
			t.Fatalf("the stream ended after %s (line %q): %v", time.Since(start), line, err)
		}
	}
	// ...and so do events.
	log.append()
	if got := nextEvent(t, r); !strings.Contains(got, `"_id":"2"`) {
		t.Errorf("event after the timeouts: %s", got)
	}

	// A long poll of a second, five times the write timeout, answers,
	// from the end of the log.
	get := func(target string) (int, string) {
		t.Helper()
		res, err := http.Get("http://" + fs.addr + "/prodapi/v1/changes" + target)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		return res.StatusCode, string(body)
	}
	var end struct {
		Meta struct{ Since string } `json:"_meta"`
	}
	if _, body := get("?since=now"); json.Unmarshal([]byte(body), &end) != nil || end.Meta.Since == "" {
		t.Fatalf("since=now: %s", body)
	}
	if status, body := get("?wait=1&since=" + end.Meta.Since); status != 200 || !strings.Contains(body, `"_items":[]`) {
		t.Errorf("long poll: %d %s", status, body)
	}
}

// A stream's connection is busy, never idle: the connection cap sheds
// an idle keep-alive connection for a new one, never the stream.
func TestChangeStreamsHoldTheirConnection(t *testing.T) {
	log := newCountingLog()
	fs := newFeedServer(t, log, 2, time.Hour)
	r := openStream(t, fs.addr, "?since=now")
	idle := dialRaw(t, fs.addr)
	if code, err := idle.get(t); err != nil || code != 404 {
		t.Fatalf("keep-alive request: %d %v", code, err)
	}
	waitIdle(t, fs.limit, 1)
	third := dialRaw(t, fs.addr)
	if code, err := third.get(t); err != nil || code != 404 {
		t.Fatalf("a connection at the cap: %d %v", code, err)
	}
	if !idle.closed() {
		t.Error("the idle connection was kept")
	}
	log.append()
	if got := nextEvent(t, r); !strings.Contains(got, `"_id":"1"`) {
		t.Errorf("the stream after the cap shed a connection: %s", got)
	}
	if got := fs.metrics.Counter("prodapi_http_connections_shed_total", "", "reason").Value("idle"); got != 1 {
		t.Errorf("shed idle = %d, want 1", got)
	}
}

// Shutdown ends streams at once, instead of waiting out the grace.
func TestShutdownEndsChangeStreams(t *testing.T) {
	fs := newFeedServer(t, newCountingLog(), 10, time.Hour)
	r := openStream(t, fs.addr, "")
	// The stream's header is out, so it is open: Shutdown must end it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := fs.hs.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if rest, err := io.ReadAll(r); err != nil || len(rest) > 0 {
		t.Errorf("after shutdown: %q %v", rest, err)
	}
}
