package feed_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/cache/feed"
	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
	"github.com/prodapi/prodapi/test/realserver"
	"github.com/prodapi/prodapi/test/testkit"
)

// A journal is what a feed did, in order: "apply X" for each change the
// cache took, "append X" for each the log took (X: op collection/id).
type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(what string, cs []sources.Change) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, c := range cs {
		j.events = append(j.events, what+" "+c.Op+" "+c.Collection+"/"+c.ID)
	}
}

func (j *journal) got() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.events)
}

// appendedBeforeApplied names the first change appended before the
// cache took it; "" when there is none.
func (j *journal) appendedBeforeApplied() string {
	applied := map[string]bool{}
	for _, e := range j.got() {
		if c, ok := strings.CutPrefix(e, "apply "); ok {
			applied[c] = true
		} else if c, ok := strings.CutPrefix(e, "append "); ok && !applied[c] {
			return c
		}
	}
	return ""
}

func (j *journal) count(e string) int { return countOf(j.got(), e) }

// flakyCache is an Applier whose Apply fails while fails is above zero
// (counting down), as the cache's does when an invalidation did not reach
// Redis; what it takes goes to the journal.
type flakyCache struct {
	j     *journal
	mu    sync.Mutex
	fails int
}

var errNotPropagated = errors.New("cache: the invalidation did not reach Redis")

// failNext makes the next n calls fail.
func (c *flakyCache) failNext(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fails = n
}

func (c *flakyCache) Apply(_ context.Context, cs []sources.Change) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fails > 0 {
		c.fails--
		return errNotPropagated
	}
	c.j.add("apply", cs)
	return nil
}

// journalLog is a change log that writes to the journal.
type journalLog struct{ j *journal }

func (l journalLog) Append(_ context.Context, _ string, cs []sources.Change) error {
	l.j.add("append", cs)
	return nil
}

// deriveFunc is a Deriver of a function giving a change's dependents.
type deriveFunc func(sources.Change) []sources.Change

func (f deriveFunc) Derive(_ context.Context, cs []sources.Change) ([]sources.Change, error) {
	var out []sources.Change
	for _, c := range cs {
		out = append(out, c)
		out = append(out, f(c)...)
	}
	return out, nil
}

// embeds: an item's change derives its assignment's.
var embeds = deriveFunc(func(c sources.Change) []sources.Change {
	if c.Collection == "archive" && c.Op != sources.OpFlush {
		return []sources.Change{{Collection: "assignments", ID: "of-" + c.ID, Op: sources.OpUpdate}}
	}
	return nil
})

// runFeed runs a feed until the test ends.
func runFeed(t *testing.T, src feed.Source, coord feed.Coordinator, apply feed.Applier, opts feed.Options) *feed.Feed {
	t.Helper()
	if opts.Unsupported == nil {
		opts.Unsupported = func(err error) bool {
			return errors.Is(err, errStandalone) || errors.Is(err, mongosrc.ErrNoChangeStreams)
		}
	}
	if opts.HistoryLost == nil {
		opts.HistoryLost = func(err error) bool { return errors.Is(err, mongosrc.ErrHistoryLost) }
	}
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = 600 * time.Millisecond
	}
	f := feed.New(src, coord, apply, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return f
}

// watchingFeed runs a feed on the change stream of the fake server and a
// real Redis, with a flakyCache and a journalLog, until it has appended
// a first change (desks/d0): a resume token is saved.
func watchingFeed(t *testing.T, d feed.Deriver) (*mongotest.Server, *journal, *flakyCache) {
	t.Helper()
	srv := mongotest.Start(t, nil)
	srv.EnableChangeStreams()
	rs := realserver.StartRedis(t, 0)
	store, shared := storeAndTier(t, srv, rs.URL())
	j := &journal{}
	cache := &flakyCache{j: j}
	f := runFeed(t, store, shared, cache, feed.Options{Log: journalLog{j}, Derive: d})
	testkit.Eventually(t, "watching", func() bool { return f.Status() == feed.StatusWatching })
	if err := srv.WaitCommand(context.Background(), "getMore"); err != nil {
		t.Fatal(err)
	}
	srv.Change("desks", "update", "d0")
	testkit.Eventually(t, "the first change in the log", func() bool { return j.count("append update desks/d0") > 0 })
	return srv, j, cache
}

// A change the cache did not take (its invalidation did not reach Redis)
// fails like an append that failed: nothing is appended for it before
// the cache takes it, on the change stream, and it comes again; what it
// derives follows it, in the cache and in the log.
func TestWatchAppliesBeforeAppending(t *testing.T) {
	srv, j, cache := watchingFeed(t, embeds)
	cache.failNext(2)
	srv.Change("archive", "update", "a1")
	testkit.Eventually(t, "the change and what it derives in the log", func() bool {
		return j.count("append update assignments/of-a1") > 0
	})
	if c := j.appendedBeforeApplied(); c != "" {
		t.Errorf("%s appended before the cache took it: %v", c, j.got())
	}
	want := []string{"apply update desks/d0", "append update desks/d0",
		"apply update archive/a1", "apply update assignments/of-a1", "append update archive/a1", "append update assignments/of-a1"}
	if diff := cmp.Diff(j.got(), want); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
}

