package changelog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/realserver"
	"github.com/prodapi/prodapi/test/testkit"
)

// A countingStream counts the follower's reads that succeeded.
type countingStream struct {
	Stream
	reads atomic.Int64
}

func (c *countingStream) StreamRead(ctx context.Context, after string, block time.Duration, count int) ([]redistier.StreamRecord, error) {
	recs, err := c.Stream.StreamRead(ctx, after, block, count)
	if err == nil {
		c.reads.Add(1)
	}
	return recs, err
}

// miniLogs returns logs on one miniredis, each a replica's, closed at
// the end of the test, and the miniredis.
func miniLogs(t *testing.T) (*miniredis.Miniredis, func(t *testing.T, opts Options) *Log) {
	m := miniredis.RunT(t)
	return m, func(t *testing.T, opts Options) *Log {
		l, _ := miniLog(t, m, opts)
		return l
	}
}

func miniLog(t *testing.T, m *miniredis.Miniredis, opts Options) (*Log, *countingStream) {
	rdb := realserver.RedisClient(m.Addr())
	t.Cleanup(func() { rdb.Close() })
	return logOn(t, rdb, redistier.Options{Timeout: 5 * time.Second}, opts)
}

func TestMiniredisLog(t *testing.T) {
	m, replica := miniLogs(t)
	testLog(t, func(t *testing.T, opts Options) *Log {
		m.FlushAll()
		return replica(t, opts)
	})
}

// mustFail checks that err wraps want.
func mustFail(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: %v, want %v", what, err, want)
	}
}

// While the follower cannot read the stream the log is unavailable, not
// quiet: Read, Wait and WaitApplied say so, and a wait under way wakes to
// say so. A quiet log, read after read with nothing new, is available.
// Once Redis is back the follower reads it again.
func TestMiniredisLogUnavailable(t *testing.T) {
	m := miniredis.RunT(t)
	reg := metrics.NewMetrics()
	l, stream := miniLog(t, m, Options{Metrics: reg})
	ctx := t.Context()
	_, start, err := l.Read(ctx, "now", all, 10)
	if err != nil {
		t.Fatal(err)
	}
	// Quiet: read after read, nothing new, and nothing unavailable.
	reads := stream.reads.Load()
	testkit.Eventually(t, "three quiet reads", func() bool { return stream.reads.Load() >= reads+3 })
	if entries, next, err := l.Read(ctx, start, all, 10); err != nil || len(entries) != 0 || next != start {
		t.Errorf("a quiet log: %v %q %v", entries, next, err)
	}
	if err := l.WaitApplied(ctx, start); err != nil {
		t.Errorf("WaitApplied on a quiet log: %v", err)
	}

	woke := make(chan error, 1)
	go func() { woke <- l.Wait(ctx, start) }() // ends when the follower loses Redis
	addr := m.Addr()
	m.Close()
	mustFail(t, "a wait under way when Redis went", recv(t, woke), sources.ErrUnavailable)
	_, _, err = l.Read(ctx, start, all, 10)
	mustFail(t, "Read", err, sources.ErrUnavailable)
	_, _, err = l.Read(ctx, "now", all, 10)
	mustFail(t, "Read(now)", err, sources.ErrUnavailable)
	_, _, err = l.Read(ctx, "", all, 10)
	mustFail(t, "Read()", err, sources.ErrUnavailable)
	mustFail(t, "Wait", l.Wait(ctx, start), sources.ErrUnavailable)
	mustFail(t, "WaitApplied", l.WaitApplied(ctx, start), sources.ErrUnavailable)
	if got := reg.Gauge("prodapi_changes_following", "").Value(); got != 0 {
		t.Errorf("following %v while Redis is down", got)
	}

	// A Redis back on the same address (miniredis cannot block again
	// after a restart: a new one, empty).
	m2 := miniredis.NewMiniRedis()
	if err := m2.StartAddr(addr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m2.Close)
	var now string
	testkit.Eventually(t, "the follower reading Redis again", func() bool {
		_, now, err = l.Read(ctx, "now", all, 10)
		return err == nil
	})
	mustFail(t, "a token of the Redis that was lost", l.WaitApplied(ctx, start), sources.ErrExpired)
	mustAppend(t, l, SourceSandbox, change("desks", "d1", sources.OpUpdate))
	caughtUp(t, l, now, 1)
	if got := reg.Gauge("prodapi_changes_following", "").Value(); got != 1 {
		t.Errorf("following %v once Redis is back", got)
	}
}

