package changelog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/realserver"
	"github.com/prodapi/prodapi/test/testkit"
)

// quiet drops go-redis' own log lines (dial failures while a test has
// Redis down on purpose).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{}) // this test binary owns the process
	os.Exit(m.Run())
}

var all = resourceNames()

func resourceNames() []string {
	var names []string
	for _, r := range sources.Resources() {
		names = append(names, r.Name)
	}
	return names
}

func change(coll, id, op string) sources.Change {
	return sources.Change{Collection: coll, ID: id, Op: op, At: time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)}
}

// ids are the "resource/id op" of entries.
func ids(entries []sources.LogEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Resource+"/"+e.ID+" "+e.Op)
	}
	return out
}

func mustAppend(t *testing.T, l *Log, source string, changes ...sources.Change) {
	t.Helper()
	if err := l.Append(t.Context(), source, changes); err != nil {
		t.Fatal(err)
	}
}

// readAll reads everything after since, page by page, as a client does.
func readAll(t *testing.T, l *Log, since string, resources []string) ([]sources.LogEntry, string) {
	t.Helper()
	var out []sources.LogEntry
	for range 1000 {
		entries, next, err := l.Read(t.Context(), since, resources, 2)
		if err != nil {
			t.Fatalf("Read(%q): %v", since, err)
		}
		out = append(out, entries...)
		if next == since {
			return out, next
		}
		since = next
	}
	t.Fatal("Read never reached the end")
	return nil, ""
}

// caughtUp waits until l holds n entries after since: in front of Redis,
// a replica serves what its follower has read, a moment after the append.
func caughtUp(t *testing.T, l *Log, since string, n int) {
	t.Helper()
	testkit.Eventually(t, fmt.Sprintf("%d entries after %s", n, since), func() bool {
		got, _ := readAll(t, l, since, all)
		return len(got) >= n
	})
}

