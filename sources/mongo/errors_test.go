package mongo_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
)

// leaks lists text that must never appear in an error message: driver
// and server wording, addresses, the fake's error messages.
var leaks = []string{"127.0.0.1", "server selection", "connection", "BadValue", "secret-detail",
	"topology", "socket", "EOF", "(", "errmsg", "codeName"}

func checkClean(t *testing.T, err error) {
	t.Helper()
	if err == nil {
		return // nothing to leak (the caller judges a nil it did not want)
	}
	for _, l := range leaks {
		if strings.Contains(err.Error(), l) {
			t.Errorf("error %q contains %q", err, l)
		}
	}
}

// detail is how logs reach the driver's description of a failure.
type detail interface{ Detail() string }

func TestUnreachable(t *testing.T) {
	t.Parallel()
	srv := mongotest.Start(t, deskSeed(t))
	srv.Stop()
	// The client is created with the server down: New and Connect do not
	// dial.
	// The operation may take an hour and the caller sets no deadline: only
	// server selection, which ClientOptions caps at 2 s, can end the Get
	// before the test's own deadline. A stopwatch would only say how busy
	// the machine is.
	e := connect(t, srv, mongosrc.Options{Timeout: time.Hour})
	_, err := e.store.Get(t.Context(), res("desks"), deskOID)
	if !errors.Is(err, sources.ErrUnavailable) {
		t.Fatalf("Get with the server down: %v, want ErrUnavailable", err)
	}
	checkClean(t, err)
	if d, ok := err.(detail); !ok || d.Detail() == "" {
		t.Errorf("error %v carries no detail for the logs", err)
	}
	if err := e.store.Ping(t.Context()); !errors.Is(err, sources.ErrUnavailable) {
		t.Errorf("Ping with the server down: %v, want ErrUnavailable", err)
	}

	// The driver reconnects by itself once the server is back.
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		_, err := e.store.Get(ctx, res("desks"), deskOID)
		if err == nil {
			break
		}
		if !errors.Is(err, sources.ErrUnavailable) || ctx.Err() != nil {
			t.Fatalf("after restart: %v", err)
		}
	}
}

func TestServerGoesAway(t *testing.T) {
	t.Parallel()
	e := newEnv(t, deskSeed(t), mongosrc.Options{})
	if _, err := e.store.Get(t.Context(), res("desks"), deskOID); err != nil {
		t.Fatal(err)
	}
	e.srv.Stop()
	_, err := e.store.Get(t.Context(), res("desks"), deskOID)
	if !errors.Is(err, sources.ErrUnavailable) {
		t.Errorf("Get after the server stopped: %v, want ErrUnavailable", err)
	}
	checkClean(t, err)
}

func TestSlowServer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, deskSeed(t), mongosrc.Options{Timeout: 300 * time.Millisecond})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	e.srv.Fail(mongotest.Fault{Commands: []string{"find"}, Hang: release})
	// The caller sets no deadline and the server never answers: only
	// Options.Timeout can end the Get, as ErrTimeout (a caller's deadline
	// would come back as context.DeadlineExceeded).
	_, err := e.store.Get(t.Context(), res("desks"), deskOID)
	if !errors.Is(err, sources.ErrTimeout) {
		t.Fatalf("Get from a hanging server: %v, want ErrTimeout", err)
	}
	checkClean(t, err)
}

func TestCallerCancels(t *testing.T) {
	e := newEnv(t, deskSeed(t), mongosrc.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := e.store.Get(ctx, res("desks"), deskOID)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a cancelled context: %v, want context.Canceled", err)
	}

	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	e.srv.Fail(mongotest.Fault{Commands: []string{"find"}, Hang: release})
	ctx, cancel = context.WithCancel(t.Context())
	done := make(chan error)
	go func() {
		_, err := e.store.Find(ctx, listQuery(t, "desks", "", nil, 1, 25))
		done <- err
	}()
	if err := e.srv.WaitCommand(t.Context(), "find"); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Find cancelled mid-query: %v, want context.Canceled", err)
	}
}