// An applier that goes on failing makes the replica unavailable once it
// has failed for applyGrace: it cannot hand out what comes next.
func TestMiniredisLogApplyFailing(t *testing.T) {
	m := miniredis.RunT(t)
	clock := testkit.NewClock(time.Now())
	a := newApplier()
	reg := metrics.NewMetrics()
	following := func() float64 { return reg.Gauge("prodapi_changes_following", "").Value() }
	l, _ := miniLog(t, m, Options{Apply: a, Now: clock.Now, Metrics: reg})
	ctx := t.Context()
	_, start, err := l.Read(ctx, "now", all, 10)
	if err != nil {
		t.Fatal(err)
	}
	a.held.Store(true)
	mustAppend(t, l, SourceSandbox, change("desks", "d1", sources.OpUpdate))
	recv(t, a.entered)
	send(t, a.release, errors.New("broken"))
	recv(t, a.entered)
	if _, _, err := l.Read(ctx, start, all, 10); err != nil {
		t.Errorf("after one failure: %v; want no error yet (a reload may fail once)", err)
	}
	clock.Advance(applyGrace)
	send(t, a.release, errors.New("broken"))
	recv(t, a.entered)
	_, _, err = l.Read(ctx, start, all, 10)
	mustFail(t, "Read while the applier has failed for applyGrace", err, sources.ErrUnavailable)
	if got := following(); got != 0 {
		t.Errorf("prodapi_changes_following = %v while /changes is unavailable, want 0", got)
	}
	send(t, a.release, nil)
	testkit.Eventually(t, "available once applied", func() bool {
		entries, _, err := l.Read(ctx, start, all, 10)
		return err == nil && len(entries) == 1
	})
	if got := following(); got != 1 {
		t.Errorf("prodapi_changes_following = %v once applied again, want 1", got)
	}
}

// rewriteStream replaces the stream's entries with keep (the meta hash
// stays: the same epoch), atomically, as a Redis restarted on
// persistence that lacks the newest writes would have it.
func rewriteStream(t *testing.T, rdb redis.Cmdable, keep []redistier.StreamRecord) {
	t.Helper()
	args := []any{}
	for _, r := range keep {
		args = append(args, r.ID, len(r.Fields))
		for _, f := range r.Fields {
			args = append(args, f)
		}
	}
	const script = `
redis.call('DEL', KEYS[1])
local i = 1
while i <= #ARGV do
  local id, n = ARGV[i], tonumber(ARGV[i + 1])
  redis.call('XADD', KEYS[1], id, unpack(ARGV, i + 2, i + 1 + n))
  i = i + 2 + n
end
return 1`
	if err := rdb.Eval(t.Context(), script, []string{redistier.Prefix + "{changes}:stream"}, args...).Err(); err != nil {
		t.Fatal(err)
	}
}