// testLog is what every log does, ring or stream: newLog returns a log
// of a fresh, empty log.
func testLog(t *testing.T, newLog func(t *testing.T, opts Options) *Log) {
	t.Run("read and resume", func(t *testing.T) {
		l := newLog(t, Options{})
		ctx := t.Context()
		entries, start, err := l.Read(ctx, "now", all, 10)
		if err != nil || len(entries) != 0 || !l.Valid(start) {
			t.Fatalf("now: %v %q %v", entries, start, err)
		}
		if entries, next, err := l.Read(ctx, "", all, 10); err != nil || len(entries) != 0 || !l.Valid(next) {
			t.Fatalf("from the oldest of an empty log: %v %q %v", entries, next, err)
		}
		mustAppend(t, l, SourceSandbox, change("archive", "i1", sources.OpInsert), change("desks", "d1", sources.OpUpdate),
			change("content_types", "ct", sources.OpUpdate), change("archive", "", sources.OpFlush))
		caughtUp(t, l, start, 3)
		want := []string{"items/i1 insert", "desks/d1 update", "items/ flush"}
		got, end := readAll(t, l, start, all)
		if diff := cmp.Diff(ids(got), want); diff != "" {
			t.Errorf("after now (-got +want):\n%s", diff)
		}
		if got[0].At.IsZero() || !l.Valid(got[0].Token) || got[len(got)-1].Token != end {
			t.Errorf("entries %+v, end %q", got, end)
		}
		if all, _ := readAll(t, l, "", all); !slices.Equal(ids(all), want) {
			t.Errorf("from the oldest: %v", ids(all))
		}
		// From any token: what came after it.
		if rest, _ := readAll(t, l, got[0].Token, all); !slices.Equal(ids(rest), want[1:]) {
			t.Errorf("after the first: %v", ids(rest))
		}
		// At the end: nothing, and the same token.
		if entries, next, err := l.Read(ctx, end, all, 10); err != nil || len(entries) != 0 || next != end {
			t.Errorf("at the end: %v %q %v", entries, next, err)
		}
		if _, now, _ := l.Read(ctx, "now", all, 10); now != end {
			t.Errorf("now %q after the appends, want %q", now, end)
		}
	})

	t.Run("scopes", func(t *testing.T) {
		l := newLog(t, Options{})
		_, start, _ := l.Read(t.Context(), "now", all, 10)
		for i := range 5 {
			mustAppend(t, l, SourceSandbox, change("archive", fmt.Sprint("i", i), sources.OpUpdate), change("desks", fmt.Sprint("d", i), sources.OpUpdate))
		}
		caughtUp(t, l, start, 10)
		got, end := readAll(t, l, start, []string{"desks"})
		if want := []string{"desks/d0 update", "desks/d1 update", "desks/d2 update", "desks/d3 update", "desks/d4 update"}; !slices.Equal(ids(got), want) {
			t.Errorf("desks only: %v", ids(got))
		}
		// The token to resume from is past the items too: the client
		// never reads them again.
		if _, allEnd := readAll(t, l, start, all); end != allEnd {
			t.Errorf("desks' end %q, the log's %q", end, allEnd)
		}
		// Nothing it may see: nothing, and the position past them.
		entries, next, err := l.Read(t.Context(), start, []string{"users"}, 3)
		if err != nil || len(entries) != 0 || next == start {
			t.Errorf("users only: %v %q %v; want none, and a token past what was examined", entries, next, err)
		}
	})

	t.Run("bad tokens", func(t *testing.T) {
		l := newLog(t, Options{})
		for _, tok := range []string{"x", "0123456789abcdef", "0123456789abcdef-1", "0123456789ABCDEF-1-0", "0123456789abcdef-01-0",
			"0123456789abcdef-1-0-", "0123456789abcdef--1-0", "0123456789abcdef-18446744073709551616-0", "now-1-0"} {
			if l.Valid(tok) {
				t.Errorf("Valid(%q)", tok)
			}
			if _, _, err := l.Read(t.Context(), tok, all, 1); !errors.Is(err, sources.ErrInvalid) {
				t.Errorf("Read(%q): %v, want ErrInvalid", tok, err)
			}
		}
		// A token of another life of the log has expired, on Read, Wait
		// and WaitApplied, which do not wait for it.
		const other = "0123456789abcdef-1-0"
		if !l.Valid(other) {
			t.Fatalf("Valid(%q) false", other)
		}
		if _, _, err := l.Read(t.Context(), other, all, 1); !errors.Is(err, sources.ErrExpired) {
			t.Errorf("another epoch: %v, want ErrExpired", err)
		}
		_, start, _ := l.Read(t.Context(), "now", all, 1)
		mustAppend(t, l, SourceSandbox, change("desks", "d", sources.OpUpdate))
		caughtUp(t, l, start, 1)
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := l.Wait(ctx, other); !errors.Is(err, sources.ErrExpired) {
			t.Errorf("Wait(another epoch): %v, want ErrExpired", err)
		}
		if err := l.WaitApplied(ctx, other); !errors.Is(err, sources.ErrExpired) {
			t.Errorf("WaitApplied(another epoch): %v, want ErrExpired", err)
		}
		if err := l.WaitApplied(ctx, "x"); !errors.Is(err, sources.ErrInvalid) {
			t.Errorf("WaitApplied(x): %v, want ErrInvalid", err)
		}
	})

	t.Run("wait", func(t *testing.T) {
		l := newLog(t, Options{})
		_, start, _ := l.Read(t.Context(), "now", all, 10)
		woke := make(chan error, 1)
		go func() { woke <- l.Wait(t.Context(), start) }() // ends with the append below, or the test
		mustAppend(t, l, SourceSandbox, change("desks", "d", sources.OpUpdate))
		if err := <-woke; err != nil {
			t.Fatal(err)
		}
		// Woken by the follower: the entry is there to read.
		entries, end, _ := l.Read(t.Context(), start, all, 10)
		if len(entries) != 1 {
			t.Fatalf("after the wait: %v", entries)
		}
		ctx, cancel := context.WithCancel(t.Context())
		go func() { woke <- l.Wait(ctx, end) }()
		cancel()
		if err := <-woke; !errors.Is(err, context.Canceled) {
			t.Errorf("a wait at the end, cancelled: %v", err)
		}
	})

	t.Run("versions", func(t *testing.T) { testVersions(t, newLog) })

	t.Run("apply", func(t *testing.T) { testApply(t, newLog) })

	t.Run("ahead of the head", func(t *testing.T) { testAhead(t, newLog) })
}

