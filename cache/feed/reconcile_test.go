package feed_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/cache/feed"
	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
	"github.com/prodapi/prodapi/test/realserver"
	"github.com/prodapi/prodapi/test/testkit"
)

// deskIDs is an IDLister of one collection, desks: the ids there, less
// the hidden ones in a walk (written behind it), in pages by id.
type deskIDs struct {
	mu     sync.Mutex
	ids    map[string]bool
	hidden map[string]bool
	walks  int // walks of desks begun
	fail   error
}

func (d *deskIDs) IDs(_ context.Context, coll string, cursor []byte, limit int) ([]string, []byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail != nil {
		return nil, nil, d.fail
	}
	if coll != "desks" {
		return nil, nil, nil
	}
	if cursor == nil {
		d.walks++
	}
	var page []string
	for _, id := range slices.Sorted(maps.Keys(d.ids)) {
		if id > string(cursor) && !d.hidden[id] && len(page) < limit {
			page = append(page, id)
		}
	}
	if len(page) < limit {
		return page, nil, nil
	}
	return page, []byte(page[len(page)-1]), nil
}

func (d *deskIDs) Present(_ context.Context, coll string, ids []string) ([]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, id := range ids {
		if coll == "desks" && d.ids[id] {
			out = append(out, id)
		}
	}
	return out, nil
}

func (d *deskIDs) set(f func(d *deskIDs)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	f(d)
}

func (d *deskIDs) walked() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.walks
}

// rounds waits for n more rounds to begin after the one under way: the
// one under way, and n-1 more, have ended by then.
func (d *deskIDs) rounds(t *testing.T, n int) {
	t.Helper()
	start := d.walked()
	testkit.Eventually(t, "more reconcile rounds", func() bool { return d.walked() >= start+n+1 })
}

// The poll's holder reconciles the ids: a document deleted is reported
// once, to the cache and the log; one the poll reported and the walk has
// not seen (written behind it) is known, and reported when it goes too;
// one still there never is.
func TestReconcileFindsDeletions(t *testing.T) {
	p := &deskStamps{latest: t0}
	ids := &deskIDs{ids: map[string]bool{"d1": true, "d2": true, "d3": true}, hidden: map[string]bool{}}
	log, rec := &logRecorder{}, &recorder{}
	f := runFeed(t, standalone{}, redistier.New(nil, redistier.Options{}), rec, feed.Options{
		Log: log, Poller: p, PollEvery: time.Millisecond, IDs: ids, ReconcileEvery: 5 * time.Millisecond,
	})
	testkit.Eventually(t, "polling", func() bool { return f.Status() == feed.StatusPolling })
	ids.rounds(t, 1)
	if got := log.got(); len(got) != 0 {
		t.Fatalf("the first rounds reported %v", got)
	}

	ids.set(func(d *deskIDs) { delete(d.ids, "d2") })
	testkit.Eventually(t, "the deletion in the log", func() bool { return log.count("poll delete desks/d2") == 1 })
	if !rec.has(sources.OpDelete, "desks", "d2") {
		t.Error("the cache did not hear of the deletion")
	}

	// d4 is written behind the walks, which never see it; the poll does.
	p.pastFirstRound(t)
	ids.set(func(d *deskIDs) { d.ids["d4"], d.hidden["d4"] = true, true })
	p.add(sources.Stamp{ID: "d4", Updated: t0.Add(time.Second), Version: "4"})
	testkit.Eventually(t, "the poll's report of d4", func() bool { return log.count("poll update desks/d4") == 1 })
	ids.rounds(t, 2)
	ids.set(func(d *deskIDs) { delete(d.ids, "d4") })
	testkit.Eventually(t, "d4's deletion in the log", func() bool { return log.count("poll delete desks/d4") == 1 })

	ids.rounds(t, 2)
	for _, e := range log.got() {
		if e == "poll delete desks/d1" || e == "poll delete desks/d3" {
			t.Errorf("a document still there reported deleted: %s", e)
		}
	}
	if n := log.count("poll delete desks/d2"); n != 1 {
		t.Errorf("d2's deletion reported %d times, want once", n)
	}
}

// A round that fails fails the poll, which is retried; the next round
// finds what the failed one would have.
func TestReconcileRetried(t *testing.T) {
	p := &deskStamps{latest: t0}
	ids := &deskIDs{ids: map[string]bool{"d1": true, "d2": true}, hidden: map[string]bool{}}
	log := &logRecorder{}
	f := runFeed(t, standalone{}, redistier.New(nil, redistier.Options{}), &recorder{}, feed.Options{
		Log: log, Poller: p, PollEvery: time.Millisecond, IDs: ids, ReconcileEvery: 5 * time.Millisecond,
	})
	testkit.Eventually(t, "polling", func() bool { return f.Status() == feed.StatusPolling })
	ids.rounds(t, 1)
	ids.set(func(d *deskIDs) { d.fail = errors.New("mongo: down"); delete(d.ids, "d2") })
	testkit.Eventually(t, "the feed retrying", func() bool { return f.Status() == feed.StatusRetrying })
	ids.set(func(d *deskIDs) { d.fail = nil })
	testkit.Eventually(t, "the deletion in the log", func() bool { return log.count("poll delete desks/d2") == 1 })
}

// On the fake server and a real Redis: the known ids are a sorted set in
// the change log's slot, and a document deleted from the database gets
// its delete entry.
func TestReconcileOnMongo(t *testing.T) {
	srv := mongotest.Start(t, map[string][]*sources.Doc{"desks": {desk("d0", 0, "e0"), desk("d1", 0, "e1")}})
	rs := realserver.StartRedis(t, 0)
	store, shared := storeAndTier(t, srv, rs.URL())
	log := &logRecorder{}
	f := runFeed(t, store, shared, &recorder{}, feed.Options{
		Log: log, Poller: store, PollEvery: 5 * time.Millisecond,
		IDs: store, Known: shared, ReconcileEvery: 20 * time.Millisecond,
		Unsupported: func(err error) bool { return errors.Is(err, mongosrc.ErrNoChangeStreams) },
	})
	testkit.Eventually(t, "polling", func() bool { return f.Status() == feed.StatusPolling })
	rdb := realserver.RedisClient(rs.Addr())
	defer rdb.Close()
	key := redistier.Prefix + "{changes}:known:desks"
	testkit.Eventually(t, "the known ids in Redis", func() bool { return rdb.ZCard(context.Background(), key).Val() == 2 })
	if !srv.Delete("desks", "d0") {
		t.Fatal("no d0")
	}
	testkit.Eventually(t, "the deletion in the log", func() bool { return log.count("poll delete desks/d0") == 1 })
	// Forgotten once it is in the log.
	testkit.Eventually(t, "d0 forgotten", func() bool {
		return slices.Equal(rdb.ZRange(context.Background(), key, 0, -1).Val(), []string{"d1"})
	})
}