// streamRecords reads the whole stream.
func streamRecords(t *testing.T, rdb redis.Cmdable) []redistier.StreamRecord {
	t.Helper()
	msgs, err := rdb.XRange(t.Context(), redistier.Prefix+"{changes}:stream", "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var out []redistier.StreamRecord
	for _, m := range msgs {
		r := redistier.StreamRecord{ID: m.ID}
		for k, v := range m.Values {
			r.Fields = append(r.Fields, k, v.(string))
		}
		out = append(out, r)
	}
	return out
}

// A stream that lost entries a follower had read ends its epoch: every
// token of the old one expires on every replica, and the followers go
// on in the new one. Lost as a restart on old persistence has it (the
// last id older than what was read), and with entries appended since
// (the last id newer, but an entry read is missing).
func TestMiniredisLogLostTail(t *testing.T) {
	for _, appendAfter := range []bool{false, true} {
		name := "nothing appended since"
		if appendAfter {
			name = "appended since"
		}
		t.Run(name, func(t *testing.T) {
			m := miniredis.RunT(t)
			reg := metrics.NewMetrics()
			a, _ := miniLog(t, m, Options{Metrics: reg})
			b, _ := miniLog(t, m, Options{Metrics: reg})
			_, start, err := b.Read(t.Context(), "now", all, 10)
			if err != nil {
				t.Fatal(err)
			}
			mustAppend(t, a, SourceSandbox, change("desks", "d1", sources.OpUpdate), change("desks", "d2", sources.OpUpdate))
			for _, l := range []*Log{a, b} {
				caughtUp(t, l, start, 2)
			}
			read, _ := readAll(t, b, start, all)
			rdb := realserver.RedisClient(m.Addr())
			defer rdb.Close()
			recs := streamRecords(t, rdb)
			rewriteStream(t, rdb, recs[:len(recs)-1]) // d2 lost
			if appendAfter {
				mustAppend(t, a, SourceSandbox, change("desks", "d3", sources.OpUpdate))
			}
			expires(t, map[string]*Log{"a": a, "b": b}, start, read[0].Token, read[1].Token)
			if got := reg.Counter("prodapi_changes_epochs_ended_total", "").Value(); got != 1 {
				t.Errorf("epochs ended %d, want 1 (one replica ends it, the other finds it ended)", got)
			}
			if got := goesOn(t, a, b, "d4"); !slices.Equal(ids(got), []string{"desks/d4 update"}) {
				t.Errorf("the new epoch: %v", ids(got))
			}
		})
	}
}

// twoEntries takes reader's end, appends updates of desks d1 and d2 on
// appender, and returns that end and the two entries once reader has
// them.
func twoEntries(t *testing.T, appender, reader *Log) (string, []sources.LogEntry) {
	t.Helper()
	_, start, err := reader.Read(t.Context(), "now", all, 10)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, appender, SourceSandbox, change("desks", "d1", sources.OpUpdate), change("desks", "d2", sources.OpUpdate))
	caughtUp(t, reader, start, 2)
	read, _ := readAll(t, reader, start, all)
	return start, read
}

// A downStream fails the follower's reads (StreamRead, StreamSnapshot)
// while down is set, as a lost connection would, until the follower
// reads the stream again; appends and looks go through.
type downStream struct {
	Stream
	down atomic.Bool
}

var errDown = errors.New("the follower's connection is down")

func (d *downStream) StreamRead(ctx context.Context, after string, block time.Duration, count int) ([]redistier.StreamRecord, error) {
	if d.down.Load() {
		return nil, errDown
	}
	return d.Stream.StreamRead(ctx, after, block, count)
}

func (d *downStream) StreamSnapshot(ctx context.Context, n int) (redistier.StreamState, []redistier.StreamRecord, error) {
	if d.down.Load() {
		return redistier.StreamState{}, nil, errDown
	}
	return d.Stream.StreamSnapshot(ctx, n)
}

