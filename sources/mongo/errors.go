package mongo

import (
	"context"
	"errors"
	"log/slog"
	"slices"

	"github.com/prodapi/prodapi/sources"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"
)

// An opError is a failed operation as it leaves the package: its message
// names the operation, the collection and the sentinel, never the
// driver's text; errors.Is sees only the sentinel (or the caller's context
// error). The driver's error stays reachable for logs through Detail and
// LogValue.
type opError struct {
	op, coll string
	kind     error // a sources.Err* sentinel, or the caller's ctx.Err()
	cause    error // the driver's error; never in Error()
}

func (e *opError) Error() string {
	return "mongo: " + e.op + " " + e.coll + ": " + e.kind.Error()
}

func (e *opError) Unwrap() error { return e.kind }

// Detail returns the driver's description of the failure, for logs only:
// it may quote the query and the server's addresses.
func (e *opError) Detail() string {
	if e.cause == nil {
		return ""
	}
	return e.cause.Error()
}

// LogValue makes slog show the driver's description beside the message.
func (e *opError) LogValue() slog.Value {
	return slog.GroupValue(slog.String("msg", e.Error()), slog.String("detail", e.Detail()))
}

// wrapErr translates a driver error from operation op on coll. parent is
// the caller's context: when it is done, its error is what the caller
// sees, whatever the driver made of it.
func wrapErr(parent context.Context, op, coll string, err error) error {
	return &opError{op: op, coll: coll, kind: classify(parent, err), cause: err}
}

// Server error codes that say the server cannot serve now, rather than
// that the query is wrong
// (https://github.com/mongodb/mongo/blob/master/src/mongo/base/error_codes.yml).
var unavailableCodes = map[int]bool{
	6: true, 7: true, 13: true, 18: true, 24: true, 46: true, 91: true, 133: true,
	134: true, 189: true, 9001: true, 10107: true, 11600: true, 11601: true,
	11602: true, 13435: true, 13436: true, 462: true,
}

// Server error codes that report a time limit.
var timeoutCodes = map[int]bool{50: true, 89: true, 202: true, 262: true}

// classify maps a driver error to the sentinel callers test for:
//
//   - no document                              ErrNotFound
//   - the caller's context done                its ctx.Err()
//   - no server selectable, pool exhausted,
//     network errors, servers shutting down,
//     stepping down or refusing our credentials  ErrUnavailable
//   - deadlines and server time limits          ErrTimeout
//   - any other command error                   ErrInvalid: the server
//     understood the command and refused it, and the only part of a
//     command that varies is the client's query (a bad $type alias, $near
//     without a geo index)
//   - anything else                             ErrUnavailable
//
// The order matters: server selection and pool waits can end on a
// deadline too, and mean "unreachable", not "slow".
func classify(parent context.Context, err error) error {
	if errors.Is(err, mongodriver.ErrNoDocuments) {
		return sources.ErrNotFound
	}
	if perr := parent.Err(); perr != nil {
		return perr
	}
	if errors.As(err, new(topology.ServerSelectionError)) ||
		errors.As(err, new(topology.WaitQueueTimeoutError)) ||
		errors.Is(err, mongodriver.ErrClientDisconnected) {
		return sources.ErrUnavailable
	}
	var se mongodriver.ServerError
	if errors.As(err, &se) && hasCode(se, timeoutCodes) {
		return sources.ErrTimeout
	}
	if mongodriver.IsTimeout(err) {
		return sources.ErrTimeout
	}
	if mongodriver.IsNetworkError(err) {
		return sources.ErrUnavailable
	}
	if se != nil {
		if se.HasErrorLabel("RetryableError") || se.HasErrorLabel("SystemOverloadedError") {
			return sources.ErrUnavailable
		}
		if hasCode(se, unavailableCodes) {
			return sources.ErrUnavailable
		}
		return sources.ErrInvalid
	}
	return sources.ErrUnavailable
}

func hasCode(se mongodriver.ServerError, codes map[int]bool) bool {
	return slices.ContainsFunc(se.ErrorCodes(), func(c int) bool { return codes[c] })
}
