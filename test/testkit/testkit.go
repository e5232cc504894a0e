// Package testkit holds what tests across the module need alike: a
// clock moved by hand, a wait for a condition, a buffer to read a log
// from while it is written, and one HTTP exchange. Only tests import it.
package testkit

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

// A Clock is a time source a test sets and moves; safe for concurrent
// use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

// Advance moves the clock by d (back when d is negative).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// Wait is how long Eventually waits: generous, as a busy machine makes
// everything slow, and only a failing test ever waits it out.
const Wait = time.Minute

// Eventually polls cond every millisecond until it holds, and fails t
// when it still does not after Wait.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Wait)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// A Buffer is a log sink (or any io.Writer) a test reads while others
// write to it; safe for concurrent use, its zero value empty.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A Response is what an HTTP request got: its status, header and body.
type Response struct {
	Status int
	Header http.Header
	Body   string
}

// Do sends a request to url, its header given as name, value pairs (a
// later pair replaces an earlier one of the same name), by the default
// transport alone: no redirect is followed.
func Do(t testing.TB, method, url string, header ...string) Response {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return Response{res.StatusCode, res.Header, string(b)}
}