// A stream that lost the entries a follower read, then took an append
// from the same replica before the follower read it again (its feed
// retrying what failed while Redis was down), still ends its epoch: the
// stream's last id is past what the follower read, and the newest entry
// this replica appended is there, but the newest the follower read is
// not. A token of a lost entry never reads the new entry as if nothing
// were missing between.
func TestMiniredisLogLostTailAppendedBeforeResync(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := realserver.RedisClient(m.Addr())
	t.Cleanup(func() { rdb.Close() })
	tier := redistier.New(rdb, redistier.Options{Timeout: 5 * time.Second})
	ds := &downStream{Stream: tier}
	reg := metrics.NewMetrics()
	a := newApplier()
	l := New(ds, Options{Apply: a, Metrics: reg})
	t.Cleanup(func() {
		if err := l.Close(context.Background()); err != nil {
			t.Error(err)
		}
		tier.Close(context.Background())
	})
	ctx := t.Context()
	start, read := twoEntries(t, l, l)

	ds.down.Store(true)
	testkit.Eventually(t, "the follower lost the stream", func() bool {
		_, _, err := l.Read(ctx, read[1].Token, all, 10)
		return errors.Is(err, sources.ErrUnavailable)
	})
	recs := streamRecords(t, rdb)
	rewriteStream(t, rdb, recs[:len(recs)-1]) // d2 lost
	mustAppend(t, l, SourceSandbox, change("desks", "d3", sources.OpUpdate))
	ds.down.Store(false)

	for _, tok := range []string{start, read[0].Token, read[1].Token} {
		testkit.Eventually(t, "the old epoch's "+tok+" expired", func() bool {
			got, _, err := l.Read(ctx, tok, all, 10)
			if err == nil && len(got) > 0 {
				t.Fatalf("Read(%s) after the lost tail: %v, want a 410", tok, ids(got))
			}
			return errors.Is(err, sources.ErrExpired)
		})
	}
	if got := reg.Counter("prodapi_changes_epochs_ended_total", "").Value(); got != 1 {
		t.Errorf("epochs ended %d, want 1", got)
	}
	testkit.Eventually(t, "the applier told of the ended epoch", func() bool { return a.ended.Load() == 1 })
}

// An epoch that ends under a follower is told to its applier
// (EpochEnded) before the new epoch's entries, once, so that what was
// written with the lost entries (the cache's shared invalidations) is
// dropped too; the follower's first look at the stream is no ended
// epoch, nor is an epoch it goes on following.
func TestMiniredisLogEpochEnded(t *testing.T) {
	m := miniredis.RunT(t)
	a := newApplier()
	l, _ := miniLog(t, m, Options{Apply: a})
	_, start, err := l.Read(t.Context(), "now", all, 10)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, SourceSandbox, change("desks", "d1", sources.OpUpdate), change("desks", "d2", sources.OpUpdate))
	caughtUp(t, l, start, 2)
	if n := a.ended.Load(); n != 0 {
		t.Fatalf("EpochEnded called %d times while the epoch goes on", n)
	}
	rdb := realserver.RedisClient(m.Addr())
	defer rdb.Close()
	recs := streamRecords(t, rdb)
	rewriteStream(t, rdb, recs[:len(recs)-1]) // d2 lost
	expires(t, map[string]*Log{"l": l}, start)
	testkit.Eventually(t, "the applier told of the ended epoch", func() bool { return a.ended.Load() == 1 })
	_, now, err := l.Read(t.Context(), "now", all, 10)
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, l, SourceSandbox, change("desks", "d3", sources.OpUpdate))
	caughtUp(t, l, now, 1)
	if n := a.ended.Load(); n != 1 {
		t.Errorf("EpochEnded called %d times, want once", n)
	}
}

// A tail lost before any follower read it ends the epoch too: the
// replica that appended it looks for the newest entry it appended, its
// follower after each read and its next append first. Here the one
// replica's follower is held applying d2 while d3 is appended, and the
// stream loses d3 (only d3: what the follower read is all there).
func TestMiniredisLogLostUnreadTail(t *testing.T) {
	for _, appendAfter := range []bool{false, true} {
		name := "found by the follower"
		if appendAfter {
			name = "found by the next append"
		}
		t.Run(name, func(t *testing.T) {
			m := miniredis.RunT(t)
			reg := metrics.NewMetrics()
			a := newApplier()
			l, _ := miniLog(t, m, Options{Apply: a, Metrics: reg})
			ctx := t.Context()
			_, start, err := l.Read(ctx, "now", all, 10)
			if err != nil {
				t.Fatal(err)
			}
			mustAppend(t, l, SourceSandbox, change("desks", "d1", sources.OpUpdate))
			caughtUp(t, l, start, 1)
			a.held.Store(true)
			mustAppend(t, l, SourceSandbox, change("desks", "d2", sources.OpUpdate))
			recv(t, a.entered) // the follower read d2, and applies it
			mustAppend(t, l, SourceSandbox, change("desks", "d3", sources.OpUpdate))
			rdb := realserver.RedisClient(m.Addr())
			defer rdb.Close()
			recs := streamRecords(t, rdb)
			rewriteStream(t, rdb, recs[:len(recs)-1]) // d3 lost, unread
			if appendAfter {
				mustAppend(t, l, SourceSandbox, change("desks", "d4", sources.OpUpdate))
			}
			a.held.Store(false)
			send(t, a.release, nil)
			expires(t, map[string]*Log{"l": l}, start)
			if got := reg.Counter("prodapi_changes_epochs_ended_total", "").Value(); got != 1 {
				t.Errorf("epochs ended %d, want 1", got)
			}
		})
	}
}