// testVersions: entries carry their change's Version.
func testVersions(t *testing.T, newLog func(t *testing.T, opts Options) *Log) {
	l := newLog(t, Options{})
	_, start, _ := l.Read(t.Context(), "now", all, 10)
	edit := change("archive", "i1", sources.OpUpdate)
	edit.Version = "v1"
	mustAppend(t, l, SourceSandbox, edit, change("desks", "d1", sources.OpUpdate))
	caughtUp(t, l, start, 2)
	got, _ := readAll(t, l, start, all)
	if len(got) != 2 || got[0].Version != "v1" || got[1].Version != "" {
		t.Errorf("entries %+v: want the first with its version, the second with none", got)
	}
}

// testAhead: a token ahead of the log's head is expired, never waited
// on; in front of Redis it ends the epoch.
func testAhead(t *testing.T, newLog func(t *testing.T, opts Options) *Log) {
	l := newLog(t, Options{})
	_, start, _ := l.Read(t.Context(), "now", all, 10)
	mustAppend(t, l, SourceSandbox, change("desks", "d1", sources.OpUpdate))
	caughtUp(t, l, start, 1)
	got, _ := readAll(t, l, start, all)
	tok, _ := parseToken(got[0].Token)
	tok.pos.ms += 3_600_000 // an hour ahead
	ahead := tok.String()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, _, err := l.Read(ctx, ahead, all, 10); !errors.Is(err, sources.ErrExpired) {
		t.Errorf("Read: %v, want ErrExpired", err)
	}
	if err := l.Wait(ctx, ahead); !errors.Is(err, sources.ErrExpired) {
		t.Errorf("Wait: %v, want ErrExpired, never a wait", err)
	}
	if err := l.WaitApplied(ctx, ahead); !errors.Is(err, sources.ErrExpired) {
		t.Errorf("WaitApplied: %v, want ErrExpired, never a wait", err)
	}
	if l.stream == nil {
		return // the ring: a token ahead of it is forged; the ring goes on
	}
	// In front of Redis it is an honest client's after a lost tail:
	// the epoch ends, and every token of it expires.
	expires(t, map[string]*Log{"the log": l}, start, got[0].Token)
	goesOn(t, l, l, "d2")
}

// expires waits until every token has expired on every log.
func expires(t *testing.T, logs map[string]*Log, tokens ...string) {
	t.Helper()
	for name, l := range logs {
		for _, tok := range tokens {
			testkit.Eventually(t, name+": the old epoch's "+tok+" expired", func() bool {
				_, _, err := l.Read(t.Context(), tok, all, 10)
				return errors.Is(err, sources.ErrExpired)
			})
		}
	}
}

// goesOn appends an update of desk id on a, and returns what b reads
// after its end before, once it reads the entry.
func goesOn(t *testing.T, a, b *Log, id string) []sources.LogEntry {
	t.Helper()
	_, now, err := b.Read(t.Context(), "now", all, 10)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, a, SourceSandbox, change("desks", id, sources.OpUpdate))
	caughtUp(t, b, now, 1)
	got, _ := readAll(t, b, now, all)
	return got
}

// An applier that records what it applied, and can be held and made to
// fail.
type applier struct {
	entered chan []sources.LogEntry // each call's entries, as it begins (when held)
	release chan error              // a held call returns what it receives
	held    atomic.Bool
	ended   atomic.Int32 // EpochEnded's calls

	mu      sync.Mutex
	applied []sources.LogEntry // of the calls that succeeded, in order
}