func TestCommandErrors(t *testing.T) {
	t.Parallel()
	// A retryable failure that never stops is retried until the
	// deadline, so where that deadline falls (between attempts, or in
	// one) decides between ErrUnavailable and ErrTimeout: both are right.
	eitherUnavailable := []error{sources.ErrUnavailable, sources.ErrTimeout}
	for _, tc := range []struct {
		name   string
		fault  mongotest.Fault
		want   []error
		detail string
	}{
		{"bad value", mongotest.Fault{Code: 2, CodeName: "BadValue", Message: "unknown type name alias: secret-detail"},
			[]error{sources.ErrInvalid}, "secret-detail"},
		{"no query plan", mongotest.Fault{Code: 291, CodeName: "NoQueryExecutionPlans", Message: "unable to find index for $geoNear query"},
			[]error{sources.ErrInvalid}, "geoNear"},
		{"time limit", mongotest.Fault{Code: 50, CodeName: "MaxTimeMSExpired", Message: "operation exceeded time limit"},
			[]error{sources.ErrTimeout}, "time limit"},
		{"shutting down", mongotest.Fault{Code: 11600, CodeName: "InterruptedAtShutdown", Message: "interrupted at shutdown"},
			eitherUnavailable, ""},
		{"unauthorized", mongotest.Fault{Code: 13, CodeName: "Unauthorized", Message: "not authorized on superdesk"},
			[]error{sources.ErrUnavailable}, "authorized"},
		{"overloaded", mongotest.Fault{Code: 462, CodeName: "IngressRequestRateLimitExceeded", Message: "rate limited", Labels: []string{"SystemOverloadedError", "RetryableError"}},
			eitherUnavailable, ""},
		{"failed to parse", mongotest.Fault{Code: 9, CodeName: "FailedToParse", Message: "Expected a non-negative number in: $bitsAllSet: -1"},
			[]error{sources.ErrInvalid}, "non-negative"},
		{"type mismatch", mongotest.Fault{Code: 14, CodeName: "TypeMismatch", Message: "$size needs a number"},
			[]error{sources.ErrInvalid}, "needs a number"},
		{"invalid options", mongotest.Fault{Code: 72, CodeName: "InvalidOptions", Message: "bad option"},
			[]error{sources.ErrInvalid}, "bad option"},
		{"bad regular expression", mongotest.Fault{Code: 51091, CodeName: "Location51091", Message: "Regular expression is invalid"},
			[]error{sources.ErrInvalid}, "Regular expression"},
		{"not implemented", mongotest.Fault{Code: 238, CodeName: "NotImplemented", Message: "$geoWithin is not implemented"},
			[]error{sources.ErrInvalid}, "not implemented"},
		{"shutdown in progress", mongotest.Fault{Code: 91, CodeName: "ShutdownInProgress", Message: "The server is in quiesce mode and will shut down"},
			eitherUnavailable, ""},
		{"not writable primary", mongotest.Fault{Code: 10107, CodeName: "NotWritablePrimary", Message: "not primary"},
			eitherUnavailable, ""},
		{"not primary, no secondaryOk", mongotest.Fault{Code: 13435, CodeName: "NotPrimaryNoSecondaryOk", Message: "not primary and secondaryOk=false"},
			eitherUnavailable, ""},
		{"primary stepped down", mongotest.Fault{Code: 189, CodeName: "PrimarySteppedDown", Message: "stepped down"},
			eitherUnavailable, ""},
		{"host unreachable", mongotest.Fault{Code: 6, CodeName: "HostUnreachable", Message: "host unreachable"},
			eitherUnavailable, ""},
		{"internal error", mongotest.Fault{Code: 1, CodeName: "InternalError", Message: "the storage backend failed"},
			[]error{sources.ErrUnavailable}, "storage backend"},
		{"no code", mongotest.Fault{Message: "something failed", Labels: []string{"TransientTransactionError"}},
			[]error{sources.ErrUnavailable}, "something failed"},
		{"dropped connection", mongotest.Fault{CloseConnection: true}, eitherUnavailable, ""},
		{"truncated reply", mongotest.Fault{Truncate: true}, eitherUnavailable, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// With a deadline the driver retries retryable failures until
			// it passes; a short one keeps the test quick.
			e := newEnv(t, userSeed(t), mongosrc.Options{Timeout: 300 * time.Millisecond})
			tc.fault.Commands = []string{"find", "aggregate"}
			e.srv.Fail(tc.fault)
			for _, call := range []struct {
				name string
				fn   func() error
			}{
				{"get", func() error { _, err := e.store.Get(t.Context(), res("users"), userOneID); return err }},
				{"find", func() error {
					_, err := e.store.Find(t.Context(), listQuery(t, "users", "", nil, 1, 25))
					return err
				}},
				{"lookup", func() error {
					_, err := e.store.Lookup(t.Context(), sources.Lookup{Collection: "users", Field: "username", Values: []any{"x"}})
					return err
				}},
			} {
				err := call.fn()
				if !slices.ContainsFunc(tc.want, func(w error) bool { return errors.Is(err, w) }) {
					t.Errorf("%s: %v, want one of %v", call.name, err, tc.want)
					continue
				}
				checkClean(t, err)
				if d, ok := err.(detail); !ok || !strings.Contains(d.Detail(), tc.detail) {
					t.Errorf("%s: detail does not mention %q: %v", call.name, tc.detail, err)
				}
			}
			// Each of the three calls failed once, counted under its kind.
			var failures uint64
			for _, kind := range metrics.ErrorKinds {
				n := e.queries.Errors("mongo", "users", kind)
				failures += n
				if n > 0 && !slices.ContainsFunc(tc.want, func(w error) bool { return sources.FailureKind(w) == kind }) {
					t.Errorf("%d failures counted as %s, want %v", n, kind, tc.want)
				}
			}
			if failures != 3 {
				t.Errorf("counted %d failures, want 3", failures)
			}
		})
	}
}

