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

// net/http's timeouts hold on Listener's connections (a wrapper that
// kept a deadline from the socket would break them): keep-alive requests
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
