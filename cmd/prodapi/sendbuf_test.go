package main

import (
	"context"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prodapi/prodapi/server/changes/changestest"
	"github.com/prodapi/prodapi/sources"
)

// endlessLog always has max more entries after any position, at once,
// each about a kilobyte.
type endlessLog struct{}

func (endlessLog) Valid(tok string) bool { _, ok := changestest.Position(tok); return ok }

func (endlessLog) Wait(context.Context, string) error { return nil }

func (endlessLog) WaitApplied(context.Context, string) error { return nil }

func (endlessLog) Read(_ context.Context, since string, _ []string, max int) ([]sources.LogEntry, string, error) {
	n, _ := changestest.Position(since)
	out := make([]sources.LogEntry, max)
	for i := range out {
		out[i] = sources.LogEntry{Token: changestest.Token(n + i + 1), Resource: "items", ID: strings.Repeat("x", 1000), Op: sources.OpUpdate}
	}
	return out, changestest.Token(n + max), nil
}

// countingListener counts the bytes its connections' writes took.
type countingListener struct {
	net.Listener
	written *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, written: l.written}, nil
}

type countingConn struct {
	net.Conn
	written *atomic.Int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

func (c *countingConn) NetConn() net.Conn { return c.Conn }

// A stream whose client never reads is dropped once about 64 KiB wait
// in the kernel for it (PRODAPI_CHANGES_WRITE_TIMEOUT after its writes
// stop), not megabytes: through every wrapper of the listener, the
// stream's socket has a small send buffer. The client's receive buffer
// is small too, so that what is counted is the server's.
func TestChangeStreamNeverReadIsDroppedEarly(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var written atomic.Int64
	fs := newFeedServerOn(t, countingListener{ln, &written}, endlessLog{}, 10, time.Hour, "PRODAPI_CHANGES_WRITE_TIMEOUT", "200ms")
	c, err := net.Dial("tcp", fs.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.(*net.TCPConn).SetReadBuffer(4096); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(c, "GET /prodapi/v1/changes?max_results=500 HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	dropped := fs.metrics.Counter("prodapi_changes_consumers_dropped_total", "", "reason")
	eventually(t, "the stream to be dropped", func() bool { return dropped.Value("slow") == 1 })
	t.Logf("%d bytes written to a stream that never read", written.Load())
	if got := written.Load(); got > 256<<10 {
		t.Errorf("%d bytes written to a stream that never read, want about 64 KiB (and under 256 KiB)", got)
	}
}