// redisAOF starts a redis-server with append-only persistence (every
// write on disk before its reply) in dir, on port (0: a free one).
func redisAOF(t *testing.T, dir string, port int) *realserver.Redis {
	return realserver.StartRedis(t, port, "--dir", dir, "--appendonly", "yes", "--appendfsync", "always")
}

// Redis killed, then restarted on an append-only file that lacks the
// newest entries: every token of the old epoch is 410 (those of entries
// lost and those before them), the followers go on in a new epoch, and
// while Redis is down the log is unavailable, not quiet.
func TestRealRedisLogRestartOnOldPersistence(t *testing.T) {
	dir := t.TempDir()
	srv := redisAOF(t, dir, 0)
	newReplica := streamLogs(t, srv.URL())
	a, b := newReplica(t, Options{}), newReplica(t, Options{})
	ctx := t.Context()
	start, _ := twoEntries(t, a, b)
	// The persistence as it is now, before the tail.
	saved := filepath.Join(t.TempDir(), "aof")
	if out, err := exec.Command("cp", "-a", filepath.Join(dir, "appendonlydir"), saved).CombinedOutput(); err != nil {
		t.Fatalf("copying the append-only files: %v %s", err, out)
	}
	mustAppend(t, a, SourceSandbox, change("desks", "d3", sources.OpUpdate), change("desks", "d4", sources.OpUpdate))
	caughtUp(t, b, start, 4)
	read, _ := readAll(t, b, start, all)

	woke := make(chan error, 1)
	go func() { woke <- b.Wait(ctx, read[len(read)-1].Token) }() // ends when b loses Redis
	srv.Kill()
	mustFail(t, "a wait under way when Redis went", recv(t, woke), sources.ErrUnavailable)
	for name, l := range map[string]*Log{"a": a, "b": b} {
		testkit.Eventually(t, name+" unavailable", func() bool {
			_, _, err := l.Read(ctx, read[1].Token, all, 10)
			return errors.Is(err, sources.ErrUnavailable)
		})
		mustFail(t, name+": Wait", l.Wait(ctx, read[1].Token), sources.ErrUnavailable)
		mustFail(t, name+": WaitApplied", l.WaitApplied(ctx, read[1].Token), sources.ErrUnavailable)
	}

	if err := os.RemoveAll(filepath.Join(dir, "appendonlydir")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", saved, filepath.Join(dir, "appendonlydir")).CombinedOutput(); err != nil {
		t.Fatalf("restoring the append-only files: %v %s", err, out)
	}
	redisAOF(t, dir, srv.Port)
	expires(t, map[string]*Log{"a": a, "b": b}, start, read[0].Token, read[1].Token, read[3].Token)
	goesOn(t, a, b, "d5")
	if got, _ := readAll(t, b, "", all); !slices.Equal(ids(got), []string{"desks/d5 update"}) {
		t.Errorf("the new epoch from its start: %v", ids(got))
	}
}

