package mongo

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"

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

// Server error codes with which a server says that the query itself is
// wrong: it understood the command and will refuse it however often it is
// asked, so the client must change it
// (https://github.com/mongodb/mongo/blob/master/src/mongo/base/error_codes.yml).
// It is an allow-list: any other code (a server shutting down, stepping
// down, overloaded, refusing our credentials, or one this list does not
// know) means the service cannot read now, which the server answers
// with 503 and the cache with a stale entry.
var refusalCodes = map[int32]bool{
	2:   true, // BadValue: an unknown operator or $type alias, $in without an array
	9:   true, // FailedToParse
	14:  true, // TypeMismatch
	15:  true, // Overflow
	27:  true, // IndexNotFound: $text without a text index
	72:  true, // InvalidOptions
	168: true, // InvalidPipelineOperator, in the count's $match
	224: true, // QueryFeatureNotAllowed
	238: true, // NotImplemented: an operator FerretDB does not have
	241: true, // ConversionFailure
	291: true, // NoQueryExecutionPlans: $near without a geo index
	292: true, // QueryExceededMemoryLimitNoDiskUseAllowed: a sort too large for memory and no index
}

// Server error codes that report a time limit.
var timeoutCodes = map[int]bool{50: true, 89: true, 202: true, 262: true}

// Error labels with which the server or the driver say that the same
// command may work if tried again: whatever the code, not a refusal.
var transientLabels = []string{"NetworkError", "RetryableError", "SystemOverloadedError",
	"TransientTransactionError", "RetryableWriteError", "ResumableChangeStreamError"}

// classify maps a driver error to the sentinel callers test for:
//
//   - no document                              ErrNotFound
//   - the caller's context done                its ctx.Err()
//   - no server selectable, pool exhausted     ErrUnavailable
//   - deadlines and server time limits          ErrTimeout
//   - the server refused the query: a code of
//     refusalCodes, or an assertion's code
//     (codeName "Location<code>", which is how
//     a server reports a bad regular expression
//     or sort order), without a transient label  ErrInvalid
//   - anything else                             ErrUnavailable: network
//     errors, a server shutting down or stepping down, a connection pool
//     cleared after another operation failed (a code-less error carrying
//     TransientTransactionError), credentials refused, unknown codes
//
// The order matters: server selection and pool waits can end on a
// deadline too, and mean "unreachable", not "slow". Refusals are listed
// rather than outages because a server going away fails in more ways
// than anyone lists, and each of them must not tell the client its query
// is wrong.
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
	if errors.As(err, &se) && hasCode(se, timeoutCodes) || mongodriver.IsTimeout(err) {
		return sources.ErrTimeout
	}
	if refused(err) {
		return sources.ErrInvalid
	}
	return sources.ErrUnavailable
}

func hasCode(se mongodriver.ServerError, codes map[int]bool) bool {
	return slices.ContainsFunc(se.ErrorCodes(), func(c int) bool { return codes[c] })
}

// refused reports whether err is a server's answer that the query is
// wrong.
func refused(err error) bool {
	ce, ok := errors.AsType[mongodriver.CommandError](err)
	if !ok || ce.Code == 0 || slices.ContainsFunc(transientLabels, ce.HasErrorLabel) {
		return false
	}
	return refusalCodes[ce.Code] || ce.Name == "Location"+strconv.Itoa(int(ce.Code))
}
