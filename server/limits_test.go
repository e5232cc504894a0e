package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// rawRequest sends raw bytes on a fresh connection and reads the response.
func rawRequest(t *testing.T, addr, req string) (int, http.Header, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	// Write from another goroutine: the server may answer (and close)
	// before it has read a large request.
	go io.WriteString(c, req) // ends when written or the connection closes
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

// Errors net/http writes itself, and the header limits, answer in the
// error envelope; the limits are the ones net/http applied before.
func TestNetHTTPErrorsInTheEnvelope(t *testing.T) {
	var loads atomic.Int64
	h := New(LoaderFunc(func(context.Context, *sources.Query) (*sources.Representation, error) {
		loads.Add(1)
		return okRep(`{"_items":[]}`), nil
	}), Options{Auth: AuthOptions{Enabled: false}}).Handler()
	ts := httptest.NewUnstartedServer(h)
	ts.Listener = Listener(ts.Listener)
	ts.Config.MaxHeaderBytes = NetHTTPMaxHeaderBytes
	ts.Start()
	defer ts.Close()
	addr := ts.Listener.Addr().String()

	pad := func(n int) string { return "X-Pad: " + strings.Repeat("a", n) + "\r\n" }
	for _, tc := range []struct {
		name   string
		req    string
		status int
	}{
		{"malformed Host", "GET /prodapi/v1/desks HTTP/1.1\r\nHost: a b\r\n\r\n", 400},
		{"missing Host", "GET /prodapi/v1/desks HTTP/1.1\r\n\r\n", 400},
		{"invalid header name", "GET /prodapi/v1/desks HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n", 400},
		{"unsupported version", "GET /prodapi/v1/desks HTTP/2.5\r\nHost: x\r\n\r\n", 505},
		{"70 KiB of headers", "GET /prodapi/v1/desks HTTP/1.1\r\nHost: x\r\n" + pad(70<<10) + "\r\n", 431},
		{"300 KiB of headers", "GET /prodapi/v1/desks HTTP/1.1\r\nHost: x\r\n" + pad(300<<10) + "\r\n", 431},
		{"100 KB request line", "GET /prodapi/v1/desks?q=" + strings.Repeat("a", 100_000) + " HTTP/1.1\r\nHost: x\r\n\r\n", 414},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, header, body := rawRequest(t, addr, tc.req)
			want := `{"_status":"ERR","_error":{"code":` + strconv.Itoa(tc.status) + `,"message":"`
			if status != tc.status || header.Get("Content-Type") != "application/json" || !strings.HasPrefix(body, want) {
				t.Errorf("got %d %q %q, want %d in the envelope", status, header.Get("Content-Type"), body, tc.status)
			}
			if got := header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options %q, want nosniff", got)
			}
		})
	}
	if n := loads.Load(); n != 0 {
		t.Errorf("refused requests cost %d loads", n)
	}
	// What net/http accepted before is still accepted.
	status, _, body := rawRequest(t, addr, "GET /prodapi/v1/desks HTTP/1.1\r\nHost: x\r\n"+pad(64<<10)+"\r\n")
	if status != 200 {
		t.Errorf("64 KiB of headers: %d %s, want 200", status, body)
	}
	// And an ordinary error response is left alone.
	status, header, body := rawRequest(t, addr, "GET /prodapi/v1/nope HTTP/1.1\r\nHost: x\r\n\r\n")
	if status != 404 || header.Get("Date") == "" || !strings.HasPrefix(body, `{"_status":"ERR","_error":{"code":404`) {
		t.Errorf("404: %d %v %s", status, header, body)
	}
}

func TestEnvelopePlainError(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // "" when left alone
	}{
		{"HTTP/1.1 400 Bad Request: malformed Host header" + plainErrorHeaders + "400 Bad Request: malformed Host header",
			`{"_status":"ERR","_error":{"code":400,"message":"Bad Request: malformed Host header"}}`},
		{"HTTP/1.1 400 Bad Request" + plainErrorHeaders + "400 Bad Request",
			`{"_status":"ERR","_error":{"code":400,"message":"Bad Request"}}`},
		{"HTTP/1.1 431 Request Header Fields Too Large" + plainErrorHeaders + "431 Request Header Fields Too Large",
			`{"_status":"ERR","_error":{"code":431,"message":"The request's header fields are too large."}}`},
		{"HTTP/1.1 200 OK" + plainErrorHeaders + "fine", ""},
		{"HTTP/1.1 404 Not Found\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT" + plainErrorHeaders + "x", ""},
		{"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n\r\n{}", ""},
		{"garbage", ""},
	} {
		got, ok := envelopePlainError([]byte(tc.in))
		if !ok {
			if tc.want != "" {
				t.Errorf("%.40q left alone, want rewritten", tc.in)
			}
			continue
		}
		if tc.want == "" {
			t.Errorf("%.40q rewritten: %q", tc.in, got)
			continue
		}
		res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(got))), nil)
		if err != nil {
			t.Fatalf("%q: %v", got, err)
		}
		b, _ := io.ReadAll(res.Body)
		if string(b) != tc.want || res.Header.Get("Content-Type") != "application/json" || !res.Close {
			t.Errorf("%.40q: %v %s, want %s", tc.in, res.Header, b, tc.want)
		}
	}
}