// TestCountFails checks that a failing count fails the list.
func TestCountFails(t *testing.T) {
	t.Parallel()
	e := newEnv(t, userSeed(t), mongosrc.Options{Timeout: 300 * time.Millisecond})
	e.srv.Fail(mongotest.Fault{Commands: []string{"aggregate"}, Code: 11600, CodeName: "InterruptedAtShutdown"})
	_, err := e.store.Find(t.Context(), listQuery(t, "users", "", nil, 1, 2))
	if !errors.Is(err, sources.ErrUnavailable) && !errors.Is(err, sources.ErrTimeout) {
		t.Errorf("Find with a failing count: %v, want ErrUnavailable or ErrTimeout", err)
	}
}

// TestRetryableRead checks that a dropped connection is retried, as
// retryable reads promise (under a deadline the driver retries until it
// passes; here the second attempt succeeds).
func TestRetryableRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, deskSeed(t), mongosrc.Options{})
	e.srv.Fail(mongotest.Fault{Commands: []string{"find"}, CloseConnection: true, Times: 1})
	if _, err := e.store.Get(t.Context(), res("desks"), deskOID); err != nil {
		t.Errorf("Get after one dropped connection: %v", err)
	}
	if n := len(e.srv.Named("find")); n != 2 {
		t.Errorf("finds = %d, want 2 (one retry)", n)
	}
}

// TestAssetFailsMidStream checks that a failure after the first bytes
// surfaces from Read, so the server can abort the response.
func TestAssetFailsMidStream(t *testing.T) {
	t.Parallel()
	e := assetEnv(t, photo(t))
	a, err := e.store.Asset(t.Context(), deskOID)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Content.Close()
	e.srv.Fail(mongotest.Fault{Commands: []string{"getMore"}, Code: 11600, CodeName: "InterruptedAtShutdown"})
	n, err := io.Copy(io.Discard, a.Content)
	if !errors.Is(err, sources.ErrUnavailable) {
		t.Errorf("reading through a failing getMore: %v, want ErrUnavailable", err)
	}
	if n != 40 {
		t.Errorf("read %d bytes before the failure, want 40 (the first batch)", n)
	}
}
