package server

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// recordedDeadline is a lazyDeadline whose socket is a list.
func recordedDeadline() (*lazyDeadline, *[]time.Time) {
	var applied []time.Time
	return &lazyDeadline{set: func(t time.Time) error {
		applied = append(applied, t)
		return nil
	}}, &applied
}

func TestLazyDeadline(t *testing.T) {
	d, applied := recordedDeadline()
	base := time.Unix(1_700_000_000, 0)
	header, whole, idle := base.Add(5*time.Second), base.Add(10*time.Second), base.Add(2*time.Minute)

	// Replaced before any I/O: nothing reaches the socket.
	d.request(header)
	d.request(whole)
	d.request(time.Time{})
	if err := d.begin(); err != nil {
		t.Fatal(err)
	}
	d.end()
	if len(*applied) != 0 {
		t.Fatalf("applied %v, want nothing: the socket already had no deadline", *applied)
	}

	// The last one asked for reaches the socket when I/O starts.
	d.request(header)
	d.request(idle)
	d.begin()
	d.end()
	if len(*applied) != 1 || !(*applied)[0].Equal(idle) {
		t.Fatalf("applied %v, want [%v]", *applied, idle)
	}

	// While I/O is under way, a deadline applies at once (net/http stops
	// its background read so).
	d.begin()
	past := time.Unix(1, 0)
	d.request(past)
	if n := len(*applied); n != 2 || !(*applied)[1].Equal(past) {
		t.Fatalf("applied %v, want %v applied during the read", *applied, past)
	}
	d.end()

	// A deadline the socket already has is not applied again.
	d.request(past)
	d.begin()
	d.end()
	if n := len(*applied); n != 2 {
		t.Fatalf("applied %v again", (*applied)[2:])
	}
}

func TestLazyDeadlineFailure(t *testing.T) {
	closed := errors.New("closed")
	d := &lazyDeadline{set: func(time.Time) error { return closed }}
	d.request(time.Unix(5, 0))
	if err := d.begin(); !errors.Is(err, closed) {
		t.Fatalf("begin = %v, want the socket's error", err)
	}
	if d.busy.Load() != 0 {
		t.Fatal("a failed begin left the direction busy")
	}
}

// pipeConn returns the server end of a loopback connection, wrapped as
// Listener wraps it, and the client end.
func pipeConn(t *testing.T) (*conn, net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	sc, err := Listener(ln).Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sc.Close() })
	return sc.(*conn), client
}

func TestConnDeadlineStopsABlockedRead(t *testing.T) {
	c, _ := pipeConn(t)
	done := make(chan error, 1)
	go func() { // ends when the deadline stops the read
		_, err := c.Read(make([]byte, 1))
		done <- err
	}()
	for c.rd.busy.Load() == 0 { // until the read is under way
		time.Sleep(time.Millisecond)
	}
	c.SetReadDeadline(time.Unix(1, 0))
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read = %v, want the deadline exceeded", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("a deadline set during a read did not stop it")
	}
}

func TestConnDeadlineBeforeTheRead(t *testing.T) {
	c, client := pipeConn(t)
	if _, err := io.WriteString(client, "ab"); err != nil {
		t.Fatal(err)
	}
	// A deadline already past fails the read, data or not, as on the
	// socket itself.
	c.SetReadDeadline(time.Unix(1, 0))
	if _, err := c.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read = %v, want the deadline exceeded", err)
	}
	// Replaced before the next read: the read succeeds.
	c.SetReadDeadline(time.Unix(1, 0))
	c.SetReadDeadline(time.Time{})
	if n, err := c.Read(make([]byte, 2)); err != nil || n == 0 {
		t.Fatalf("read = %d, %v", n, err)
	}
	c.SetWriteDeadline(time.Unix(1, 0))
	if _, err := c.Write([]byte("x")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write = %v, want the deadline exceeded", err)
	}
	c.SetDeadline(time.Time{})
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatalf("write = %v", err)
	}
}

// net/http's timeouts hold on Listener's connections: keep-alive requests
// follow one another; a handler that runs past the read timeout keeps its
// request (its background read runs under no deadline), and its
// connection then goes idle and is let go after the idle timeout; so is a
// client that sends half a header.
func TestListenerTimeouts(t *testing.T) {
	const timeout = 50 * time.Millisecond
	slow := make(chan error, 1)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(4 * timeout) // past the read timeout: a lower bound, whatever the machine
			slow <- r.Context().Err()
		}
		io.WriteString(w, "ok")
	})
	serve := func(idle time.Duration) string {
		hs := &http.Server{Handler: handler, ReadHeaderTimeout: timeout, ReadTimeout: timeout,
			WriteTimeout: time.Minute, IdleTimeout: idle}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go hs.Serve(Listener(ln)) // ends when Close closes the listener
		t.Cleanup(func() { hs.Close() })
		return ln.Addr().String()
	}
	dial := func(addr string) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(time.Minute)) // the test's own bound
		return c, bufio.NewReader(c)
	}
	get := func(c net.Conn, r *bufio.Reader, path string) {
		t.Helper()
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		res, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("GET %s: %d %q", path, res.StatusCode, b)
		}
	}
	closedByServer := func(r *bufio.Reader) bool {
		_, err := r.ReadByte()
		return err == io.EOF || (err != nil && !errors.Is(err, os.ErrDeadlineExceeded))
	}

	// A long idle timeout: a client slow to send its next request (a busy
	// machine) is not what this part is about.
	c, r := dial(serve(time.Minute))
	for range 20 {
		get(c, r, "/")
	}

	// The background read is blocked when the slow handler ends: the
	// deadline that stops it must reach the socket at once, or the
	// connection never gets to its idle wait.
	short := serve(timeout)
	c, r = dial(short)
	get(c, r, "/slow")
	if err := <-slow; err != nil {
		t.Errorf("a handler past the read timeout saw its request end: %v", err)
	}
	if !closedByServer(r) {
		t.Error("an idle connection was not closed after the idle timeout")
	}
	c, r = dial(short)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n")
	if !closedByServer(r) {
		t.Error("half a header was not let go after the header timeout")
	}
}

func TestConnCloseWrite(t *testing.T) {
	c, client := pipeConn(t)
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the client read %v after the half-close, want EOF", err)
	}
	// The other direction stays open: net/http reads on while it waits.
	if _, err := io.WriteString(client, "x"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Read(make([]byte, 1)); n != 1 || err != nil {
		t.Fatalf("read after the half-close = %d, %v", n, err)
	}
}

// A deadline the closed socket refuses fails the read as a read, the way
// net/http recognises a connection that went away.
func TestConnClosedReadIsARead(t *testing.T) {
	c, _ := pipeConn(t)
	c.Conn.Close()
	c.SetReadDeadline(time.Now().Add(time.Minute))
	_, err := c.Read(make([]byte, 1))
	var oe *net.OpError
	if !errors.As(err, &oe) || oe.Op != "read" || !errors.Is(err, net.ErrClosed) {
		t.Fatalf("read = %#v, want a read error on a closed connection", err)
	}
}
