package feed_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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

// logRecorder is a change log that keeps what it was given; fail, when
// set, fails appends while it returns true.
type logRecorder struct {
	mu      sync.Mutex
	entries []string // source op collection/id
	fail    func() bool
}

func (l *logRecorder) Append(_ context.Context, source string, cs []sources.Change) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil && l.fail() {
		return errors.New("the log is down")
	}
	for _, c := range cs {
		l.entries = append(l.entries, source+" "+c.Op+" "+c.Collection+"/"+c.ID)
	}
	return nil
}

func (l *logRecorder) got() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.entries)
}

func (l *logRecorder) count(entry string) int { return countOf(l.got(), entry) }

// countOf is how many of entries are entry.
func countOf(entries []string, entry string) int {
	n := 0
	for _, e := range entries {
		if e == entry {
			n++
		}
	}
	return n
}

// A poller is a replica's feed over a standalone server (no change
// streams), polling through its Store every 5ms.
type poller struct {
	*replica
	log *logRecorder
}

func startPoller(t *testing.T, srv *mongotest.Server, redisURL string) *poller {
	t.Helper()
	store, shared := storeAndTier(t, srv, redisURL)
	p := &poller{replica: &replica{rec: &recorder{}, done: make(chan error, 1)}, log: &logRecorder{}}
	p.f = feed.New(store, shared, p.rec, feed.Options{
		LeaseTTL:    600 * time.Millisecond,
		Unsupported: func(err error) bool { return errors.Is(err, mongosrc.ErrNoChangeStreams) },
		HistoryLost: func(err error) bool { return errors.Is(err, mongosrc.ErrHistoryLost) },
		Log:         p.log,
		Poller:      store,
		PollEvery:   5 * time.Millisecond,
	})
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() { p.done <- p.f.Run(ctx) }()
	t.Cleanup(func() { p.stop() })
	return p
}

var t0 = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

func desk(id string, updated time.Duration, etag string) *sources.Doc {
	return sources.D("_id", id, "name", id, "_updated", t0.Add(updated), "_etag", etag)
}

// polled waits until the poller has read the collections twice more
// since now: what was written before is in its reports by then.
func polled(t *testing.T, srv *mongotest.Server) {
	t.Helper()
	start := len(srv.Named("find"))
	n := len(sources.Collections)
	testkit.Eventually(t, "two more polls", func() bool { return len(srv.Named("find")) >= start+2*n+1 })
}

// Without change streams the holder polls _updated: what was there at
// the start is not news; writes after it reach the cache and the log
// once, those of the watermark's second and those stamped a little
// before it included; the other replica hears that the fleet polls.
func TestPollFallback(t *testing.T) {
	srv := mongotest.Start(t, map[string][]*sources.Doc{"desks": {desk("d0", 0, "e0")}}) // a standalone server
	rs := realserver.StartRedis(t, 0)
	a := startPoller(t, srv, rs.URL())
	b := startPoller(t, srv, rs.URL())
	testkit.Eventually(t, "one poller", func() bool {
		sa, sb := a.f.Status(), b.f.Status()
		return sa == feed.StatusPolling && sb == feed.StatusFollowing || sa == feed.StatusFollowing && sb == feed.StatusPolling
	})
	holder, other := a, b
	if b.f.Status() == feed.StatusPolling {
		holder, other = b, a
	}
	testkit.Eventually(t, "the other replica to hear the fleet polls", func() bool { return other.f.Mode() == feed.ModePoll })
	polled(t, srv)
	if got := holder.log.got(); len(got) != 0 {
		t.Errorf("reported what was there at the start: %v", got)
	}

	for _, d := range []*sources.Doc{
		desk("d1", time.Second, "e1"),                 // after the watermark
		desk("d0", 0, "e0b"),                          // in the watermark's second, again
		desk("d2", -time.Second, "e2"),                // a late commit, within the overlap
		desk("d3", -time.Hour, "e3"),                  // far behind: not found, as documented
		sources.D("_id", "u1", "name", "no _updated"), // not found either
	} {
		if err := srv.Replace("desks", d); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"poll update desks/d0", "poll update desks/d1", "poll update desks/d2"}
	testkit.Eventually(t, "the writes in the log", func() bool {
		got := holder.log.got()
		slices.Sort(got)
		return slices.Equal(got, want)
	})
	polled(t, srv)
	got := holder.log.got()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("after more polls: %v, want each write once: %v", got, want)
	}
	if !holder.rec.has(sources.OpUpdate, "desks", "d1") || !holder.rec.has(sources.OpUpdate, "desks", "d2") {
		t.Error("the cache did not hear of the writes")
	}
	if len(other.log.got()) != 0 {
		t.Errorf("the other replica polled: %v", other.log.got())
	}
}

