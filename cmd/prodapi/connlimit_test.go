package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prodapi/prodapi/server/metrics"
)

// limitedServer serves h on loopback with at most max connections.
func limitedServer(t *testing.T, max int, h http.Handler) (string, *connLimiter, *metrics.Metrics) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := metrics.NewMetrics()
	l := newConnLimiter(max, m)
	hs := &http.Server{Handler: h, ConnState: l.connState}
	done := make(chan struct{})
	go func() { // ends when Close closes the listener
		defer close(done)
		hs.Serve(l.listener(ln))
	}()
	t.Cleanup(func() { hs.Close(); <-done })
	return ln.Addr().String(), l, m
}

// A keep-alive client connection: one request at a time.
type rawConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{c: c, r: bufio.NewReader(c)}
}

func (rc *rawConn) send(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(rc.c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
}

// get sends a request and reads its response; err is set when the server
// closed the connection instead.
func (rc *rawConn) get(t *testing.T) (int, error) {
	t.Helper()
	rc.send(t)
	return rc.read()
}

func (rc *rawConn) read() (int, error) {
	res, err := http.ReadResponse(rc.r, nil)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, nil
}

// closed reports whether the server has closed the connection (the read
// ends at once with EOF or a reset; a minute is far more than it needs).
func (rc *rawConn) closed() bool {
	rc.c.SetReadDeadline(time.Now().Add(time.Minute))
	_, err := rc.r.ReadByte()
	return err != nil && !isTimeout(err)
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// waitIdle waits until the limiter sees n idle connections.
func waitIdle(t *testing.T, l *connLimiter, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if _, idle := l.counts(); idle == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("never saw %d idle connections", n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestConnLimitShedsTheLongestIdle(t *testing.T) {
	addr, l, m := limitedServer(t, 2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	for _, c := range []*rawConn{a, b} {
		if code, err := c.get(t); err != nil || code != 200 {
			t.Fatalf("first requests: %d %v", code, err)
		}
	}
	waitIdle(t, l, 2)
	// b is used again: a is now the one idle the longest.
	if code, err := b.get(t); err != nil || code != 200 {
		t.Fatalf("b again: %d %v", code, err)
	}
	waitIdle(t, l, 2)

	c := dialRaw(t, addr)
	if code, err := c.get(t); err != nil || code != 200 {
		t.Fatalf("a third connection at the cap: %d %v, want it served", code, err)
	}
	if !a.closed() {
		t.Error("the longest idle connection was not closed")
	}
	if code, err := b.get(t); err != nil || code != 200 {
		t.Errorf("b, more recently used, was closed: %d %v", code, err)
	}
	if open, _ := l.counts(); open != 2 {
		t.Errorf("%d connections held, want 2", open)
	}
	if got := m.Counter("prodapi_http_connections_shed_total", "", "reason").Value("idle"); got != 1 {
		t.Errorf("shed idle = %d, want 1", got)
	}
}

func TestConnLimitRefusesWhenNoneIsIdle(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	addr, l, m := limitedServer(t, 2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	}))
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	a.send(t)
	b.send(t)
	<-entered
	<-entered
	c := dialRaw(t, addr)
	c.send(t)
	if !c.closed() {
		t.Error("a connection over the cap, none idle, was not closed")
	}
	close(release)
	for _, rc := range []*rawConn{a, b} {
		if code, err := rc.read(); err != nil || code != 200 {
			t.Errorf("busy connection: %d %v, want 200", code, err)
		}
	}
	if got := m.Counter("prodapi_http_connections_shed_total", "", "reason").Value("full"); got != 1 {
		t.Errorf("shed full = %d, want 1", got)
	}
	if open, _ := l.counts(); open != 2 {
		t.Errorf("%d connections held, want 2", open)
	}
}

// A connection that was idle and is busy again is not idle: the cap
// closes the one idle now, never one in the middle of a request.
func TestConnLimitSparesTheBusyAgain(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	addr, l, _ := limitedServer(t, 2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/block" {
			entered <- struct{}{}
			<-release
		}
	}))
	a, b := dialRaw(t, addr), dialRaw(t, addr)
	for i, c := range []*rawConn{a, b} { // a goes idle first: the older mark
		if code, err := c.get(t); err != nil || code != 200 {
			t.Fatalf("first requests: %d %v", code, err)
		}
		waitIdle(t, l, i+1)
	}
	if _, err := io.WriteString(a.c, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	<-entered
	waitIdle(t, l, 1)

	c := dialRaw(t, addr)
	if code, err := c.get(t); err != nil || code != 200 {
		t.Fatalf("a third connection at the cap: %d %v, want it served", code, err)
	}
	if !b.closed() {
		t.Error("the idle connection was not the one closed")
	}
	close(release)
	if code, err := a.read(); err != nil || code != 200 {
		t.Errorf("the busy connection's request: %d %v, want 200", code, err)
	}
}

// halfCloser is a connection that records net/http's half-close.
type halfCloser struct {
	net.Conn
	closedWrite bool
}

func (h *halfCloser) CloseWrite() error { h.closedWrite = true; return nil }

func TestLimitedConnCloseWrite(t *testing.T) {
	c := &halfCloser{}
	cw, ok := newConnLimiter(1, nil).admit(c).(interface{ CloseWrite() error })
	if !ok {
		t.Fatal("a limited connection hides CloseWrite from net/http")
	}
	if err := cw.CloseWrite(); err != nil || !c.closedWrite {
		t.Fatalf("CloseWrite = %v, passed through: %v", err, c.closedWrite)
	}
}
