package changes_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/server/changes"
	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/testkit"
)

// clientToken is an Authorization header of client's, granting every
// scope for an hour from testNow.
func clientToken(t *testing.T, client string) string {
	t.Helper()
	tok, err := server.MintToken(testSecret, client, sources.AllScopes, time.Hour, testNow)
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + tok
}

// capRefusals is prodapi_cap_refusals_total{cap}.
func (cs *changesServer) capRefusals(cap string) uint64 {
	return cs.metrics.CapRefusals().Value(cap)
}

// longPoll sends a long poll on a connection of its own and returns
// where that connection comes from (the server's side of it has this as
// its remote address) and the answer, when it comes.
func (cs *changesServer) longPoll(t *testing.T, target, auth string) (net.Addr, chan response) {
	t.Helper()
	c, err := net.Dial("tcp", cs.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	req, _ := http.NewRequest("GET", cs.URL+"/prodapi/v1/changes"+target, nil)
	req.Header.Set("Authorization", auth)
	if err := req.Write(c); err != nil {
		t.Fatal(err)
	}
	ch := make(chan response, 1)
	go func() { // ends when the answer comes, or the connection closes
		res, err := http.ReadResponse(bufio.NewReader(c), req)
		if err != nil {
			ch <- response{status: -1, body: err.Error()}
			return
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.Close { // net/http takes Connection: close out of the header
			res.Header.Set("Connection", "close")
		}
		ch <- response{res.StatusCode, res.Header, string(body)}
	}()
	return c.LocalAddr(), ch
}

// refused checks a refusal at a cap: its status, Retry-After and words.
func refused(t *testing.T, what string, res response, status int, msg string) {
	t.Helper()
	if res.status != status || res.header.Get("Retry-After") != "5" || res.body != string(httperr.Body(status, msg)) {
		t.Errorf("%s: %d %v %s, want %d with Retry-After 5: %s", what, res.status, res.header, res.body, status, msg)
	}
}

// A replica holds at most MaxPolls long polls waiting: beyond, a long
// poll that would wait is a 503 with Retry-After; one with entries to
// answer at once, and a stream, are not long polls waiting.
func TestChangesPollLimit(t *testing.T) {
	cs := newChangesServer(t, func(o *changes.Options) { o.MaxPolls = 1 })
	all := token(t, sources.AllScopes...)
	_, first := cs.longPoll(t, "?since=now&wait=60", all)
	cs.log.AwaitWaiter(t)
	res, _ := cs.get(t, "?since=now&wait=60", all)
	refused(t, "a second long poll", res, 503, changes.MsgTooManyPolls)
	if got := cs.capRefusals("changes_polls"); got != 1 {
		t.Errorf("cap_refusals{changes_polls} = %d, want 1", got)
	}
	if res, _ := cs.openStream(t, "?since=now", all); res.StatusCode != 200 {
		t.Errorf("a stream beside the long polls: %d", res.StatusCode)
	}
	cs.log.Append("items", "a", sources.OpUpdate, changeAt)
	if res, p := cs.get(t, "?since="+cs.pos("0-0")+"&wait=60", all); res.status != 200 || len(p.Items) != 1 {
		t.Errorf("a long poll answered at once: %d %s", res.status, res.body)
	}
	if res := <-first; res.status != 200 {
		t.Errorf("the first long poll: %d %s", res.status, res.body)
	}
	// Its place is free again: a long poll waits for the next entry (or
	// has it at once, should it come first).
	_, again := cs.longPoll(t, "?since="+cs.pos("1-0")+"&wait=60", all)
	cs.log.Append("items", "b", sources.OpUpdate, changeAt)
	var p changesPage
	if res := <-again; res.status != 200 || json.Unmarshal([]byte(res.body), &p) != nil || len(p.Items) != 1 {
		t.Errorf("a long poll after the first ended: %d %s", res.status, res.body)
	}
}

// A client holds at most ClientMaxWaits streams, long polls and
// min_position waits together: beyond, 429 with Retry-After, whatever
// it opens; another client is not held back; a wait that ends frees its
// place.
func TestChangesClientWaits(t *testing.T) {
	cs, _, _ := newVersionsServer(t, func(o *changes.Options) { o.ClientMaxWaits = 3 })
	greedy, calm := clientToken(t, "greedy"), clientToken(t, "calm")
	// A min_position wait: the log holds an entry this replica has not
	// applied.
	cs.log.Hold()
	pos := cs.pos(cs.log.Append("desks", "d1", sources.OpUpdate, changeAt))
	fresh := make(chan response, 1)
	go func() { // ends when the read is answered
		fresh <- cs.do(t, "GET", "/prodapi/v1/desks/d1?min_position="+pos, "Authorization", greedy)
	}()
	cs.log.AwaitWaiter(t)
	// A stream and a long poll.
	if res, _ := cs.openStream(t, "?since=now", greedy); res.StatusCode != 200 {
		t.Fatalf("first stream: %d", res.StatusCode)
	}
	cs.log.AwaitWaiter(t)
	_, poll := cs.longPoll(t, "?since=now&wait=60", greedy)
	cs.log.AwaitWaiter(t)

	res2, _ := cs.get(t, "", greedy, "Accept", "text/event-stream")
	refused(t, "a stream beyond the cap", res2, 429, changes.MsgTooManyWaits)
	res2, _ = cs.get(t, "?since=now&wait=30", greedy)
	refused(t, "a long poll beyond the cap", res2, 429, changes.MsgTooManyWaits)
	res2 = cs.do(t, "GET", "/prodapi/v1/desks/d1?min_position="+pos, "Authorization", greedy)
	refused(t, "a min_position wait beyond the cap", res2, 429, changes.MsgTooManyWaits)
	if got := cs.capRefusals("client_waits"); got != 3 {
		t.Errorf("cap_refusals{client_waits} = %d, want 3", got)
	}
	// What does not wait is not capped.
	if res, _ := cs.get(t, "?since=now", greedy); res.status != 200 {
		t.Errorf("a page without wait at the cap: %d", res.status)
	}

	// Another client opens a stream and a long poll.
	if res, _ := cs.openStream(t, "?since=now", calm); res.StatusCode != 200 {
		t.Errorf("another client's stream: %d", res.StatusCode)
	}
	cs.log.AwaitWaiter(t)
	_, calmPoll := cs.longPoll(t, "?since=now&wait=60", calm)
	cs.log.AwaitWaiter(t)

	// The min_position wait and the long polls end: their places are
	// free.
	cs.log.Apply(1)
	if res := <-fresh; res.status != 200 {
		t.Errorf("the min_position read: %d %s", res.status, res.body)
	}
	cs.log.Append("desks", "d1", sources.OpUpdate, changeAt)
	for _, ch := range []chan response{poll, calmPoll} {
		if res := <-ch; res.status != 200 {
			t.Errorf("a long poll: %d %s", res.status, res.body)
		}
	}
	if res, _ := cs.openStream(t, "?since=now", greedy); res.StatusCode != 200 {
		t.Errorf("a stream once places were free: %d", res.StatusCode)
	}
}

// fakeFleet is the fleet's count in memory: other replicas' waiters are
// put in by hand.
type fakeFleet struct {
	mu      sync.Mutex
	waiters map[string][]string // by client
	renewed []map[string][]string
	err     error // every call fails with it when set
}

func (f *fakeFleet) JoinWaiter(_ context.Context, client, id string, max int, lease time.Duration) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return false, f.err
	}
	if lease != changes.WaiterLease || len(f.waiters[client]) >= max {
		return false, nil
	}
	f.waiters[client] = append(f.waiters[client], id)
	return true, nil
}