// A holder that stops is replaced; the new one polls from the watermark
// the first saved, so writes made in between are not lost.
func TestPollTakeover(t *testing.T) {
	srv := mongotest.Start(t, map[string][]*sources.Doc{"desks": {desk("d0", 0, "e0")}})
	rs := realserver.StartRedis(t, 0)
	a := startPoller(t, srv, rs.URL())
	testkit.Eventually(t, "polling", func() bool { return a.f.Status() == feed.StatusPolling })
	polled(t, srv) // the start is behind it
	if err := srv.Replace("desks", desk("d1", time.Second, "e1")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the first write", func() bool { return a.log.count("poll update desks/d1") == 1 })
	rdb := realserver.RedisClient(rs.Addr())
	defer rdb.Close()
	testkit.Eventually(t, "the watermark saved", func() bool {
		b, _ := rdb.Get(context.Background(), "prodapi:v1:{changes}:feed:mongo-poll:token").Bytes()
		return strings.Contains(string(b), `"d1"`)
	})
	// (Stopped before that, it would leave the previous watermark, and
	// the next holder would report d1 again: the log drops it by its
	// version.)
	if err := a.stop(); !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v", err)
	}
	// While nobody polls.
	if err := srv.Replace("desks", desk("d2", 2*time.Second, "e2")); err != nil {
		t.Fatal(err)
	}
	b := startPoller(t, srv, rs.URL())
	testkit.Eventually(t, "the write made between them", func() bool { return b.log.count("poll update desks/d2") == 1 })
	if b.log.count("poll update desks/d1") != 0 {
		t.Error("the new holder reported the first write again")
	}
}

// An append that fails is retried: the watermark moves only once the
// log has the change.
func TestPollRetriesTheLog(t *testing.T) {
	srv := mongotest.Start(t, map[string][]*sources.Doc{"desks": {desk("d0", 0, "e0")}})
	rs := realserver.StartRedis(t, 0)
	p := startPoller(t, srv, rs.URL())
	testkit.Eventually(t, "polling", func() bool { return p.f.Status() == feed.StatusPolling })
	polled(t, srv)
	var down sync.Mutex
	failing := true
	p.log.mu.Lock()
	p.log.fail = func() bool { down.Lock(); defer down.Unlock(); return failing }
	p.log.mu.Unlock()
	if err := srv.Replace("desks", desk("d1", time.Second, "e1")); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the feed retrying", func() bool { return p.f.Status() == feed.StatusRetrying })
	down.Lock()
	failing = false
	down.Unlock()
	testkit.Eventually(t, "the write in the log", func() bool { return p.log.count("poll update desks/d1") == 1 })
}

// standalone is a server without change streams.
type standalone struct{}

var errStandalone = errors.New("no change streams")

func (standalone) Watch(context.Context, []string, []byte, func(sources.Change, []byte) error) error {
	return errStandalone
}

// deskStamps is a Poller of one collection, desks, from a list of
// stamps; latest is the newest _updated it says.
type deskStamps struct {
	mu     sync.Mutex
	docs   []sources.Stamp
	latest time.Time
	polls  int // Poll calls so far
}

// calls is how many polls ran.
func (p *deskStamps) calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.polls
}

// pastFirstRound waits for two more rounds of polls: the first, which
// takes what is there as its start, is over by then.
func (p *deskStamps) pastFirstRound(t *testing.T) {
	t.Helper()
	start := p.calls()
	testkit.Eventually(t, "two rounds of polls", func() bool { return p.calls() >= start+2*len(sources.Collections) })
}

func (p *deskStamps) add(stamps ...sources.Stamp) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.docs = append(p.docs, stamps...)
}

func (p *deskStamps) Poll(_ context.Context, coll string, since time.Time, limit int) ([]sources.Stamp, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.polls++
	var out []sources.Stamp
	for _, d := range p.docs {
		if coll == "desks" && !d.Updated.Before(since) {
			out = append(out, d)
		}
	}
	slices.SortStableFunc(out, func(a, b sources.Stamp) int { return a.Updated.Compare(b.Updated) })
	return out[:min(len(out), limit)], nil
}

