package elastic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/prodapi/prodapi/sources"
)

// An Error is a request Elasticsearch did not answer usefully. Its Kind is
// the sources sentinel the server maps to a status (ErrInvalid: 400,
// ErrUnavailable and ErrPartial: 503, ErrTimeout: 504); errors.Is sees it.
//
// The message is for the log only: it names the index and carries what
// Elasticsearch said (error type and reason, truncated) or the transport's
// complaint. The server never shows an error's text to a client; it
// answers with its own words chosen by Kind, and hands the error to the
// access log, which logs it once.
type Error struct {
	Op     string // "search" (Find), "lookup" or "ping"
	Index  string // "superdesk_archive"; empty for ping
	Status int    // Elasticsearch's HTTP status; 0 when no response came
	Type   string // Elasticsearch's error type: "search_phase_execution_exception"
	Reason string // what Elasticsearch or the transport said, for logs
	Kind   error  // sources.ErrInvalid, ErrUnavailable, ErrTimeout or ErrPartial
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("elastic: ")
	b.WriteString(e.Op)
	if e.Index != "" {
		b.WriteString(" ")
		b.WriteString(e.Index)
	}
	b.WriteString(": ")
	if e.Status != 0 {
		fmt.Fprintf(&b, "status %d: ", e.Status)
	}
	if e.Type != "" {
		b.WriteString(e.Type)
		b.WriteString(": ")
	}
	if e.Reason != "" {
		b.WriteString(e.Reason)
		b.WriteString(": ")
	}
	b.WriteString(e.Kind.Error())
	return b.String()
}

// Unwrap returns the sentinel.
func (e *Error) Unwrap() error { return e.Kind }

// maxReason bounds the Elasticsearch text an Error keeps: reasons can echo
// long queries and stack traces, and a log line should stay a line.
const maxReason = 512

func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= maxReason {
		return s
	}
	cut := maxReason
	for cut > 0 && s[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}

// statusKind decides what an error status from Elasticsearch means for
// the client. errType is Elasticsearch's error type, when it sent one.
func statusKind(status int, errType string) error {
	switch {
	case errType == "media_type_header_exception":
		// Elasticsearch refused our Accept/Content-Type (a client in
		// compatibility mode against 7.x): our configuration, not the
		// client's query.
		return sources.ErrUnavailable
	case status == http.StatusBadRequest, status == http.StatusRequestEntityTooLarge:
		return sources.ErrInvalid
	case status == http.StatusRequestTimeout, status == http.StatusGatewayTimeout:
		return sources.ErrTimeout
	default:
		// 429 (rejected execution, circuit breakers), 5xx, and statuses
		// that mean we are misconfigured (401, 403, a 404 from a proxy):
		// nothing the client can fix; try again later.
		return sources.ErrUnavailable
	}
}

// transportError translates a failure to get or read a response. parent
// is the caller's context, own the one bounded by the store's timeout: the
// caller's cancellation is returned as is; a deadline, ours or the
// caller's, is a timeout; anything else (connection refused, DNS, reset,
// TLS, the client's product check) means unavailable.
func transportError(parent, own context.Context, op, index string, err error) error {
	if errors.Is(parent.Err(), context.Canceled) {
		return fmt.Errorf("elastic: %s %s: %w", op, index, parent.Err())
	}
	e := &Error{Op: op, Index: index, Reason: clip(err.Error()), Kind: sources.ErrUnavailable}
	if parent.Err() != nil || own.Err() != nil || isTimeout(err) {
		e.Kind = sources.ErrTimeout
	}
	return e
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}
