package elastic

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
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
// the client. Only a 400 that is Elasticsearch's verdict on the query
// (every error it names is a queryErrors type) and a 413 are the
// client's; a 400 of any other kind (index_closed_exception, a proxy's
// page, task_cancelled_exception from a node going away, an error type
// this package does not know) is not, and neither is any other status.
func statusKind(status int, e esError) error {
	switch {
	case status == http.StatusBadRequest && e.queryError():
		return sources.ErrInvalid
	case status == http.StatusRequestEntityTooLarge:
		return sources.ErrInvalid
	case status == http.StatusRequestTimeout, status == http.StatusGatewayTimeout:
		return sources.ErrTimeout
	default:
		// 429 (rejected execution, circuit breakers), 5xx, other 400s
		// (media_type_header_exception: Elasticsearch refused our
		// Accept/Content-Type, our configuration), and statuses that mean
		// we are misconfigured (401, 403, a 404 from a proxy): nothing
		// the client can fix; try again later.
		return sources.ErrUnavailable
	}
}

// queryErrors are the error types with which Elasticsearch (7.10 to 8.x)
// says that a search body is wrong. The list allows rather than denies:
// a node that is going away fails in more ways than anyone lists, and
// none of them may tell the client its query is wrong.
var queryErrors = map[string]bool{
	"parsing_exception":                   true, // an unknown query type, a field in the wrong place
	"x_content_parse_exception":           true, // a value of the wrong shape
	"json_parse_exception":                true, // a body that is not JSON
	"query_shard_exception":               true, // wildcard on a number, a bad regexp, query_string syntax
	"parse_exception":                     true, // a date that does not parse
	"number_format_exception":             true, // a number that does not parse
	"illegal_argument_exception":          true, // a sort on a text field, an unknown time zone, the result window
	"action_request_validation_exception": true, // a request that fails validation
}

// queryError reports whether every error the answer names, at the top
// (search_phase_execution_exception only wraps the shards' failures), in
// its root causes and in its shard failures, is an error of the query.
func (e esError) queryError() bool {
	return len(e.kinds) > 0 && !slices.ContainsFunc(e.kinds, func(k string) bool { return !queryErrors[k] })
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