// send sends v on ch, or fails the test after a generous while.
func send[T any](t *testing.T, ch chan<- T, v T) {
	t.Helper()
	select {
	case ch <- v:
	case <-time.After(time.Minute):
		t.Fatal("nobody received in a minute")
	}
}

// recv receives from ch, or fails the test after a generous while.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(time.Minute):
		t.Fatal("nothing received in a minute")
		panic("unreachable")
	}
}

func newApplier() *applier {
	return &applier{entered: make(chan []sources.LogEntry, 16), release: make(chan error)}
}

func (a *applier) ApplyEntries(ctx context.Context, entries []sources.LogEntry) error {
	if a.held.Load() && entries[0].Op != sources.OpFlush {
		a.entered <- entries
		select {
		case err := <-a.release:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.applied = append(a.applied, entries...)
	return nil
}

// EpochEnded counts the epochs that ended under the follower.
func (a *applier) EpochEnded(context.Context) error {
	a.ended.Add(1)
	return nil
}

// appliedIDs are the entries applied, flushes left out.
func (a *applier) appliedIDs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []sources.LogEntry
	for _, e := range a.applied {
		if e.Op != sources.OpFlush {
			out = append(out, e)
		}
	}
	return ids(out)
}

// testApply: an entry is applied (Options.Apply), in log order, before
// the log hands it out or says it is applied; an applier that fails is
// called again with the same entries, and nothing after them counts as
// applied meanwhile.
func testApply(t *testing.T, newLog func(t *testing.T, opts Options) *Log) {
	a := newApplier()
	l := newLog(t, Options{Apply: a})
	ctx := t.Context()
	_, start, err := l.Read(ctx, "now", all, 10)
	if err != nil {
		t.Fatal(err)
	}
	a.held.Store(true)
	appended := make(chan error, 1)
	go func() { // ends once the entries are applied (the ring), or at once
		appended <- l.Append(ctx, SourceSandbox, []sources.Change{change("archive", "i1", sources.OpInsert), change("desks", "d1", sources.OpUpdate)})
	}()
	first := recv(t, a.entered)
	if got := ids(first); !slices.Equal(got, []string{"items/i1 insert", "desks/d1 update"}) {
		t.Fatalf("the applier got %v", got)
	}
	last := first[len(first)-1].Token
	waited := make(chan error, 1)
	go func() { waited <- l.WaitApplied(ctx, last) }() // ends once applied
	// Not applied: not handed out.
	if entries, next, err := l.Read(ctx, start, all, 10); err != nil || len(entries) != 0 || next != start {
		t.Errorf("read while applying: %v %q %v; want nothing yet", ids(entries), next, err)
	}
	send(t, a.release, errors.New("not now"))
	again := recv(t, a.entered)
	if diff := cmp.Diff(again, first); diff != "" {
		t.Errorf("the retry (-got +want):\n%s", diff)
	}
	select {
	case err := <-waited:
		t.Fatalf("WaitApplied returned (%v) while the entries were not applied", err)
	default:
	}
	send(t, a.release, nil)
	if err := recv(t, waited); err != nil {
		t.Fatalf("WaitApplied: %v", err)
	}
	if got := a.appliedIDs(); !slices.Equal(got, []string{"items/i1 insert", "desks/d1 update"}) {
		t.Errorf("WaitApplied returned with %v applied", got)
	}
	if err := recv(t, appended); err != nil {
		t.Fatal(err)
	}
	if got, _ := readAll(t, l, start, all); !slices.Equal(ids(got), ids(first)) {
		t.Errorf("read once applied: %v", ids(got))
	}
	// An entry already applied: at once.
	if err := l.WaitApplied(ctx, first[0].Token); err != nil {
		t.Errorf("WaitApplied(an applied entry): %v", err)
	}
}

func TestRing(t *testing.T) {
	testLog(t, func(t *testing.T, opts Options) *Log { return New(nil, opts) })
}

// The ring keeps MaxEntries and Retain; a token older than what it keeps
// has expired, as has one from before a restart.
func TestRingTrims(t *testing.T) {
	c := testkit.NewClock(time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC))
	reg := metrics.NewMetrics()
	l := New(nil, Options{MaxEntries: 3, Retain: time.Hour, Now: c.Now, Metrics: reg})
	_, start, _ := l.Read(t.Context(), "now", all, 1)
	for i := range 5 {
		mustAppend(t, l, SourceSandbox, change("desks", fmt.Sprint("d", i), sources.OpUpdate))
	}
	if _, _, err := l.Read(t.Context(), start, all, 10); !errors.Is(err, sources.ErrExpired) {
		t.Errorf("a token before the trimmed entries: %v, want ErrExpired", err)
	}
	kept, _ := readAll(t, l, "", all)
	if want := []string{"desks/d2 update", "desks/d3 update", "desks/d4 update"}; !slices.Equal(ids(kept), want) {
		t.Errorf("kept %v, want %v", ids(kept), want)
	}
	// The entry before the oldest kept is the newest trimmed: its token
	// still reads everything after it.
	if _, _, err := l.Read(t.Context(), kept[0].Token, all, 10); err != nil {
		t.Errorf("from the oldest kept: %v", err)
	}
	c.Advance(time.Hour + time.Minute)
	mustAppend(t, l, SourceSandbox, change("desks", "d5", sources.OpUpdate))
	if kept, _ := readAll(t, l, "", all); !slices.Equal(ids(kept), []string{"desks/d5 update"}) {
		t.Errorf("after an hour: %v", ids(kept))
	}
	if got := reg.Counter("prodapi_changes_trimmed_total", "").Value(); got != 5 {
		t.Errorf("trimmed %d, want 5", got)
	}
	if got := reg.Counter("prodapi_changes_appended_total", "").Value(SourceSandbox, sources.OpUpdate); got != 6 {
		t.Errorf("appended %d, want 6", got)
	}
	restarted := New(nil, Options{})
	if _, _, err := restarted.Read(t.Context(), kept[0].Token, all, 1); !errors.Is(err, sources.ErrExpired) {
		t.Errorf("a token from before a restart: %v, want ErrExpired", err)
	}
	// Positions stay in order when the clock goes back.
	c.Advance(-time.Minute)
	mustAppend(t, l, SourceSandbox, change("desks", "d6", sources.OpUpdate), change("desks", "d7", sources.OpUpdate))
	if kept, _ := readAll(t, l, "", all); !slices.Equal(ids(kept), []string{"desks/d5 update", "desks/d6 update", "desks/d7 update"}) {
		t.Errorf("after the clock went back: %v", ids(kept))
	}
}

