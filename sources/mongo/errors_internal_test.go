package mongo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"

	"github.com/prodapi/prodapi/sources"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"
)

// TestClassify covers the error mapping case by case, with the errors
// as the driver hands them over: a server's command error becomes a
// mongo.CommandError with its code, code name and labels; a failure on
// the client's side (a dropped connection, a cleared pool) is a
// CommandError with code 0 and the driver's labels.
func TestClassify(t *testing.T) {
	cmdErr := func(code int32, name string, labels ...string) error {
		return mongodriver.CommandError{Code: code, Name: name, Message: "secret-detail", Labels: labels}
	}
	// How the driver reports that a connection pool was cleared after
	// another operation failed: no code, the label
	// TransientTransactionError, and the pool's error underneath.
	poolCleared := mongodriver.CommandError{Labels: []string{"TransientTransactionError"},
		Message: "connection pool for 127.0.0.1:27017 was cleared because another operation failed with: EOF",
		Wrapped: errors.New("connection pool for 127.0.0.1:27017 was cleared")}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()

	for _, tc := range []struct {
		name   string
		parent context.Context // nil: a live context
		err    error
		want   error
	}{
		// The server says the query is wrong.
		{"BadValue", nil, cmdErr(2, "BadValue"), sources.ErrInvalid},
		{"FailedToParse", nil, cmdErr(9, "FailedToParse"), sources.ErrInvalid},
		{"TypeMismatch", nil, cmdErr(14, "TypeMismatch"), sources.ErrInvalid},
		{"Overflow", nil, cmdErr(15, "Overflow"), sources.ErrInvalid},
		{"IndexNotFound", nil, cmdErr(27, "IndexNotFound"), sources.ErrInvalid},
		{"InvalidOptions", nil, cmdErr(72, "InvalidOptions"), sources.ErrInvalid},
		{"InvalidPipelineOperator", nil, cmdErr(168, "InvalidPipelineOperator"), sources.ErrInvalid},
		{"QueryFeatureNotAllowed", nil, cmdErr(224, "QueryFeatureNotAllowed"), sources.ErrInvalid},
		{"NotImplemented", nil, cmdErr(238, "NotImplemented"), sources.ErrInvalid},
		{"ConversionFailure", nil, cmdErr(241, "ConversionFailure"), sources.ErrInvalid},
		{"NoQueryExecutionPlans", nil, cmdErr(291, "NoQueryExecutionPlans"), sources.ErrInvalid},
		{"QueryExceededMemoryLimitNoDiskUseAllowed", nil, cmdErr(292, "QueryExceededMemoryLimitNoDiskUseAllowed"), sources.ErrInvalid},
		{"bad regular expression", nil, cmdErr(51091, "Location51091"), sources.ErrInvalid},
		{"bad sort order", nil, cmdErr(15975, "Location15975"), sources.ErrInvalid},

		// A refusal's code with a label that says "try again" is not one.
		{"BadValue, NetworkError", nil, cmdErr(2, "BadValue", "NetworkError"), sources.ErrUnavailable},
		{"BadValue, RetryableError", nil, cmdErr(2, "BadValue", "RetryableError"), sources.ErrUnavailable},
		{"BadValue, SystemOverloadedError", nil, cmdErr(2, "BadValue", "SystemOverloadedError"), sources.ErrUnavailable},
		{"Location code, TransientTransactionError", nil, cmdErr(51091, "Location51091", "TransientTransactionError"), sources.ErrUnavailable},
		// A code in the assertions' range without their code name.
		{"code 51091 named otherwise", nil, cmdErr(51091, "SomethingNew"), sources.ErrUnavailable},

		// A server going away, stepping down, overloaded, or failing.
		{"ShutdownInProgress", nil, cmdErr(91, "ShutdownInProgress"), sources.ErrUnavailable},
		{"InterruptedAtShutdown", nil, cmdErr(11600, "InterruptedAtShutdown"), sources.ErrUnavailable},
		{"Interrupted", nil, cmdErr(11601, "Interrupted"), sources.ErrUnavailable},
		{"InterruptedDueToReplStateChange", nil, cmdErr(11602, "InterruptedDueToReplStateChange"), sources.ErrUnavailable},
		{"NotWritablePrimary", nil, cmdErr(10107, "NotWritablePrimary"), sources.ErrUnavailable},
		{"NotPrimaryNoSecondaryOk", nil, cmdErr(13435, "NotPrimaryNoSecondaryOk"), sources.ErrUnavailable},
		{"NotPrimaryOrSecondary", nil, cmdErr(13436, "NotPrimaryOrSecondary"), sources.ErrUnavailable},
		{"PrimarySteppedDown", nil, cmdErr(189, "PrimarySteppedDown"), sources.ErrUnavailable},
		{"HostUnreachable", nil, cmdErr(6, "HostUnreachable"), sources.ErrUnavailable},
		{"HostNotFound", nil, cmdErr(7, "HostNotFound"), sources.ErrUnavailable},
		{"SocketException", nil, cmdErr(9001, "SocketException"), sources.ErrUnavailable},
		{"FailedToSatisfyReadPreference", nil, cmdErr(133, "FailedToSatisfyReadPreference"), sources.ErrUnavailable},
		{"IngressRequestRateLimitExceeded", nil, cmdErr(462, "IngressRequestRateLimitExceeded", "SystemOverloadedError", "RetryableError"), sources.ErrUnavailable},
		{"Unauthorized", nil, cmdErr(13, "Unauthorized"), sources.ErrUnavailable},
		{"AuthenticationFailed", nil, cmdErr(18, "AuthenticationFailed"), sources.ErrUnavailable},
		{"InternalError", nil, cmdErr(1, "InternalError"), sources.ErrUnavailable},
		{"CommandNotFound", nil, cmdErr(59, "CommandNotFound"), sources.ErrUnavailable},
		{"a code nobody lists", nil, cmdErr(99999, "FutureOutage"), sources.ErrUnavailable},

		// Failures on the client's side of the wire.
		{"connection pool cleared", nil, poolCleared, sources.ErrUnavailable},
		{"network error", nil, cmdErr(0, "", "NetworkError"), sources.ErrUnavailable},
		{"network error, retryable, overloaded", nil, cmdErr(0, "", "SystemOverloadedError", "RetryableError", "NetworkError"), sources.ErrUnavailable},
		{"code-less command error", nil, cmdErr(0, ""), sources.ErrUnavailable},
		{"reset mid-reply", nil, fmt.Errorf("incomplete read of message header: %w", io.ErrUnexpectedEOF), sources.ErrUnavailable},
		{"no server selectable", nil, topology.ServerSelectionError{Wrapped: errors.New("connection refused")}, sources.ErrUnavailable},
		{"no server selectable by the deadline", nil, topology.ServerSelectionError{Wrapped: context.DeadlineExceeded}, sources.ErrUnavailable},
		{"pool exhausted", nil, topology.WaitQueueTimeoutError{Wrapped: context.DeadlineExceeded}, sources.ErrUnavailable},
		{"client disconnected", nil, mongodriver.ErrClientDisconnected, sources.ErrUnavailable},

		// Time limits.
		{"MaxTimeMSExpired", nil, cmdErr(50, "MaxTimeMSExpired"), sources.ErrTimeout},
		{"NetworkTimeout", nil, cmdErr(89, "NetworkTimeout"), sources.ErrTimeout},
		{"NetworkInterfaceExceededTimeLimit", nil, cmdErr(202, "NetworkInterfaceExceededTimeLimit"), sources.ErrTimeout},
		{"ExceededTimeLimit", nil, cmdErr(262, "ExceededTimeLimit"), sources.ErrTimeout},
		{"our deadline", nil, mongodriver.CommandError{Labels: []string{"NetworkError"}, Wrapped: context.DeadlineExceeded}, sources.ErrTimeout},
		{"a socket deadline", nil, &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, sources.ErrTimeout},

		// Not failures of the backend.
		{"no document", nil, mongodriver.ErrNoDocuments, sources.ErrNotFound},
		{"the caller cancelled", cancelled, cmdErr(0, "", "NetworkError"), context.Canceled},
		{"the caller's deadline", expired, cmdErr(2, "BadValue"), context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := tc.parent
			if parent == nil {
				parent = context.Background()
			}
			if got := classify(parent, tc.err); got != tc.want {
				t.Errorf("classify(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