func (f *fakeFleet) RenewWaiters(_ context.Context, waiters map[string][]string, _ time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, ids := range waiters {
		slices.Sort(ids)
	}
	f.renewed = append(f.renewed, waiters)
	return f.err
}

func (f *fakeFleet) LeaveWaiter(_ context.Context, client, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waiters[client] = slices.DeleteFunc(f.waiters[client], func(w string) bool { return w == id })
	return f.err
}

func (f *fakeFleet) count(client string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.waiters[client])
}

// With a Fleet, a client's cap counts its waiters on every replica: the
// fleet refuses what this replica alone would let in. Each waiter joins
// once and leaves once, and the replica renews the leases of all of its
// live waiters every third of a lease, in one call, while any lives.
func TestChangesClientWaitsInTheFleet(t *testing.T) {
	fleet := &fakeFleet{waiters: map[string][]string{"busy": {"elsewhere-1", "elsewhere-2"}}}
	cs := newChangesServer(t, func(o *changes.Options) { o.ClientMaxWaits = 2; o.Fleet = fleet })
	res, _ := cs.get(t, "", clientToken(t, "busy"), "Accept", "text/event-stream")
	refused(t, "a stream of a client at its cap on other replicas", res, 429, changes.MsgTooManyWaits)
	if got := fleet.count("busy"); got != 2 {
		t.Errorf("the refused stream is counted: %d waiters", got)
	}

	calm := clientToken(t, "calm")
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", cs.URL+"/prodapi/v1/changes?since=now", nil)
	req.Header.Set("Authorization", calm)
	req.Header.Set("Accept", "text/event-stream")
	stream, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("a stream: %v %v", stream, err)
	}
	cs.log.AwaitWaiter(t)
	_, poll := cs.longPoll(t, "?since=now&wait=60", calm)
	cs.log.AwaitWaiter(t)
	if got := fleet.count("calm"); got != 2 {
		t.Fatalf("the fleet counts %d waiters of the client, want 2", got)
	}

	cs.timers.fire(t, changes.WaiterLease/3)
	cs.log.Append("items", "a", sources.OpUpdate, changeAt) // the long poll ends
	if res := <-poll; res.status != 200 {
		t.Fatalf("the long poll: %d %s", res.status, res.body)
	}
	testkit.Eventually(t, "the long poll to leave the fleet's count", func() bool { return fleet.count("calm") == 1 })
	cs.timers.fire(t, changes.WaiterLease/3)
	cancel() // the stream's client goes
	stream.Body.Close()
	testkit.Eventually(t, "the stream to leave the fleet's count", func() bool { return fleet.count("calm") == 0 })
	cs.timers.fire(t, changes.WaiterLease/3) // finds none: the last renewal

	fleet.mu.Lock()
	renewed := fleet.renewed
	fleet.mu.Unlock()
	if len(renewed) != 2 || len(renewed[0]["calm"]) != 2 || len(renewed[1]["calm"]) != 1 || len(renewed[0]) != 1 {
		t.Errorf("renewals %v, want both of the client's waiters, then the stream's", renewed)
	}
	// Nothing left to renew: no renewal is due.
	if n := cs.timers.count(changes.WaiterLease / 3); n != 0 {
		t.Errorf("%d renewals due with no waiter", n)
	}
}