// streamLog returns logs of one fresh stream on a real redis-server, each
// a replica's, closed at the end of the test.
func streamLogs(t *testing.T, url string) func(t *testing.T, opts Options) *Log {
	return func(t *testing.T, opts Options) *Log {
		l, _ := logOn(t, client(t, url), redistier.Options{Timeout: 5 * time.Second}, opts)
		return l
	}
}

// client is a client of the Redis at url, closed at the end of the test.
func client(t *testing.T, url string) redis.UniversalClient {
	t.Helper()
	rdb, err := redistier.NewClient(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// logOn returns a replica's log on rdb, through a tier of topts, closed
// with the tier at the end of the test, and its stream, which counts
// the follower's reads.
func logOn(t *testing.T, rdb redis.UniversalClient, topts redistier.Options, opts Options) (*Log, *countingStream) {
	tier := redistier.New(rdb, topts)
	stream := &countingStream{Stream: tier}
	l := New(stream, opts)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := l.Close(ctx); err != nil {
			t.Error(err)
		}
		tier.Close(ctx)
	})
	return l, stream
}

func TestRealRedisLog(t *testing.T) {
	srv := realserver.StartRedis(t, 0)
	replica := streamLogs(t, srv.URL())
	testLog(t, func(t *testing.T, opts Options) *Log {
		if _, err := srv.Do(t.Context(), "FLUSHALL"); err != nil {
			t.Fatal(err)
		}
		return replica(t, opts)
	})
}

