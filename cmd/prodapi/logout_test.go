package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/server/metrics"
)

// A stuckSink blocks every Write until released, and says when a Write
// is waiting.
type stuckSink struct {
	entered chan struct{} // closed at the first Write
	release chan struct{} // closed to let writes through
	once    sync.Once

	mu sync.Mutex
	b  bytes.Buffer
}

func newStuckSink() *stuckSink {
	return &stuckSink{entered: make(chan struct{}), release: make(chan struct{})}
}

func (s *stuckSink) Write(p []byte) (int, error) {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *stuckSink) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitOrFail fails the test when done is not closed in a minute: far
// more than what it guards needs (writes to memory), short of a hang.
func waitOrFail(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("%s: still blocked after a minute", what)
	}
}

// A blocked sink never blocks a writer: lines beyond the buffer are
// dropped and counted, the rest written once the sink drains.
func TestLogOutputDropsWhenTheSinkBlocks(t *testing.T) {
	sink := newStuckSink()
	m := metrics.NewMetrics()
	dropped := m.Counter("dropped", "")
	o := newLogOutput(sink, dropped)

	line := []byte(strings.Repeat("x", 1023) + "\n")
	o.Write(line)
	waitOrFail(t, sink.entered, "the writer reaching the sink")

	const n = 2 * maxPending / 1024 // twice what the buffer holds
	wrote := make(chan struct{})
	go func() { // ends when every Write has returned
		defer close(wrote)
		for range n {
			o.Write(line)
		}
	}()
	waitOrFail(t, wrote, "Write while the sink blocks")
	if d := dropped.Value(); d == 0 || d != o.droppedLines() {
		t.Errorf("dropped counter %d, droppedLines %d: want the same, above 0", d, o.droppedLines())
	}

	close(sink.release)
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	written := strings.Count(sink.String(), "\n")
	if uint64(written)+dropped.Value() != n+1 {
		t.Errorf("%d lines written + %d dropped != %d", written, dropped.Value(), n+1)
	}
	if written < maxPending/1024 {
		t.Errorf("only %d lines written: the buffer should have kept %d", written, maxPending/1024)
	}
}

// Lines written while the sink is well reach it in order, batched.
func TestLogOutputWritesLinesInOrder(t *testing.T) {
	var buf syncBuffer
	o := newLogOutput(&buf, nil)
	var want strings.Builder
	for i := range 1000 {
		l := fmt.Sprintf("line %d\n", i)
		want.WriteString(l)
		o.Write([]byte(l))
	}
	if err := o.Close(); err != nil {
		t.Fatal(err)
	}
	if buf.String() != want.String() {
		t.Errorf("lines lost or reordered: got %d bytes, want %d", len(buf.String()), want.Len())
	}
}

// The whole program with its log sink stuck: /healthz, /readyz and the
// API keep answering, and the dropped-lines counter is on /metrics.
func TestBlockedLogSinkDoesNotFreezeTheAPI(t *testing.T) {
	sink := newStuckSink()
	vars := withTestOps(map[string]string{"PRODAPI_SANDBOX": "sample", "PRODAPI_AUTH_ENABLED": "false"})
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	var ops string // set before ready is called
	go func() {    // ends when ctx is cancelled
		done <- run(ctx, env{args: []string{"-addr", "127.0.0.1:0"}, getenv: func(k string) string { return vars[k] },
			stdout: io.Discard, stderr: sink, ready: func(a string) { ready <- a }, opsReady: func(a string) { ops = "http://" + a }})
	}()
	var base string
	select {
	case a := <-ready:
		base = "http://" + a
	case err := <-done:
		t.Fatalf("run: %v", err)
	}
	defer func() {
		close(sink.release)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run returned %v", err)
		}
	}()
	waitOrFail(t, sink.entered, "the first log write")

	answered := make(chan struct{})
	var failures []string
	go func() { // ends when every request has been answered or failed
		defer close(answered)
		for i := range 50 {
			for _, url := range []string{ops + "/healthz", ops + "/readyz", fmt.Sprintf("%s/prodapi/v1/desks?max_results=%d", base, i+1)} {
				res, err := http.Get(url)
				if err != nil {
					failures = append(failures, err.Error())
					continue
				}
				io.Copy(io.Discard, res.Body)
				res.Body.Close()
				if res.StatusCode != 200 {
					failures = append(failures, fmt.Sprintf("%s: %d", url, res.StatusCode))
				}
			}
		}
	}()
	waitOrFail(t, answered, "requests while the log sink blocks")
	if len(failures) > 0 {
		t.Errorf("failures: %v", failures)
	}
	res, err := http.Get(ops + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(b), "prodapi_log_lines_dropped_total 0") {
		t.Errorf("no prodapi_log_lines_dropped_total in /metrics:\n%.2000s", b)
	}
}