// While the fleet cannot be asked, each replica counts a client's
// waiters alone: the cap holds per replica.
func TestChangesClientWaitsWithoutTheFleet(t *testing.T) {
	fleet := &fakeFleet{waiters: map[string][]string{}, err: errors.New("redis: connection refused")}
	cs := newChangesServer(t, func(o *changes.Options) { o.ClientMaxWaits = 1; o.Fleet = fleet })
	auth := clientToken(t, "c")
	if res, _ := cs.openStream(t, "?since=now", auth); res.StatusCode != 200 {
		t.Fatalf("a stream while the fleet is down: %d", res.StatusCode)
	}
	res, _ := cs.get(t, "?since=now&wait=60", auth)
	refused(t, "beyond the cap on this replica", res, 429, changes.MsgTooManyWaits)
}

// At the connection cap the oldest long poll is answered at once: its
// empty page, with the position to resume from, on a connection that
// then closes; the others wait on.
func TestChangesEndOldestPoll(t *testing.T) {
	cs := newChangesServer(t)
	all := token(t, sources.AllScopes...)
	if c := cs.feed.EndOldestPoll(); c != nil {
		t.Fatalf("no long poll waits, and EndOldestPoll found %v", c.RemoteAddr())
	}
	oldAddr, old := cs.longPoll(t, "?since="+cs.pos("0-0")+"&wait=60", all)
	cs.log.AwaitWaiter(t)
	_, young := cs.longPoll(t, "?since=now&wait=60", all)
	cs.log.AwaitWaiter(t)

	c := cs.srv.EndOldestPoll()
	if c == nil || c.RemoteAddr().String() != oldAddr.String() {
		t.Fatalf("EndOldestPoll: %v, want the connection from %s", c, oldAddr)
	}
	res := <-old
	var p changesPage
	if res.status != 200 || json.Unmarshal([]byte(res.body), &p) != nil || len(p.Items) != 0 || cs.tok(p.Meta.Since) != "0-0" {
		t.Errorf("the oldest long poll: %d %s, want the empty page since 0-0", res.status, res.body)
	}
	if res.header.Get("Connection") != "close" {
		t.Errorf("the oldest long poll's connection stays open: %v", res.header)
	}
	cs.log.Append("items", "a", sources.OpUpdate, changeAt)
	if res := <-young; res.status != 200 || !json.Valid([]byte(res.body)) || cs.plain(res.body) == "" {
		t.Errorf("the younger long poll: %d %s", res.status, res.body)
	} else if err := json.Unmarshal([]byte(res.body), &p); err != nil || len(p.Items) != 1 {
		t.Errorf("the younger long poll waited on for the entry: %s", res.body)
	}
	if c := cs.feed.EndOldestPoll(); c != nil {
		t.Errorf("no long poll waits any more, and EndOldestPoll found %v", c.RemoteAddr())
	}
}