func (p *deskStamps) Latest(_ context.Context, coll string) (time.Time, error) {
	if coll == "desks" {
		return p.latest, nil
	}
	return time.Time{}, nil
}

// runPoll runs a feed alone (it holds the lease) on a server without
// change streams, polling p every millisecond by the clock now (nil: the
// real one), until the test ends.
func runPoll(t *testing.T, p feed.Poller, now func() time.Time) *logRecorder {
	t.Helper()
	log := &logRecorder{}
	f := feed.New(standalone{}, redistier.New(nil, redistier.Options{}), &recorder{}, feed.Options{
		Unsupported: func(err error) bool { return errors.Is(err, errStandalone) },
		HistoryLost: func(error) bool { return false },
		Log:         log, Poller: p, PollEvery: time.Millisecond, Now: now,
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	testkit.Eventually(t, "polling", func() bool { return f.Status() == feed.StatusPolling })
	return log
}

// A second holding more documents than the largest batch cannot be read
// whole: the collection is reported flushed, and the poll goes on after
// that second. A second holding more than one batch is read whole.
func TestPollCrowdedSeconds(t *testing.T) {
	p := &deskStamps{latest: t0}
	add := func(n int, at time.Duration) {
		stamps := make([]sources.Stamp, n)
		for i := range stamps {
			stamps[i] = sources.Stamp{ID: fmt.Sprintf("%s-%06d", at, i), Updated: t0.Add(at), Version: "v"}
		}
		p.add(stamps...)
	}
	log := runPoll(t, p, nil)

	add(2500, time.Second) // more than a batch, one second
	testkit.Eventually(t, "the crowded second", func() bool { return len(log.got()) == 2500 })
	add(600, 1500*time.Millisecond) // two seconds that fill a batch
	add(600, 1700*time.Millisecond)
	testkit.Eventually(t, "the two crowded seconds", func() bool { return len(log.got()) == 3700 })
	add(70000, 2*time.Second) // more than the largest batch
	add(1, 3*time.Second)
	testkit.Eventually(t, "the flush, and the write after it", func() bool {
		return log.count("poll flush desks/") == 1 && log.count("poll update desks/3s-000000") == 1
	})
	if n := len(log.got()); n != 3702 {
		t.Errorf("%d entries, want the first seconds' 3700, a flush and the write after", n)
	}
	add(600, 4*time.Second) // a batch reads the first second whole, and the next
	add(600, 5*time.Second) // starts in it again: it must read further, not loop
	testkit.Eventually(t, "the seconds that start batches alike", func() bool { return len(log.got()) == 4902 })
}

// A document stamped in the future does not hold the watermark there:
// writes made before its time are reported, and it is not reported
// again.
func TestPollFutureStamps(t *testing.T) {
	p := &deskStamps{latest: t0.Add(time.Hour)}
	p.add(sources.Stamp{ID: "future", Updated: t0.Add(time.Hour), Version: "f"})
	log := runPoll(t, p, func() time.Time { return t0.Add(10 * time.Second) })
	p.add(sources.Stamp{ID: "now", Updated: t0.Add(10 * time.Second), Version: "n"})
	testkit.Eventually(t, "the write stamped now", func() bool { return log.count("poll update desks/now") == 1 })
	if log.count("poll update desks/future") != 0 {
		t.Errorf("the future document was reported: %v", log.got())
	}
}

// Documents reported beside one stamped in the future are remembered
// from the watermark the next poll reads from (capped at the clock's
// time), not from the future stamp: later polls do not report them
// again.
func TestPollRemembersBesideFutureStamps(t *testing.T) {
	p := &deskStamps{latest: t0}
	log := runPoll(t, p, func() time.Time { return t0.Add(10 * time.Second) })
	p.add(sources.Stamp{ID: "ahead", Updated: t0.Add(time.Hour), Version: "a"},
		sources.Stamp{ID: "now", Updated: t0.Add(10 * time.Second), Version: "n"})
	testkit.Eventually(t, "both writes", func() bool {
		return log.count("poll update desks/now") > 0 && log.count("poll update desks/ahead") > 0
	})
	after := p.calls()
	testkit.Eventually(t, "ten more polls", func() bool { return p.calls() >= after+10 })
	for _, id := range []string{"now", "ahead"} {
		if n := log.count("poll update desks/" + id); n != 1 {
			t.Errorf("%s reported %d times, want once: %v", id, n, log.got())
		}
	}
}
