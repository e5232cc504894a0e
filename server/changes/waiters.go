package changes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/server/metrics"
)

// A Fleet counts each client's waiters across the replicas that share it
// (cmd/prodapi: the Redis tier), so that a client's cap
// (Options.ClientMaxWaits) holds for the whole fleet. A waiter lives
// for its lease after it joined or was last renewed, so that the waiters
// of a replica that died leave the count on their own, within a lease.
//
// The feed calls the fleet when a waiter joins and when it leaves, and
// renews the leases of all of its live waiters in one call every third
// of a lease: never on a request that does not wait.
type Fleet interface {
	// JoinWaiter adds the waiter id to client's live waiters, for lease,
	// unless client has max of them already (joined false). An error
	// means the fleet could not be asked: the feed then counts on this
	// replica alone.
	JoinWaiter(ctx context.Context, client, id string, max int, lease time.Duration) (joined bool, err error)
	// RenewWaiters extends by lease the life of each waiter still live
	// of waiters (by client, their ids). A waiter whose lease lapsed
	// (this replica could not renew it in time) is not counted again.
	RenewWaiters(ctx context.Context, waiters map[string][]string, lease time.Duration) error
	// LeaveWaiter removes the waiter id from client's.
	LeaveWaiter(ctx context.Context, client, id string) error
}

// WaiterLease is how long a waiter counts in the fleet's count after it
// joined or was last renewed: the longest the waiters of a replica that
// died hold their clients' caps. The feed renews them every third of it.
const WaiterLease = 30 * time.Second

// Why a waiter ends, or is not let in.
var (
	errTokenExpired = errors.New("changes: the stream's token expired")
	errStreamAge    = errors.New("changes: the stream reached its longest life")
	errDraining     = errors.New("changes: the server drains")
	errStreamLimit  = errors.New("changes: too many change streams")
	errPollLimit    = errors.New("changes: too many long polls")
	errClientWaits  = errors.New("changes: the client holds as many waits as it may")
	errEvicted      = errors.New("changes: the long poll was answered early, at the connection cap")
)

// The kinds of waiter: what a /changes request or a min_position wait
// holds while it waits.
type waitKind int

const (
	waitStream   waitKind = iota // an event stream: at most Options.MaxStreams
	waitPoll                     // a long poll: at most Options.MaxPolls
	waitPosition                 // a min_position wait (Feed.AtLeast)
)

// A waiter is one request that waits.
type waiter struct {
	kind waitKind
	// client names the client whose cap the waiter counts against; "":
	// none.
	client string
	// conn is a long poll's connection, which EndOldestPoll hands the
	// connection cap; nil when unknown.
	conn   net.Conn
	cancel context.CancelCauseFunc
	seq    uint64 // the order waiters joined in
	// id is the waiter's id in the fleet's count; "" when only this
	// replica counts it. counted: the fleet was asked to count it.
	id      string
	counted bool
	evicted bool // EndOldestPoll answered it
}

// waiters are the requests that wait: event streams, long polls and
// min_position waits, so that End can end them at once, EndOldestPoll
// can end the oldest long poll, and each cap holds.
type waiters struct {
	maxStreams, maxPolls int
	clientMax            int   // 0: no cap per client
	fleet                Fleet // nil: this replica counts a client's waiters alone
	replica              string
	afterFunc            func(d time.Duration, f func()) (stop func() bool)
	caps                 *metrics.Counter // prodapi_cap_refusals_total

	mu       sync.Mutex
	seq      uint64
	streams  int
	polls    int
	clients  map[string]int // the waiters of each client, on this replica
	fleetN   int            // the waiters the fleet counts (counted)
	renewing bool           // a renewal of their leases is due or under way
	draining bool
	all      map[*waiter]struct{}
}

func newWaiters(opts Options) *waiters {
	var id [6]byte
	rand.Read(id[:])
	return &waiters{
		maxStreams: opts.MaxStreams, maxPolls: opts.MaxPolls, clientMax: max(opts.ClientMaxWaits, 0),
		fleet: opts.Fleet, replica: hex.EncodeToString(id[:]), afterFunc: opts.AfterFunc,
		caps:    opts.Metrics.CapRefusals(),
		clients: map[string]int{}, all: map[*waiter]struct{}{},
	}
}