// A stream lives MaxStreamAge at most: then a close event (503) with a
// retry of 0 tells the client to reconnect at once, its token checked
// again. A token that expires first ends it as before (401).
func TestChangesStreamMaxAge(t *testing.T) {
	cs := newChangesServer(t, func(o *changes.Options) { o.MaxStreamAge = 10 * time.Minute })
	_, r := cs.openStream(t, "?since=now", token(t, sources.ScopeDesks))
	cs.log.AwaitWaiter(t)
	cs.timers.fire(t, 10*time.Minute)
	ev := mustEvent(t, r)
	if want := string(httperr.Body(503, changes.MsgStreamAge)); ev.event != "close" || ev.data != want || ev.retry != "0" || ev.hasID {
		t.Errorf("last event %+v, want close, retry 0, %s", ev, want)
	}
	if rest, err := io.ReadAll(r); err != nil || len(rest) > 0 {
		t.Errorf("after close: %q, %v", rest, err)
	}
	if got := cs.metrics.Counter("prodapi_changes_consumers_dropped_total", "", "reason").Value("max_age"); got != 1 {
		t.Errorf("dropped{max_age} = %d, want 1", got)
	}

	// A token of 5 minutes: its expiry ends the stream, and no timer of
	// the stream's age is set.
	tok, err := server.MintToken(testSecret, "test-client", []string{sources.ScopeDesks}, 5*time.Minute, testNow)
	if err != nil {
		t.Fatal(err)
	}
	_, r = cs.openStream(t, "?since=now", "Bearer "+tok)
	cs.log.AwaitWaiter(t)
	if n := cs.timers.count(10 * time.Minute); n != 0 {
		t.Errorf("%d timers of the stream's age for a token that expires first", n)
	}
	cs.timers.fire(t, 5*time.Minute)
	if ev := mustEvent(t, r); ev.event != "close" || ev.data != string(httperr.Body(401, changes.MsgStreamExpired)) || ev.retry != "" {
		t.Errorf("at the token's expiry: %+v", ev)
	}
}

// Every cap's refusals are counted from 0, the rate limiter's too.
func TestChangesCapsDeclared(t *testing.T) {
	cs := newChangesServer(t)
	var b strings.Builder
	cs.metrics.WriteText(&b)
	for _, c := range []string{"client_loads", "client_waits", "changes_polls", "changes_streams"} {
		if want := `prodapi_cap_refusals_total{cap="` + c + `"} 0`; !strings.Contains(b.String(), want+"\n") {
			t.Errorf("no %s", want)
		}
	}
}
