package feed_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/prodapi/prodapi/cache/feed"
	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
	"github.com/prodapi/prodapi/test/realserver"
	"github.com/prodapi/prodapi/test/testkit"
)

// recorder is an Applier that keeps what it was given.
type recorder struct {
	mu      sync.Mutex
	changes []sources.Change
}

func (r *recorder) Apply(_ context.Context, cs []sources.Change) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.changes = append(r.changes, cs...)
	return nil
}

func (r *recorder) has(op, coll, id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.changes {
		if c.Op == op && c.Collection == coll && c.ID == id {
			return true
		}
	}
	return false
}

// replica is one prodapi's feed: its own Mongo and Redis clients, its
// cache as the coordinator, a recorder as the applier.
type replica struct {
	f      *feed.Feed
	rec    *recorder
	cancel context.CancelFunc
	done   chan error
}

func startReplica(t *testing.T, srv *mongotest.Server, redisURL string, m *metrics.Metrics) *replica {
	t.Helper()
	return startReplicaLog(t, srv, redisURL, m, nil)
}

// storeAndTier connects a store to srv and a Redis tier to redisURL,
// both closed at the test's end: what a replica's feed runs on.
func storeAndTier(t *testing.T, srv *mongotest.Server, redisURL string) (*mongosrc.Store, *redistier.Tier) {
	t.Helper()
	client, err := mongodriver.Connect(mongosrc.ClientOptions(srv.URI(), 4, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Disconnect(context.Background()) })
	store := mongosrc.New(client.Database(mongosrc.DatabaseName(srv.URI())), mongosrc.Options{})
	rdb, err := redistier.NewClient(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	shared := redistier.New(rdb, redistier.Options{Timeout: time.Second})
	t.Cleanup(func() { shared.Close(context.Background()) })
	return store, shared
}

// startReplicaLog is startReplica with a change log.
func startReplicaLog(t *testing.T, srv *mongotest.Server, redisURL string, m *metrics.Metrics, log feed.Log) *replica {
	t.Helper()
	store, shared := storeAndTier(t, srv, redisURL)
	r := &replica{rec: &recorder{}, done: make(chan error, 1)}
	r.f = feed.New(store, shared, r.rec, feed.Options{
		LeaseTTL:    600 * time.Millisecond,
		Unsupported: func(err error) bool { return errors.Is(err, mongosrc.ErrNoChangeStreams) },
		HistoryLost: func(err error) bool { return errors.Is(err, mongosrc.ErrHistoryLost) },
		Metrics:     m,
		Log:         log,
	})
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- r.f.Run(ctx) }()
	t.Cleanup(func() { r.stop() })
	return r
}

func (r *replica) stop() error {
	r.cancel()
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(30 * time.Second):
		return errors.New("Run did not return")
	}
}

// Two replicas: one watches, the other follows; when the watcher stops,
// the other takes over and resumes from the token the first kept, so no
// event is lost between them.
func TestOneWatcherAndTakeover(t *testing.T) {
	srv := mongotest.Start(t, nil)
	srv.EnableChangeStreams()
	rs := realserver.StartRedis(t, 0)
	a := startReplica(t, srv, rs.URL(), nil)
	b := startReplica(t, srv, rs.URL(), nil)
	testkit.Eventually(t, "one watcher", func() bool {
		sa, sb := a.f.Status(), b.f.Status()
		return (sa == feed.StatusWatching && sb == feed.StatusFollowing) || (sa == feed.StatusFollowing && sb == feed.StatusWatching)
	})
	watcher, follower := a, b
	if b.f.Status() == feed.StatusWatching {
		watcher, follower = b, a
	}
	if err := srv.WaitCommand(context.Background(), "getMore"); err != nil {
		t.Fatal(err)
	}
	srv.Change("archive", "update", "a1")
	testkit.Eventually(t, "the watcher to apply the change", func() bool { return watcher.rec.has("update", "archive", "a1") })
	if follower.rec.has("update", "archive", "a1") {
		t.Error("the follower watched too")
	}

	rdb, err := redistier.NewClient(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	testkit.Eventually(t, "the token to be kept", func() bool {
		return rdb.Exists(context.Background(), "prodapi:v1:{changes}:feed:mongo:token").Val() == 1
	})
	if err := watcher.stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}
	srv.Change("planning", "delete", "p1") // while nobody watches
	testkit.Eventually(t, "the follower to take over", func() bool { return follower.f.Status() == feed.StatusWatching })
	testkit.Eventually(t, "the change made between them", func() bool { return follower.rec.has("delete", "planning", "p1") })
	if follower.rec.has("update", "archive", "a1") {
		t.Error("the new watcher replayed a change the first had applied")
	}
}

