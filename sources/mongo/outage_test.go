package mongo_test

import (
	"context"
	"errors"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
	"github.com/prodapi/prodapi/test/realserver"
	"go.mongodb.org/mongo-driver/v2/event"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// A server that goes away fails a request in whatever way the moment
// allows; none of them is a refused query. These tests stop a server at
// chosen points of a request, holding the request there through the
// driver's event monitors (never by timing), and check what comes out.

// outage is what a request caught by a server going away may fail with.
var outage = []error{sources.ErrUnavailable, sources.ErrTimeout}

func wantOutage(t *testing.T, what string, err error) {
	t.Helper()
	if !slices.ContainsFunc(outage, func(w error) bool { return errors.Is(err, w) }) {
		t.Errorf("%s: %v, want ErrUnavailable or ErrTimeout", what, err)
	}
}

// gate holds the next operation that starts checking out a connection
// until released, and reports when the pool is cleared: the two points
// between which the driver, having chosen a server, finds its pool
// closed because another operation's connection failed.
type gate struct {
	armed   chan struct{} // holds one token while the next checkout is to wait
	held    chan struct{} // closed when that checkout is held
	release chan struct{}
	cleared chan struct{} // receives once per pool clearing, if there is room
}

func newGate() *gate {
	return &gate{armed: make(chan struct{}, 1), held: make(chan struct{}), release: make(chan struct{}),
		cleared: make(chan struct{}, 1)}
}

func (g *gate) event(ev *event.PoolEvent) {
	switch ev.Type {
	case event.ConnectionCheckOutStarted:
		select {
		case <-g.armed:
			close(g.held)
			<-g.release
		default:
		}
	case event.ConnectionPoolCleared:
		select {
		case g.cleared <- struct{}{}:
		default:
		}
	}
}

// TestPoolClearedMidRequest reproduces, step by step, what a server
// stopping does to a request racing it: the request has chosen the
// server, another operation's connection fails (here a ping's, which the
// server drops), the driver clears the pool, and the request's checkout
// then finds it cleared. The driver reports that as a command error with
// no code and the label TransientTransactionError; it used to be taken
// for the server refusing the query (a 400 to the client, and no stale
// answer from the cache).
func TestPoolClearedMidRequest(t *testing.T) {
	t.Parallel()
	srv := mongotest.Start(t, deskSeed(t))
	g := newGate()
	client, err := mongodriver.Connect(mongosrc.ClientOptions(srv.URI(), 4, 0).
		SetPoolMonitor(&event.PoolMonitor{Event: g.event}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		client.Disconnect(ctx)
	})
	store := mongosrc.New(client.Database(mongotest.Database), mongosrc.Options{Queries: metrics.NewMetrics().SourceQueries()})
	if _, err := store.Get(t.Context(), res("desks"), deskOID); err != nil {
		t.Fatal(err)
	}

	g.armed <- struct{}{}
	done := make(chan error, 1)
	go func() {
		_, err := store.Get(t.Context(), res("desks"), deskOID)
		done <- err
	}()
	<-g.held
	srv.Fail(mongotest.Fault{Commands: []string{"ping"}, CloseConnection: true, Times: 1})
	if err := store.Ping(t.Context()); !errors.Is(err, sources.ErrUnavailable) {
		t.Errorf("ping on a dropped connection: %v, want ErrUnavailable", err)
	}
	<-g.cleared
	close(g.release)
	err = <-done
	if !errors.Is(err, sources.ErrUnavailable) {
		t.Errorf("Get whose checkout found the pool cleared: %v, want ErrUnavailable", err)
	}
	checkClean(t, err)
}

// ownFerretDB starts a FerretDB of the test's own, holding one desk in
// the database outageDB, and returns its URI and process.
func ownFerretDB(t *testing.T) (string, *realserver.Process) {
	t.Helper()
	f, p := realserver.StartFerretDB(t)
	client, err := mongodriver.Connect(mongosrc.ClientOptions(f.URI, 1, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Disconnect(context.WithoutCancel(t.Context()))
	if _, err := client.Database(outageDB).Collection("desks").InsertOne(t.Context(), map[string]any{"_id": "sports", "name": "Sports"}); err != nil {
		t.Fatal(err)
	}
	return f.URI, p
}

const outageDB = "prodapi_outage"

// storeOn returns a store on outageDB through a new client made with o:
// a client that has not opened a connection yet.
func storeOn(t *testing.T, o *options.ClientOptions) *mongosrc.Store {
	t.Helper()
	client, err := mongodriver.Connect(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		client.Disconnect(ctx)
	})
	return mongosrc.New(client.Database(outageDB), mongosrc.Options{Queries: metrics.NewMetrics().SourceQueries()})
}

// started returns a command monitor that reports on the channel each
// time the driver sends a command named name.
func started(name string) (*event.CommandMonitor, <-chan struct{}) {
	ch := make(chan struct{}, 16)
	return &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName == name {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}}, ch
}

// getAsync runs a Get of the desk and returns where its error will come.
func getAsync(t *testing.T, store *mongosrc.Store) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := store.Get(t.Context(), res("desks"), "sports")
		done <- err
	}()
	return done
}

