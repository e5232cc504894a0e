package server

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"

	"github.com/prodapi/prodapi/server/httperr"
)

// MaxHeaderBytes is the most a request's header (request line included)
// may take: 64 KiB, plus the 4 KiB net/http always allowed on top of its
// MaxHeaderBytes, so the limit is the one the service always had. Larger
// headers are refused with 431 in the error envelope (limitHeaders).
//
// The http.Server must read more than this for the handler to see such a
// request: set its MaxHeaderBytes to NetHTTPMaxHeaderBytes. Past that,
// net/http answers 431 itself, in plain text, which the connections of
// Listener rewrite.
const (
	MaxHeaderBytes        = 64<<10 + 4096
	NetHTTPMaxHeaderBytes = 256 << 10
)

const msgHeadersTooLarge = "The request's header fields are too large."

// headerBytes is the size of r's header as it came on the wire: the
// request line and every field line.
func headerBytes(r *http.Request) int {
	n := len(r.Method) + 1 + len(r.RequestURI) + 1 + len(r.Proto) + 2
	n += len("Host: ") + len(r.Host) + 2
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + 2 + len(v) + 2
		}
	}
	return n + 2
}

// limitHeaders refuses headers over MaxHeaderBytes with 431, before
// routing, auth or any backend call.
func (s *Server) limitHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if headerBytes(r) > MaxHeaderBytes {
			s.writeError(w, r, &httperr.Error{Status: http.StatusRequestHeaderFieldsTooLarge, Msg: msgHeadersTooLarge})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// net/http gives no hook for the errors it answers before any handler
// runs: (*conn).serve writes them with one fmt.Fprintf on the connection
// when readRequest fails. So the connection recognises them by their
// exact shape: a status line of 4xx or 5xx followed at once by
// "Content-Type: text/plain; charset=utf-8" and "Connection: close", with
// no Date header. A handler's response always carries Date, so it never
// matches; if a later Go changes the shape, the plain text simply goes
// through as before.
const plainErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// envelopePlainError rewrites one of net/http's own plain-text error
// responses; ok is false for anything else.
func envelopePlainError(p []byte) (_ []byte, ok bool) {
	const proto = "HTTP/1.1 "
	if len(p) > 1024 || !bytes.HasPrefix(p, []byte(proto)) || len(p) < len(proto)+3 || (p[len(proto)] != '4' && p[len(proto)] != '5') {
		return nil, false
	}
	i := bytes.Index(p, []byte(plainErrorHeaders))
	if i < 0 || bytes.Contains(p[:i], []byte("\r\n")) {
		return nil, false
	}
	status, err := strconv.Atoi(string(p[len(proto) : len(proto)+3]))
	if err != nil || status < 400 || status > 599 {
		return nil, false
	}
	// The body repeats the status: "400 Bad Request: malformed Host header".
	msg := strings.TrimSpace(strings.TrimPrefix(string(p[i+len(plainErrorHeaders):]), strconv.Itoa(status)))
	if status == http.StatusRequestHeaderFieldsTooLarge {
		msg = msgHeadersTooLarge
	}
	body := httperr.Body(status, msg)
	b := make([]byte, 0, 160+len(body))
	b = append(b, proto...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, ' ')
	b = append(b, http.StatusText(status)...)
	b = append(b, "\r\nContent-Type: application/json\r\nCache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nConnection: close\r\nContent-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	return append(b, body...), true
}