// A CLIENT PAUSE WRITE (a failover's pause) holds appends, not reads:
// the followers go on, the log stays available, and appends retried as
// the feeds retry them all reach the log, in order, once.
func TestRealRedisLogWritePause(t *testing.T) {
	srv := realserver.StartRedis(t, 0)
	// A short timeout: an append held by the pause fails soon.
	reg := metrics.NewMetrics()
	a, _ := logOn(t, client(t, srv.URL()), redistier.Options{Timeout: 100 * time.Millisecond}, Options{Metrics: reg})
	b := streamLogs(t, srv.URL())(t, Options{})
	ctx := t.Context()
	_, start, err := b.Read(ctx, "now", all, 10)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Do(context.Background(), "CLIENT", "UNPAUSE") })
	appended := make(chan struct{})
	go func() { // ends once the appends are in, as a feed retries them
		defer close(appended)
		for i := range 3 {
			for a.Append(ctx, SourceSandbox, []sources.Change{change("desks", fmt.Sprint("d", i), sources.OpUpdate)}) != nil {
				if ctx.Err() != nil {
					return
				}
			}
		}
	}()
	// Held, and the log still answers (quietly) on both replicas.
	testkit.Eventually(t, "an append failed during the pause", func() bool {
		return reg.Counter("prodapi_changes_append_errors_total", "").Value(SourceSandbox) > 0
	})
	// (a's reads have 100ms too, which a busy machine can spend: the
	// pause, 60s, outlasts any retry.)
	for name, l := range map[string]*Log{"a": a, "b": b} {
		var entries []sources.LogEntry
		var err error
		testkit.Eventually(t, name+" answering during the pause", func() bool {
			entries, _, err = l.Read(ctx, start, all, 10)
			return err == nil
		})
		if len(entries) != 0 {
			t.Errorf("%s during the pause: %v", name, ids(entries))
		}
	}
	if _, err := srv.Do(ctx, "CLIENT", "UNPAUSE"); err != nil {
		t.Fatal(err)
	}
	<-appended
	caughtUp(t, b, start, 3)
	if got, _ := readAll(t, b, start, all); !slices.Equal(ids(got), []string{"desks/d0 update", "desks/d1 update", "desks/d2 update"}) {
		t.Errorf("after the pause: %v", ids(got))
	}
}

// A position the stream lost ends the epoch wherever a client sends it,
// even on a replica whose follower never read the lost entries and whose
// replica appended none of them (the one that served them is dead): the
// stream names no entry there and trimmed none, so the position is a
// 410, never a 200 with the entries appended since and the lost ones
// skipped. In front of the tail, and older than it.
func TestMiniredisLogLostRangeUnread(t *testing.T) { testLostRangeUnread(t, miniAddr) }

func TestRealRedisLogLostRangeUnread(t *testing.T) { testLostRangeUnread(t, realAddr) }

// miniAddr and realAddr start a Redis of the test's own (miniredis, a
// redis-server) and return its address.
func miniAddr(t *testing.T) string { return miniredis.RunT(t).Addr() }
func realAddr(t *testing.T) string { return realserver.StartRedis(t, 0).Addr() }

// addrLog is a replica's log on the Redis at addr.
func addrLog(t *testing.T, addr string, opts Options) *Log {
	rdb := realserver.RedisClient(addr)
	t.Cleanup(func() { rdb.Close() })
	l, _ := logOn(t, rdb, redistier.Options{Timeout: 5 * time.Second}, opts)
	return l
}

// endOf is where l stands now, as since=now answers.
func endOf(t *testing.T, l *Log) string {
	t.Helper()
	_, end, err := l.Read(t.Context(), "now", all, 10)
	if err != nil {
		t.Fatal(err)
	}
	return end
}