// warm makes a first request, so that the monitor knows the server and
// the pool holds a connection, and drains what it reported on ch.
func warm(t *testing.T, store *mongosrc.Store, ch <-chan struct{}) {
	t.Helper()
	if err := <-getAsync(t, store); err != nil {
		t.Fatal(err)
	}
	for len(ch) > 0 {
		<-ch
	}
}

// waitFor waits until the request whose error comes on done reaches the
// point reported on ch; a request that ends first fails the test.
func waitFor(t *testing.T, ch <-chan struct{}, done <-chan error) {
	t.Helper()
	select {
	case <-ch:
	case err := <-done:
		t.Fatalf("the request ended before the point the test waits for: %v", err)
	}
}

// frozenMidFind starts a FerretDB of the test's own and a store on it,
// freezes the server (SIGSTOP) and sends a Get, returning once the
// driver has sent its find: the query is on the wire, the server holds it.
func frozenMidFind(t *testing.T) (*realserver.Process, *mongosrc.Store, <-chan error) {
	t.Helper()
	uri, p := ownFerretDB(t)
	cm, finds := started("find")
	store := storeOn(t, mongosrc.ClientOptions(uri, 4, 0).SetMonitor(cm))
	warm(t, store, finds)
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	done := getAsync(t, store)
	waitFor(t, finds, done)
	return p, store, done
}

// FerretDB killed while it holds a query (frozen with SIGSTOP once the
// driver has sent the find, so the query is on the wire): the connection
// is reset, the retry finds no server.
func TestFerretDBKilledMidQuery(t *testing.T) {
	p, store, done := frozenMidFind(t)
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-done
	wantOutage(t, "Get while the server was killed", err)
	checkClean(t, err)
	<-p.Done()
	wantOutage(t, "Get after it died", <-getAsync(t, store))
}

// FerretDB asked to stop (SIGTERM) while it holds a query: it may still
// answer that query, or drop it; either way, the next request finds it
// gone.
func TestFerretDBStoppedMidQuery(t *testing.T) {
	p, store, done := frozenMidFind(t)
	if err := p.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		wantOutage(t, "Get while the server stopped", err)
	}
	<-p.Done()
	wantOutage(t, "Get after it stopped", <-getAsync(t, store))
}

// FerretDB killed while the driver opens a connection for a request: the
// server is known (the monitor has heard from it), the pool has no
// connection, and the server freezes before answering the new
// connection's handshake.
func TestFerretDBKilledDuringHandshake(t *testing.T) {
	known := make(chan struct{}, 1)
	sm := &event.ServerMonitor{ServerHeartbeatSucceeded: func(*event.ServerHeartbeatSucceededEvent) {
		select {
		case known <- struct{}{}:
		default:
		}
	}}
	created := make(chan struct{}, 16)
	pm := &event.PoolMonitor{Event: func(ev *event.PoolEvent) {
		if ev.Type == event.ConnectionCreated {
			select {
			case created <- struct{}{}:
			default:
			}
		}
	}}
	uri, p := ownFerretDB(t)
	store := storeOn(t, mongosrc.ClientOptions(uri, 4, 0).SetServerMonitor(sm).SetPoolMonitor(pm))
	<-known
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	done := getAsync(t, store)
	waitFor(t, created, done)
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := <-done
	wantOutage(t, "Get while the server was killed during the handshake", err)
	checkClean(t, err)
}