// A watcher that dies without releasing its lease is replaced once the
// lease lapses.
func TestTakeoverAfterLeaseLapses(t *testing.T) {
	srv := mongotest.Start(t, nil)
	srv.EnableChangeStreams()
	rs := realserver.StartRedis(t, 0)
	c, err := redistier.NewClient(rs.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// A dead replica's lease.
	if err := c.Set(context.Background(), "prodapi:v1:feed:mongo:lease", "dead", 1500*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	m := metrics.NewMetrics()
	r := startReplica(t, srv, rs.URL(), m)
	testkit.Eventually(t, "the takeover", func() bool { return r.f.Status() == feed.StatusWatching })
	if m.Gauge("prodapi_feed_leader", "").Value() != 1 {
		t.Error("leadership not shown")
	}
}

func TestHistoryLostFlushes(t *testing.T) {
	srv := mongotest.Start(t, nil)
	srv.EnableChangeStreams()
	rs := realserver.StartRedis(t, 0)
	r := startReplica(t, srv, rs.URL(), nil)
	testkit.Eventually(t, "watching", func() bool { return r.f.Status() == feed.StatusWatching })
	if err := srv.WaitCommand(context.Background(), "getMore"); err != nil {
		t.Fatal(err)
	}
	srv.Change("archive", "update", "a1")
	testkit.Eventually(t, "the change", func() bool { return r.rec.has("update", "archive", "a1") })
	// The oplog rolls over while the stream is open.
	srv.TruncateChanges()
	testkit.Eventually(t, "the flush", func() bool {
		return r.rec.has(sources.OpFlush, "archive", "") && r.rec.has(sources.OpFlush, "planning", "")
	})
	// And it goes on from now, once the new stream is open: a getMore
	// after its aggregate.
	testkit.Eventually(t, "a new stream", func() bool {
		aggregates := 0
		for _, c := range srv.Commands() {
			switch {
			case c.Name == "aggregate":
				aggregates++
			case c.Name == "getMore" && aggregates >= 2:
				return true
			}
		}
		return false
	})
	srv.Change("events", "insert", "e1")
	testkit.Eventually(t, "a change after the flush", func() bool { return r.rec.has("insert", "events", "e1") })
}

func TestNoChangeStreams(t *testing.T) {
	srv := mongotest.Start(t, nil) // a standalone server
	rs := realserver.StartRedis(t, 0)
	r := startReplica(t, srv, rs.URL(), nil)
	select {
	case err := <-r.done:
		r.done <- err
		if err != nil {
			t.Errorf("Run: %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run went on without change streams")
	}
	if r.f.Status() != feed.StatusUnsupported {
		t.Errorf("status %q", r.f.Status())
	}
}

// Each change goes to the log after the cache, and its token is saved
// only then: an append that fails makes the watch resume from the token
// before the change, which comes again.
func TestWatchAppendsToTheLog(t *testing.T) {
	srv := mongotest.Start(t, nil)
	srv.EnableChangeStreams()
	rs := realserver.StartRedis(t, 0)
	log := &logRecorder{}
	r := startReplicaLog(t, srv, rs.URL(), nil, log)
	testkit.Eventually(t, "watching", func() bool { return r.f.Status() == feed.StatusWatching })
	if err := srv.WaitCommand(context.Background(), "getMore"); err != nil {
		t.Fatal(err)
	}
	srv.Change("archive", "update", "a1")
	testkit.Eventually(t, "the change in the log", func() bool { return log.count("stream update archive/a1") == 1 })
	if r.f.Mode() != feed.ModeStream {
		t.Errorf("mode %q, want stream", r.f.Mode())
	}

	var mu sync.Mutex
	failures := 1
	log.mu.Lock()
	log.fail = func() bool {
		mu.Lock()
		defer mu.Unlock()
		failures--
		return failures >= 0
	}
	log.mu.Unlock()
	srv.Change("desks", "insert", "d1")
	testkit.Eventually(t, "the change in the log after a retry", func() bool { return log.count("stream insert desks/d1") == 1 })
	if !r.rec.has("insert", "desks", "d1") {
		t.Error("the cache did not hear of it")
	}
}

// A watch with no token yet saves the token of its stream's start before
// any change: when the first change fails (its append here), the next
// watch resumes from that start and reports it again, instead of opening
// "from now" past it.
func TestWatchKeepsTheStartOfItsStream(t *testing.T) {
	srv := mongotest.Start(t, nil)
	srv.EnableChangeStreams()
	rs := realserver.StartRedis(t, 0)
	failures := 1
	log := &logRecorder{}
	log.fail = func() bool { failures--; return failures >= 0 } // under log.mu
	r := startReplicaLog(t, srv, rs.URL(), nil, log)
	testkit.Eventually(t, "watching", func() bool { return r.f.Status() == feed.StatusWatching })
	if err := srv.WaitCommand(context.Background(), "getMore"); err != nil {
		t.Fatal(err)
	}
	srv.Change("desks", "insert", "d1")
	testkit.Eventually(t, "the first change in the log after a retry", func() bool { return log.count("stream insert desks/d1") == 1 })
	if got := log.got(); len(got) != 1 {
		t.Errorf("the log holds %q, want the change once (the stream's start is no entry)", got)
	}
}