// testLostRangeUnread runs TestMiniredisLogLostRangeUnread on a Redis
// at server(t), one of its own.
func testLostRangeUnread(t *testing.T, server func(t *testing.T) string) {
	for _, tailLen := range []int{0, 1} {
		t.Run(fmt.Sprintf("tail %d", tailLen), func(t *testing.T) {
			addr := server(t)
			reg := metrics.NewMetrics()
			a := addrLog(t, addr, Options{Metrics: reg})
			start := endOf(t, a)
			mustAppend(t, a, SourceSandbox, change("desks", "d1", sources.OpUpdate),
				change("desks", "d2", sources.OpUpdate), change("desks", "d3", sources.OpUpdate))
			caughtUp(t, a, start, 3)
			read, _ := readAll(t, a, start, all)
			if err := a.Close(t.Context()); err != nil { // a dies: nobody else read d2 and d3
				t.Fatal(err)
			}
			rdb := realserver.RedisClient(addr)
			defer rdb.Close()
			recs := streamRecords(t, rdb)
			rewriteStream(t, rdb, recs[:1]) // d2 and d3 lost

			b := addrLog(t, addr, Options{Metrics: reg, Tail: tailLen})
			now := endOf(t, b)
			mustAppend(t, b, SourceSandbox, change("desks", "d4", sources.OpUpdate), change("desks", "d5", sources.OpUpdate))
			caughtUp(t, b, now, 2)
			for _, lost := range read[1:] {
				got, _, err := b.Read(t.Context(), lost.Token, all, 10)
				if !errors.Is(err, sources.ErrExpired) {
					t.Fatalf("Read(%s, lost) on a replica that never read it: %v, %v; want a 410", lost.ID, ids(got), err)
				}
			}
			expires(t, map[string]*Log{"b": b}, start, read[0].Token, now)
			if got := reg.Counter("prodapi_changes_epochs_ended_total", "").Value(); got != 1 {
				t.Errorf("epochs ended %d, want 1", got)
			}
			testkit.Eventually(t, "b follows the new epoch", func() bool {
				return endOf(t, b)[:epochLen] != start[:epochLen]
			})
			if got := goesOn(t, b, b, "d6"); !slices.Equal(ids(got), []string{"desks/d6 update"}) {
				t.Errorf("the new epoch: %v", ids(got))
			}
		})
	}
}

// The positions the log hands out that name no entry of the stream go on
// (200), in front of the tail and older than it, and end no epoch: a new
// stream's end (its creation marker, the trim mark), and the end of a
// read whose last entries the token may not read (they name entries, but
// the token never read them).
func TestMiniredisLogPositionsNamingNoEntry(t *testing.T) { testPositionsNamingNoEntry(t, miniAddr) }

func TestRealRedisLogPositionsNamingNoEntry(t *testing.T) { testPositionsNamingNoEntry(t, realAddr) }

// testPositionsNamingNoEntry runs TestMiniredisLogPositionsNamingNoEntry
// on a Redis at server(t), one of its own.
func testPositionsNamingNoEntry(t *testing.T, server func(t *testing.T) string) {
	for _, tailLen := range []int{0, 1} {
		t.Run(fmt.Sprintf("tail %d", tailLen), func(t *testing.T) {
			addr := server(t)
			reg := metrics.NewMetrics()
			a := addrLog(t, addr, Options{Metrics: reg})
			b := addrLog(t, addr, Options{Metrics: reg, Tail: tailLen})
			start := endOf(t, b)
			mustAppend(t, a, SourceSandbox, change("desks", "d1", sources.OpUpdate), change("archive", "i1", sources.OpUpdate))
			caughtUp(t, b, start, 2)
			desks, hidden := readAll(t, b, start, []string{"desks"})
			if !slices.Equal(ids(desks), []string{"desks/d1 update"}) {
				t.Fatalf("desks after the new stream's end: %v", ids(desks))
			}
			mustAppend(t, a, SourceSandbox, change("desks", "d2", sources.OpUpdate), change("desks", "d3", sources.OpUpdate))
			caughtUp(t, b, start, 4)
			for _, tok := range []string{start, hidden} {
				if _, _, err := b.Read(t.Context(), tok, all, 1); err != nil {
					t.Errorf("Read(%s): %v, want the entries after it", tok, err)
				}
			}
			if got, _ := readAll(t, b, hidden, []string{"desks"}); !slices.Equal(ids(got), []string{"desks/d2 update", "desks/d3 update"}) {
				t.Errorf("desks after the hidden entry: %v", ids(got))
			}
			if got := reg.Counter("prodapi_changes_epochs_ended_total", "").Value(); got != 0 {
				t.Errorf("epochs ended %d, want none", got)
			}
		})
	}
}