// The same on the poll: the watermark stays until the cache took the
// change.
func TestPollAppliesBeforeAppending(t *testing.T) {
	p := &deskStamps{latest: t0}
	j := &journal{}
	cache := &flakyCache{j: j}
	f := runFeed(t, standalone{}, redistier.New(nil, redistier.Options{}), cache,
		feed.Options{Log: journalLog{j}, Poller: p, PollEvery: time.Millisecond})
	testkit.Eventually(t, "polling", func() bool { return f.Status() == feed.StatusPolling })
	p.pastFirstRound(t)
	cache.failNext(2)
	p.add(sources.Stamp{ID: "d1", Updated: t0.Add(time.Second), Version: "1"})
	testkit.Eventually(t, "the write in the log", func() bool { return j.count("append update desks/d1") > 0 })
	if c := j.appendedBeforeApplied(); c != "" {
		t.Errorf("%s appended before the cache took it: %v", c, j.got())
	}
}

// The same on a Local feed: a report the cache did not take is applied
// again, and appended only then, with what it derives after it.
func TestLocalAppliesBeforeAppending(t *testing.T) {
	w, log := newChanWatcher(), newScriptedLog()
	j := &journal{}
	cache := &flakyCache{j: j, fails: 2}
	localFeed(t, w, cache, log, feed.LocalOptions{Pause: time.Millisecond, MaxPause: time.Millisecond, Derive: embeds})
	w.send(edit("a", "1"))
	got := log.next(t, nil)
	if diff := cmp.Diff(got, []string{"a@1", "of-a@"}); diff != "" {
		t.Errorf("appended (-got +want):\n%s", diff)
	}
	want := []string{"apply update archive/a", "apply update assignments/of-a"}
	if diff := cmp.Diff(j.got(), want); diff != "" {
		t.Errorf("applied before the append (-got +want):\n%s", diff)
	}
}

// A Local feed whose Deriver fails keeps the changes queued, applied to
// the cache but not appended, until it derives them; whether or not they
// were coalesced meanwhile, what a document was before its first change
// reaches the Deriver.
func TestLocalDerivesBeforeAppending(t *testing.T) {
	w, log := newChanWatcher(), newScriptedLog()
	d := &gatedDeriver{open: make(chan struct{})}
	rec := &recorder{}
	localFeed(t, w, rec, log, feed.LocalOptions{Pause: time.Millisecond, MaxPause: time.Millisecond, MaxQueue: 2, Derive: d})
	first, second := sources.D("_id", "a", "v", "0"), sources.D("_id", "a", "v", "1")
	a1, a2 := edit("a", "1"), edit("a", "2")
	a1.Before, a2.Before = first, second
	w.send(a1)
	w.send(edit("b", "1"))
	w.send(a2)
	if got := rec.versions(); !slices.Equal(got, []string{"a@1", "b@1", "a@2"}) {
		t.Errorf("applied %v, want every report at once", got)
	}
	close(d.open)
	var appended []string
	for !slices.Contains(appended, "a@2") {
		appended = append(appended, log.next(t, nil)...)
	}
	for _, want := range []string{"of-a@", "of-b@"} {
		if !slices.Contains(appended, want) {
			t.Errorf("appended %v, without %s", appended, want)
		}
	}
	if !slices.Contains(d.befores("a"), first) {
		t.Errorf("a derived with %v as it was, never with %v", d.befores("a"), first)
	}
}

// gatedDeriver fails until open is closed, then derives as embeds does,
// keeping the Befores of the changes it derived, by id.
type gatedDeriver struct {
	open chan struct{}
	mu   sync.Mutex
	seen map[string][]*sources.Doc
}

func (g *gatedDeriver) Derive(ctx context.Context, cs []sources.Change) ([]sources.Change, error) {
	select {
	case <-g.open:
	default:
		return nil, errDown
	}
	g.mu.Lock()
	if g.seen == nil {
		g.seen = map[string][]*sources.Doc{}
	}
	for _, c := range cs {
		g.seen[c.ID] = append(g.seen[c.ID], c.Before)
	}
	g.mu.Unlock()
	return embeds.Derive(ctx, cs)
}

func (g *gatedDeriver) befores(id string) []*sources.Doc {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.seen[id]
}

// A history lost is flushed in the cache, then in the log; a flush the
// cache did not take is tried again, never appended first.
func TestHistoryLostFlushRetried(t *testing.T) {
	srv, j, cache := watchingFeed(t, nil)
	cache.failNext(1)
	srv.TruncateChanges()
	testkit.Eventually(t, "the flush in the log", func() bool { return j.count("append flush archive/") > 0 })
	if c := j.appendedBeforeApplied(); c != "" {
		t.Errorf("%s appended before the cache took it: %v", c, j.got())
	}
}