// Three replicas on one stream: an entry appended by one reaches the
// others' followers and waiters; tokens are valid everywhere; a change
// every replica reports (a sandbox edit) is appended once.
func TestRealRedisLogFleet(t *testing.T) {
	srv := realserver.StartRedis(t, 0)
	reg := metrics.NewMetrics()
	newReplica := streamLogs(t, srv.URL())
	// A tail of 2: older positions are read from the stream.
	a, b, c := newReplica(t, Options{Tail: 2, Metrics: reg}), newReplica(t, Options{Tail: 2}), newReplica(t, Options{Tail: 2})
	_, start, err := a.Read(t.Context(), "now", all, 1)
	if err != nil {
		t.Fatal(err)
	}
	woke := make(chan error, 2)
	for _, l := range []*Log{b, c} {
		go func() { woke <- l.Wait(t.Context(), start) }() // ends with the first append
	}
	edit := func(id, version string) sources.Change {
		ch := change("archive", id, sources.OpUpdate)
		ch.Version = version
		return ch
	}
	for _, l := range []*Log{a, b, c} {
		mustAppend(t, l, SourceSandbox, edit("i1", "v1"))
	}
	for range 2 {
		if err := <-woke; err != nil {
			t.Fatal(err)
		}
	}
	// The edit undone is a change again; another document too; then
	// every replica reports both once more.
	for _, l := range []*Log{c, b, a} {
		mustAppend(t, l, SourceSandbox, edit("i1", "v0"), edit("i2", "v1"))
	}
	want := []string{"items/i1 update", "items/i1 update", "items/i2 update"}
	for name, l := range map[string]*Log{"a": a, "b": b, "c": c} {
		caughtUp(t, l, start, 3)
		got, _ := readAll(t, l, start, all)
		if !slices.Equal(ids(got), want) {
			t.Errorf("replica %s: %v, want %v", name, ids(got), want)
		}
		// From the middle, on every replica, with the tokens of another.
		first, _ := readAll(t, a, start, all)
		if rest, _ := readAll(t, l, first[0].Token, all); !slices.Equal(ids(rest), want[1:]) {
			t.Errorf("replica %s after a's first token: %v", name, ids(rest))
		}
	}
	if got := reg.Counter("prodapi_changes_duplicates_total", "").Value(SourceSandbox); got != 2 {
		t.Errorf("a counted %d duplicates, want 2 (it reported the second round last)", got)
	}

	// Redis loses everything: every replica's tokens expire, and the log
	// goes on under a new epoch.
	got, _ := readAll(t, a, start, all)
	old := got[len(got)-1].Token
	if _, err := srv.Do(t.Context(), "FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	mustAppend(t, b, SourceSandbox, edit("i3", "v1"))
	for name, l := range map[string]*Log{"a": a, "b": b, "c": c} {
		testkit.Eventually(t, name+" expiring the old token", func() bool {
			_, _, err := l.Read(t.Context(), old, all, 10)
			return errors.Is(err, sources.ErrExpired)
		})
		testkit.Eventually(t, name+" following the new stream", func() bool {
			got, _ := readAll(t, l, "", all)
			return slices.Equal(ids(got), []string{"items/i3 update"})
		})
	}
}

// A token older than the newest entry trimmed has expired, on every
// replica, whether its follower holds it or not.
func TestRealRedisLogExpires(t *testing.T) {
	srv := realserver.StartRedis(t, 0)
	newReplica := streamLogs(t, srv.URL())
	a := newReplica(t, Options{MaxEntries: 3})
	_, start, _ := a.Read(t.Context(), "now", all, 1)
	for i := range 3 {
		mustAppend(t, a, SourceSandbox, change("desks", fmt.Sprint("d", i), sources.OpUpdate))
	}
	caughtUp(t, a, start, 3)
	first, _, _ := a.Read(t.Context(), start, all, 1)
	mustAppend(t, a, SourceSandbox, change("desks", "d3", sources.OpUpdate), change("desks", "d4", sources.OpUpdate))
	b := newReplica(t, Options{MaxEntries: 3})
	kept, _ := readAll(t, b, "", all)
	if len(kept) != 3 {
		t.Fatalf("kept %v", ids(kept))
	}
	// Once a's follower has the newest, it holds no more than the stream
	// (a replica serves what it holds, even what the stream trimmed).
	if err := a.Wait(t.Context(), kept[1].Token); err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]*Log{"a": a, "b": b} {
		if _, _, err := l.Read(t.Context(), start, all, 10); !errors.Is(err, sources.ErrExpired) {
			t.Errorf("%s: the token before the trimmed entries: %v, want ErrExpired", name, err)
		}
		if _, _, err := l.Read(t.Context(), first[0].Token, all, 10); !errors.Is(err, sources.ErrExpired) {
			t.Errorf("%s: a trimmed entry's token: %v, want ErrExpired", name, err)
		}
		testkit.Eventually(t, name+" holding the newest", func() bool {
			got, _ := readAll(t, l, "", all)
			return slices.Equal(ids(got), []string{"desks/d2 update", "desks/d3 update", "desks/d4 update"})
		})
	}
}