// join registers w, which End ends with cancel(errDraining). It fails
// while the server drains, when w's client holds ClientMaxWaits waiters
// (on this replica, then in the fleet's count), and for a stream or a
// long poll when the replica holds as many as it may; the caller turns
// the failure into its answer (refusal).
func (ws *waiters) join(ctx context.Context, w *waiter) error {
	ws.mu.Lock()
	capped := ws.clientMax > 0 && w.client != ""
	var err error
	switch {
	case ws.draining:
		err = errDraining
	case capped && ws.clients[w.client] >= ws.clientMax:
		err = errClientWaits
	case w.kind == waitStream && ws.streams >= ws.maxStreams:
		err = errStreamLimit
	case w.kind == waitPoll && ws.polls >= ws.maxPolls:
		err = errPollLimit
	}
	if err != nil {
		ws.mu.Unlock()
		return err
	}
	ws.seq++
	w.seq = ws.seq
	ws.count(w, 1)
	ws.all[w] = struct{}{}
	if capped && ws.fleet != nil {
		w.id = ws.replica + "-" + strconv.FormatUint(w.seq, 36)
	}
	ws.mu.Unlock()
	if w.id == "" {
		return nil
	}
	joined, err := ws.fleet.JoinWaiter(ctx, w.client, w.id, ws.clientMax, WaiterLease)
	if err == nil && !joined {
		ws.leave(w) // never counted in the fleet: nothing to take out
		return errClientWaits
	}
	// An error (Redis unreachable, its breaker open) leaves the waiter
	// counted here alone; it is still renewed and left, which costs
	// nothing where the fleet does not count it.
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.counted = true
	ws.fleetN++
	ws.renewLater()
	return nil
}

// count adds n to the counts w is in.
func (ws *waiters) count(w *waiter, n int) {
	switch w.kind {
	case waitStream:
		ws.streams += n
	case waitPoll:
		ws.polls += n
	}
	if w.client != "" && ws.clientMax > 0 {
		if ws.clients[w.client] += n; ws.clients[w.client] <= 0 {
			delete(ws.clients, w.client)
		}
	}
}

// leave lets go of w, and takes it out of the fleet's count: at once, so
// that a client that ends a wait and opens another at its cap is let in.
func (ws *waiters) leave(w *waiter) {
	ws.mu.Lock()
	delete(ws.all, w)
	ws.count(w, -1)
	counted := w.counted
	if counted {
		ws.fleetN--
	}
	ws.mu.Unlock()
	if counted {
		// Bounded by the fleet's own deadline; a failure leaves the
		// waiter counted until its lease ends.
		_ = ws.fleet.LeaveWaiter(context.Background(), w.client, w.id)
	}
}

// renewLater schedules the renewal of the fleet's leases of this
// replica's waiters, a third of a lease from now, unless one is due
// already or none is counted. Called with mu held.
func (ws *waiters) renewLater() {
	if ws.renewing || ws.fleetN == 0 {
		return
	}
	ws.renewing = true
	ws.afterFunc(WaiterLease/3, ws.renew)
}

// renew renews the leases of every waiter the fleet counts, in one call,
// then schedules the next renewal while any is left.
func (ws *waiters) renew() {
	ws.mu.Lock()
	batch := map[string][]string{}
	for w := range ws.all {
		if w.counted {
			batch[w.client] = append(batch[w.client], w.id)
		}
	}
	ws.mu.Unlock()
	if len(batch) > 0 {
		// A failure is the fleet's to note (its metrics); leases that
		// lapse meanwhile free their clients' caps early, never late.
		_ = ws.fleet.RenewWaiters(context.Background(), batch, WaiterLease)
	}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.renewing = false
	ws.renewLater()
}

// drain ends every waiter, and refuses new ones.
func (ws *waiters) drain() {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	ws.draining = true
	for w := range ws.all {
		w.cancel(errDraining)
	}
}

// endOldestPoll ends the long poll that joined first, of those whose
// connection is known and not ended already, with errEvicted, and
// returns its connection; nil when there is none.
func (ws *waiters) endOldestPoll() net.Conn {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var oldest *waiter
	for w := range ws.all {
		if w.kind == waitPoll && w.conn != nil && !w.evicted && (oldest == nil || w.seq < oldest.seq) {
			oldest = w
		}
	}
	if oldest == nil {
		return nil
	}
	oldest.evicted = true
	oldest.cancel(errEvicted)
	return oldest.conn
}

// Messages of the refusals at a cap.
const (
	msgTooManyWaits = "Too many requests: this client holds as many change streams, long polls and min_position waits as it may, across the service. End one before opening another, or try again shortly."
	msgTooManyPolls = "This server cannot hold another long poll now. Please try again shortly."
)

// refusal is the answer to a waiter that could not join (join's error),
// counted: 429 at the client's cap, 503 at the replica's (streams, long
// polls) or while it drains.
func (f *Feed) refusal(why error) error {
	switch {
	case errors.Is(why, errClientWaits):
		f.waiters.caps.Inc(metrics.CapClientWaits)
		return &httperr.Error{Status: http.StatusTooManyRequests, Msg: msgTooManyWaits, Err: why,
			Header: http.Header{"Retry-After": {"5"}}}
	case errors.Is(why, errPollLimit):
		f.waiters.caps.Inc(metrics.CapChangesPolls)
		return &httperr.Error{Status: http.StatusServiceUnavailable, Msg: msgTooManyPolls, Err: why,
			Header: http.Header{"Retry-After": {"5"}}}
	case errors.Is(why, errStreamLimit):
		f.waiters.caps.Inc(metrics.CapChangesStreams)
	}
	// A stream at the replica's cap, or while the server drains.
	f.metrics.refused.Inc()
	return &httperr.Error{Status: http.StatusServiceUnavailable, Msg: msgTooManyStreams, Err: why,
		Header: http.Header{"Retry-After": {"5"}}}
}
