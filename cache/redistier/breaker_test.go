package redistier

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/test/realserver"
)

// slowProxy forwards loopback connections to addr and delays every reply
// chunk by delay: a Redis whose answers arrive after the cache stopped
// waiting, as they do when the process is short of CPU.
func slowProxy(t *testing.T, addr string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() { // ends when the listener closes
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", addr)
			if err != nil {
				client.Close()
				continue
			}
			wg.Go(func() { // ends when either side closes
				io.Copy(server, client)
				server.Close()
			})
			wg.Go(func() { // ends when either side closes
				defer client.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := server.Read(buf)
					if err != nil {
						return
					}
					time.Sleep(delay) // the simulated lateness, not a wait for a condition
					if _, err := client.Write(buf[:n]); err != nil {
						return
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

// Replies that arrive after Timeout, but arrive, do not open the
// breaker: the reads fall back, the tier stays on. (Five such timeouts in
// a row used to open it.)
func TestLateRepliesDoNotOpenTheBreaker(t *testing.T) {
	m := miniredis.RunT(t)
	addr := slowProxy(t, m.Addr(), 50*time.Millisecond)
	rdb := realserver.RedisClient(addr)
	defer rdb.Close()
	clk := newClock()
	tr := New(rdb, Options{Timeout: 5 * time.Millisecond, Now: clk.Now})
	defer closeTier(t, tr)
	ctx := context.Background()
	for i := range 3 * breakerMinCalls {
		key := fmt.Sprintf("k%d", i)
		tr.Get(ctx, key) // gives up after 5ms, most likely
		tr.Set(ctx, key, []byte("v"), time.Minute)
	}
	tr.Settle() // every read judged, every write made
	if got := tr.breaker.current(); got != closed {
		t.Errorf("breaker %v after late replies, want closed", got)
	}
	if n := len(m.Keys()); n == 0 {
		t.Error("no writes reached Redis")
	}
}

// silentClient is a client of a Redis that accepts connections and never
// answers: a hung Redis. At the end of the test the connections close
// first, which ends the client's calls, then the client.
func silentClient(t *testing.T) *redis.Client {
	rdb, _ := silentRedis(t)
	return rdb
}

// A hearing is what a silent Redis was sent: each command's name, upper
// case, then its arguments.
type hearing struct {
	mu       sync.Mutex
	commands [][]string
}

func (h *hearing) heard() [][]string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.commands)
}

// silentRedis is silentClient, and what its Redis hears: the commands
// the tier sent, which a hung real Redis would only read once it woke.
func silentRedis(t *testing.T) (*redis.Client, *hearing) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &hearing{}
	var conns []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Go(func() { // ends when the listener closes
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
			wg.Go(func() { h.listen(conn) }) // ends when the connection closes
		}
	})
	rdb := realserver.RedisClient(ln.Addr().String())
	t.Cleanup(func() { rdb.Close() })
	t.Cleanup(func() { // runs first
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return rdb, h
}

// listen records the commands of one connection (RESP arrays of bulk
// strings, as clients send them) until it closes. It answers nothing but
// the handshake.
func (h *hearing) listen(conn net.Conn) {
	r := bufio.NewReader(conn)
	line := func() (int, bool) {
		s, err := r.ReadString('\n')
		if err != nil || len(s) < 3 {
			return 0, false
		}
		n, err := strconv.Atoi(strings.TrimSpace(s[1:]))
		return n, err == nil
	}
	for {
		n, ok := line()
		if !ok {
			return
		}
		cmd := make([]string, n)
		for i := range cmd {
			size, ok := line()
			if !ok {
				return
			}
			b := make([]byte, size+2)
			if _, err := io.ReadFull(r, b); err != nil {
				return
			}
			cmd[i] = string(b[:size])
		}
		if len(cmd) == 0 {
			continue
		}
		if cmd[0] = strings.ToUpper(cmd[0]); cmd[0] == "HELLO" {
			// The handshake is refused, as by a Redis before 6: the
			// client goes on in RESP2 and sends its commands.
			conn.Write([]byte("-ERR unknown command 'HELLO'\r\n"))
			continue
		}
		h.mu.Lock()
		h.commands = append(h.commands, cmd)
		h.mu.Unlock()
	}
}

// No reply at all within sickAfter: the breaker opens.
func TestSilentRedisOpensTheBreaker(t *testing.T) {
	clk := newClock()
	tr := New(silentClient(t), Options{Timeout: 5 * time.Millisecond, Now: clk.Now})
	for i := range breakerMinCalls {
		if _, ok := tr.Get(context.Background(), fmt.Sprintf("k%d", i)); ok {
			t.Fatal("a silent Redis answered")
		}
	}
	tr.calls.Wait()
	if got := tr.breaker.current(); got != open {
		t.Errorf("breaker %v with a silent Redis, want open", got)
	}
	closeTier(t, tr)
}

// A call the request stopped waiting for says nothing about Redis: it
// neither counts against it nor keeps the half-open probe taken.
func TestUndecidedCallsAreNoVerdict(t *testing.T) {
	clk := newClock()
	b := breaker{now: clk.Now, gauge: newMetrics(metrics.NewMetrics()).breakerState}
	b.set(closed)
	for range 10 * breakerMinCalls {
		if !b.allow() {
			t.Fatal("breaker refused a call after undecided ones")
		}
		b.undecided()
	}
	if got := b.current(); got != closed {
		t.Fatalf("breaker %v after undecided calls, want closed", got)
	}
	b.set(halfOpen)
	if !b.allow() {
		t.Fatal("half-open breaker refused its probe")
	}
	b.undecided()
	if !b.allow() {
		t.Fatal("an undecided probe kept the half-open breaker from probing again")
	}
}

func TestBreaker(t *testing.T) {
	clk := newClock()
	g := newMetrics(metrics.NewMetrics()).breakerState
	b := breaker{now: clk.Now, gauge: g}
	b.set(closed)
	calls := func(n int, ok bool) {
		for range n {
			if b.allow() {
				b.done(ok)
			}
		}
	}
	type state struct {
		s     breakerState
		gauge float64
		allow bool
	}
	check := func(step string, want state) {
		t.Helper()
		got := state{b.current(), g.Value(), false}
		got.allow = b.allow()
		if got != want {
			t.Errorf("%s: got %+v, want %+v", step, got, want)
		}
	}

	// Failures in a row open it, however few calls there were; a success
	// starts the count again.
	calls(40, true)
	calls(breakerConsecutive-1, false)
	check("just under the failures in a row", state{closed, 0, true})
	b.done(true) // the check's allowed call
	calls(breakerConsecutive-1, false)
	check("a success in between", state{closed, 0, true})
	b.done(false)
	check("failures in a row", state{open, 1, false})
	clk.Advance(breakerCooldown)
	if !b.allow() {
		t.Fatal("no probe after the cool-down")
	}
	b.done(true)
	check("a successful probe", state{closed, 0, true})
	b.done(true)

	// Failures among successes, never enough in a row: the share over
	// the window decides. They age out of it.
	alternate := func(n int) {
		for i := range n {
			calls(1, i%2 == 0)
		}
	}
	clk.Advance(breakerWindow + bucketWidth)
	alternate(breakerMinCalls - 2)
	check("too few calls to judge", state{closed, 0, true})
	b.done(true)
	clk.Advance(breakerWindow + bucketWidth)
	alternate(breakerMinCalls - 2)
	check("old failures forgotten", state{closed, 0, true})
	b.done(true)

	// Half the calls of the window failing opens it.
	clk.Advance(breakerWindow + bucketWidth)
	alternate(breakerMinCalls - 1)
	check("just under half failed", state{closed, 0, true})
	b.done(false)
	check("half failed", state{open, 1, false})

	// A call allowed before it opened says nothing once it is open.
	b.done(true)
	check("a late success while open", state{open, 1, false})

	clk.Advance(breakerCooldown)
	check("after the cool-down", state{open, 1, true}) // this allow is the probe
	if b.allow() {
		t.Error("a second call allowed while the probe is out")
	}
	b.done(false)
	check("failed probe", state{open, 1, false})

	clk.Advance(breakerCooldown)
	if !b.allow() {
		t.Fatal("no probe after the second cool-down")
	}
	if g.Value() != 0.5 {
		t.Errorf("gauge %v while probing, want 0.5", g.Value())
	}
	b.done(true)
	check("successful probe", state{closed, 0, true})
	b.done(true)
	// The window starts again: the failures before it opened are gone.
	alternate(breakerMinCalls - 1)
	check("fresh window after closing", state{closed, 0, true})
}

// A Redis that dies opens the breaker after 5 failed calls in a row, made
// one at a time as at low traffic (the share over the window would need
// ten); a probe after each cool-down finds it dead, then back.
func TestKilledRedisOpensTheBreakerAtLowTraffic(t *testing.T) {
	srv := realserver.StartRedis(t, 0)
	rdb, err := NewClient(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	clk := newClock()
	tr := New(rdb, Options{Timeout: 20 * time.Millisecond, Now: clk.Now})
	defer closeTier(t, tr)
	breakerOpensOneCallAtATime(t, tr, srv.Kill)

	// Dead still: the probe fails and the breaker opens again.
	clk.Advance(breakerCooldown)
	tr.Get(tr.WithBudget(context.Background()), "probe")
	tr.Settle()
	if got := tr.breaker.current(); got != open {
		t.Errorf("breaker %v after a failed probe, want open", got)
	}
	// Back on the same port: a probe closes it. go-redis may refuse to
	// dial for a moment after a run of dial errors, so a probe may fail
	// first.
	realserver.StartRedis(t, srv.Port)
	deadline := time.Now().Add(30 * time.Second)
	for tr.breaker.current() != closed {
		if time.Now().After(deadline) {
			t.Fatal("no probe closed the breaker after Redis came back")
		}
		clk.Advance(breakerCooldown)
		tr.Get(tr.WithBudget(context.Background()), "probe")
		tr.Settle()
	}
}

// The same with miniredis closed: it refuses connections.
func TestClosedRedisOpensTheBreakerAtLowTraffic(t *testing.T) {
	e := newEnv(t, func(o *Options) { o.Timeout = 20 * time.Millisecond })
	breakerOpensOneCallAtATime(t, e.t, e.m.Close)
}

// breakerOpensOneCallAtATime makes one good read, calls kill, then reads
// one at a time, each with a budget of its own and judged before the
// next: the fifth failure in a row opens the breaker.
func breakerOpensOneCallAtATime(t *testing.T, tr *Tier, kill func()) {
	t.Helper()
	if _, ok := tr.Get(tr.WithBudget(context.Background()), "k"); !ok {
		t.Fatal("Get on a live Redis failed")
	}
	kill()
	for i := range breakerConsecutive {
		if got := tr.breaker.current(); got != closed {
			t.Fatalf("breaker %v after %d failed calls, want closed", got, i)
		}
		if _, ok := tr.Get(tr.WithBudget(context.Background()), fmt.Sprintf("k%d", i)); ok {
			t.Fatal("a dead Redis answered")
		}
		tr.Settle()
	}
	if got := tr.breaker.current(); got != open {
		t.Errorf("breaker %v after %d failed calls in a row, want open", got, breakerConsecutive)
	}
	if _, ok := tr.Get(tr.WithBudget(context.Background()), "k"); ok {
		t.Error("a read was made with the breaker open")
	}
}

// A Redis that refuses the client's credentials opens the breaker as a
// dead one does: the refusal is a reply, but every call would dial a
// connection again to hear it. Each refusal is an AuthError: no
// password, a wrong one, an unknown user.
func TestRefusedCredentialsOpenTheBreaker(t *testing.T) {
	locked := realserver.StartRedis(t, 0, "--requirepass", "right")
	for _, tc := range []struct{ name, url, want string }{
		{"no password", locked.URL(), "NOAUTH"},
		{"wrong password", "redis://:wrong@" + locked.Addr(), "WRONGPASS"},
		{"unknown user", "redis://someone:right@" + locked.Addr(), "WRONGPASS"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb, err := NewClient(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			defer rdb.Close()
			err = rdb.Ping(context.Background()).Err()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) || !AuthError(err) || !AuthError(fmt.Errorf("wrapped: %w", err)) {
				t.Fatalf("PING: %v; want an AuthError starting %s", err, tc.want)
			}
			// Generous: a busy machine's dial must not look like a
			// timeout, which would be no verdict.
			tr := New(rdb, Options{Timeout: 5 * time.Second, Now: newClock().Now})
			defer closeTier(t, tr)
			for i := range breakerConsecutive {
				if got := tr.breaker.current(); got != closed {
					t.Fatalf("breaker %v after %d refused calls, want closed", got, i)
				}
				if _, ok := tr.Get(tr.WithBudget(context.Background()), "k"); ok {
					t.Fatal("a Redis refusing the credentials answered")
				}
				tr.Settle()
			}
			if got := tr.breaker.current(); got != open {
				t.Errorf("breaker %v after %d refused calls in a row, want open", got, breakerConsecutive)
			}
		})
	}
}

// Other errors are no AuthError: other replies (Redis is there, and
// reads go on when only writes fail) and failed connections.
func TestAuthErrorIsOnlyTheRefusal(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := realserver.RedisClient(m.Addr())
	defer rdb.Close()
	ctx := context.Background()
	m.SetError("OOM command not allowed when used memory > 'maxmemory'")
	oom := rdb.Set(ctx, "k", "v", 0).Err()
	m.SetError("")
	rdb.LPush(ctx, "list", "x")
	wrongType := rdb.Get(ctx, "list").Err()
	m.Close()
	refused := rdb.Get(ctx, "k").Err()
	for name, err := range map[string]error{"OOM": oom, "WRONGTYPE": wrongType, "connection refused": refused, "none": nil} {
		if name != "none" && err == nil {
			t.Errorf("%s: no error", name)
		}
		if AuthError(err) {
			t.Errorf("%s: %v is an AuthError", name, err)
		}
	}
}