// The log on a Redis Cluster (its keys share a slot, so its scripts run)
// and on a Sentinel set through a failover: appends, followers and reads
// go on, and the followers pick up the promoted master.
func TestRealRedisLogClusterAndSentinel(t *testing.T) {
	t.Run("cluster", func(t *testing.T) {
		c := realserver.StartRedisCluster(t, 3, 0)
		testFleetOf(t, streamLogs(t, c.URL()))
	})
	t.Run("sentinel", func(t *testing.T) {
		s := realserver.StartRedisSentinel(t, 1)
		newReplica := streamLogs(t, s.URL())
		a, b := testFleetOf(t, newReplica)
		m, err := s.Master(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		_, before, _ := b.Read(t.Context(), "now", all, 1)
		m.Kill()
		if _, err := s.WaitFailover(m); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, "an append after the failover", func() bool {
			return a.Append(t.Context(), SourceSandbox, []sources.Change{change("desks", "after", sources.OpUpdate)}) == nil
		})
		// The replica may have missed the newest entries (replication is
		// asynchronous): then the epoch ends, and b's token has expired;
		// else it reads on. Either way what comes after reaches b.
		testkit.Eventually(t, "b following the promoted master", func() bool {
			got, _, err := b.Read(t.Context(), before, all, 100)
			if errors.Is(err, sources.ErrExpired) {
				got, _, err = b.Read(t.Context(), "", all, 100)
			}
			return err == nil && slices.Contains(ids(got), "desks/after update")
		})
	})
}

// testFleetOf appends on one replica and reads on another, through
// newReplica, and returns them.
func testFleetOf(t *testing.T, newReplica func(t *testing.T, opts Options) *Log) (a, b *Log) {
	t.Helper()
	a, b = newReplica(t, Options{}), newReplica(t, Options{})
	_, start, err := b.Read(t.Context(), "now", all, 1)
	if err != nil {
		t.Fatal(err)
	}
	ch := change("archive", "i1", sources.OpUpdate)
	ch.Version = "v1"
	mustAppend(t, a, SourceSandbox, ch, change("desks", "d1", sources.OpInsert))
	mustAppend(t, b, SourceSandbox, ch)
	caughtUp(t, b, start, 2)
	if got, _ := readAll(t, b, start, all); !slices.Equal(ids(got), []string{"items/i1 update", "desks/d1 insert"}) {
		t.Errorf("b read %v", ids(got))
	}
	// a serves what its own follower applied, which may come after b's.
	testkit.Eventually(t, "a reading both entries from the oldest", func() bool {
		got, _ := readAll(t, a, "", all)
		return len(got) == 2
	})
	return a, b
}
