package sources

import (
	"context"
	"errors"
)

// A Kind is what kind of failure an error is, as Classify decides it:
// the one table from the errors the service produces to what they mean
// for a client (an HTTP status) and for the backend error counter (a
// label). The server's error answers, the cache's Cache-Status
// fwd-status, the adapters' error counter (FailureKind) and readiness's
// probe states all ask Classify.
type Kind uint8

// The kinds, in the order Kinds lists them.
const (
	KindNone        Kind = iota // no failure: a nil error
	KindRefused                 // a request refused with a status of its own (an error with an HTTPStatus method)
	KindNotFound                // ErrNotFound: no such document (404)
	KindExpired                 // ErrExpired: a resume token older than the log keeps (410)
	KindCursor                  // ErrCursor: a cursor walk that cannot continue (400)
	KindInvalid                 // ErrInvalid: the backend refused the query (400)
	KindTimeout                 // ErrTimeout, context.DeadlineExceeded: no answer in time (504)
	KindUnavailable             // ErrUnavailable, ErrPartial: the backend cannot answer now (503)
	KindCanceled                // context.Canceled: the client went away (499, nginx's "client closed request")
	KindInternal                // anything else: a defect, a document that does not decode... (500)
	numKinds
)

// kinds is what each kind means: its name, the status it is answered
// with (a KindRefused error's own status wins), and its label in the
// backend error counter, "" where it is no failure of the backend.
var kinds = [numKinds]struct {
	name    string
	status  int
	failure string
}{
	KindNone:        {"none", 200, ""},
	KindRefused:     {"refused", 400, "invalid"},
	KindNotFound:    {"not_found", 404, ""},
	KindExpired:     {"expired", 410, "other"},
	KindCursor:      {"cursor", 400, "invalid"},
	KindInvalid:     {"invalid", 400, "invalid"},
	KindTimeout:     {"timeout", 504, "timeout"},
	KindUnavailable: {"unavailable", 503, "unavailable"},
	KindCanceled:    {"canceled", 499, ""},
	KindInternal:    {"internal", 500, "other"},
}

// codes maps the errors callers test for to their kinds, in the order
// Classify tries them: the first an error wraps decides (ErrCursor, an
// ErrInvalid, comes before it).
var codes = [...]struct {
	err  error
	kind Kind
}{
	{ErrNotFound, KindNotFound},
	{ErrExpired, KindExpired},
	{ErrCursor, KindCursor},
	{ErrInvalid, KindInvalid},
	{ErrTimeout, KindTimeout},
	{context.DeadlineExceeded, KindTimeout},
	{ErrUnavailable, KindUnavailable},
	{ErrPartial, KindUnavailable},
	{context.Canceled, KindCanceled},
}

// Classify returns the kind of err and the HTTP status it stands for. An
// error that states its own status (an HTTPStatus() int method: the
// server's answers, server/query's refusals) is KindRefused with that
// status, whatever it wraps; any other is the kind of the first error of
// the table it wraps, or KindInternal (500). A nil err is KindNone (200).
func Classify(err error) (Kind, int) {
	if err == nil {
		return KindNone, kinds[KindNone].status
	}
	if se, ok := errors.AsType[interface {
		error
		HTTPStatus() int
	}](err); ok {
		return KindRefused, se.HTTPStatus()
	}
	for _, c := range codes {
		if errors.Is(err, c.err) {
			return c.kind, kinds[c.kind].status
		}
	}
	return KindInternal, kinds[KindInternal].status
}

// Kinds lists every kind.
func Kinds() []Kind {
	ks := make([]Kind, numKinds)
	for i := range ks {
		ks[i] = Kind(i)
	}
	return ks
}

// String is the kind's name: "not_found", "timeout"...
func (k Kind) String() string {
	if k >= numKinds {
		return "unknown"
	}
	return kinds[k].name
}

// FailureKind names what kind of backend failure err is, as the backend
// error counter labels it (Classify's table): "unavailable"
// (ErrUnavailable, ErrPartial), "timeout" (ErrTimeout, a deadline
// passed), "invalid" (ErrInvalid, ErrCursor) or "other". It is "" when
// err is no failure of the backend: nil, ErrNotFound (an answer), or the
// caller's cancellation.
func FailureKind(err error) string {
	kind, _ := Classify(err)
	return kinds[kind].failure
}
