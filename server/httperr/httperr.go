// Package httperr is how the API answers a failure on the wire: the error
// a handler returns once it has chosen the answer (Error: a status, the
// words the client reads, the cause for the log alone, extra headers),
// and the one writer of the API's error envelope,
//
//	{"_status":"ERR","_error":{"code":N,"message":"..."}}
//
// (Write, and Body for an envelope carried inside another answer, as the
// change stream's close event is), which the server, its change feed and
// the admin listener share. Which status and words an error that is no
// Error gets is the server's (its errorOf, from sources.Classify).
//
// It imports nothing of this module, so that any layer may write the
// envelope (cmd/prodapi's dependency test lets every layer import such a
// leaf); it escapes the message itself, byte for byte as
// sources/codec.AppendJSONString does, which its tests hold it to.
package httperr

import (
	"net/http"
	"strconv"
	"unicode/utf8"
)

// An Error is a failure whose answer is chosen: Status and Msg, safe to
// show the client, are what Write sends; Err, when set, is the cause,
// for the log only.
type Error struct {
	Status int
	Msg    string
	Err    error
	Header http.Header // extra response headers (WWW-Authenticate, Allow, Retry-After)
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

func (e *Error) Unwrap() error { return e.Err }

// HTTPStatus is the status the error is answered with, for
// sources.Classify.
func (e *Error) HTTPStatus() int { return e.Status }

// Write answers e in the error envelope: its headers, then
// Content-Type: application/json, Cache-Control: no-store and the
// Content-Length, without the validators or the coding a handler may
// have set for the answer it meant to give; no body for HEAD.
func Write(w http.ResponseWriter, r *http.Request, e *Error) {
	h := w.Header()
	for k, v := range e.Header {
		h[k] = v
	}
	body := Body(e.Status, e.Msg)
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Del("Content-Encoding")
	h.Del("ETag")
	h.Del("Last-Modified")
	w.WriteHeader(e.Status)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// Body is the error envelope of status and msg.
func Body(status int, msg string) []byte {
	b := make([]byte, 0, 64+len(msg))
	b = append(b, `{"_status":"ERR","_error":{"code":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b = append(b, `,"message":`...)
	b = appendString(b, msg)
	return append(b, "}}"...)
}

// appendString appends s as a JSON string, as
// sources/codec.AppendJSONString does: the quote, the backslash and the
// ASCII controls escaped (\n, \r, \t, \b, \f by name, others as \u00xx),
// invalid UTF-8 replaced by U+FFFD, everything else as it is. (Error
// messages are short: a byte at a time is fast enough.)
func appendString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b = append(b, "\ufffd"...)
			} else {
				b = append(b, s[i:i+n]...)
			}
			i += n
			continue
		}
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			if c < ' ' {
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			} else {
				b = append(b, c)
			}
		}
		i++
	}
	return append(b, '"')
}
