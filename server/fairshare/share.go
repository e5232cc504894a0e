package fairshare

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"
	"golang.org/x/time/rate"
)

// A key names a share: a client by name, an anonymous client (with
// authentication off) by address, or an address's limit of refused
// requests.
type key struct {
	kind kind
	name string
	addr netip.Addr
}

type kind uint8

const (
	kindClient kind = iota
	kindAnonymous
	kindAddress
)

func clientKey(name string) key        { return key{kind: kindClient, name: name} }
func anonymousKey(addr netip.Addr) key { return key{kind: kindAnonymous, addr: Host(addr)} }
func addressKey(addr netip.Addr) key   { return key{kind: kindAddress, addr: Host(addr)} }

// byAddress reports whether k is an address's: bounded in number.
func (k key) byAddress() bool { return k.kind != kindClient }

// Host is the address a limit counts addr under: itself for IPv4, its
// /64 for IPv6 (what one host is usually given).
func Host(addr netip.Addr) netip.Addr {
	addr = addr.Unmap()
	if addr.Is4() {
		return addr
	}
	p, _ := addr.WithZone("").Prefix(64)
	return p.Addr()
}

// fleetKey is the key of the share's bucket in the fleet: its kind and
// its name or address, a name that is long or not printable ASCII
// hashed.
func (k key) fleetKey() string {
	switch k.kind {
	case kindAddress:
		return "addr:" + k.addr.String()
	case kindAnonymous:
		return "anon:" + k.addr.String()
	}
	if printable(k.name) {
		return "client:" + k.name
	}
	h := sha256.Sum256([]byte(k.name))
	return "client#" + hex.EncodeToString(h[:16])
}

// printable reports whether a client's name may stand in a key as it is:
// at most 64 bytes of printable ASCII, no space.
func printable(s string) bool {
	if len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

// A Share is one client's (or address's) share on this replica: its view
// of the fleet's bucket, what it served and has not charged the fleet
// yet, and its loads in flight.
type Share struct {
	limiter  *Limiter
	policy   *policy // nil: no rate limit, the cap on loads alone
	fleetKey string
	// local is this replica's view of the bucket: replaced, not changed,
	// when the fleet says what it holds.
	local   atomic.Pointer[rate.Limiter]
	pending atomic.Int64 // cost taken here since the last charge to the fleet
	owed    atomic.Int64 // cost the fleet could not take at the last charge
	used    atomic.Int64 // the last request's time, in Unix nanoseconds, to the second
	loads   *semaphore.Weighted
	loading atomic.Int64 // loads in flight
	gone    atomic.Bool  // forgotten: the limiter holds another share for its key, if any
	holding atomic.Int64 // refusals held (Hold)
	retryAt atomic.Int64 // when the last refusal's Retry-After passes, in Unix nanoseconds
}

// Forgotten reports whether the limiter forgot s (idle): a caller that
// kept it asks the limiter for the client's share again.
func (s *Share) Forgotten() bool { return s.gone.Load() }

// touch notes a request at now, to the second: for forgetting idle
// shares, a write seldom made on a line every request reads.
func (s *Share) touch(now time.Time) {
	if t := now.UnixNano(); t-s.used.Load() >= int64(time.Second) {
		s.used.Store(t)
	}
}

// lookup is the share of k, nil if there is none.
func (l *Limiter) lookup(k key) *Share {
	l.mu.RLock()
	s := l.shares[k]
	l.mu.RUnlock()
	return s
}

// share is the share of k under p, made when there is none; nil when k
// is an address and maxAddresses are held.
func (l *Limiter) share(k key, p *policy, now time.Time) *Share {
	s := l.lookup(k)
	if s == nil {
		l.mu.Lock()
		if s = l.shares[k]; s == nil {
			if k.byAddress() && l.addrs >= maxAddresses {
				l.mu.Unlock()
				return nil
			}
			s = &Share{limiter: l, policy: p, fleetKey: k.fleetKey()}
			if p != nil {
				s.local.Store(rate.NewLimiter(p.perSec, p.rate.Events))
			}
			if l.maxLoads > 0 && k.kind != kindAddress {
				s.loads = semaphore.NewWeighted(l.maxLoads)
			}
			l.shares[k] = s
			if k.byAddress() {
				l.addrs++
			}
			if k.kind == kindAddress {
				l.addresses.Add(1)
			}
		}
		l.mu.Unlock()
	}
	s.touch(now)
	return s
}

// force takes n from s's bucket whether it holds them or not (a request
// already refused, which still costs).
func (l *Limiter) force(s *Share, now time.Time, n int) {
	s.local.Load().ReserveN(now, n)
	l.served(s, n)
}

// served notes n taken from s's view, for the fleet's count.
func (l *Limiter) served(s *Share, n int) {
	if l.fleet != nil {
		s.pending.Add(int64(n))
	}
}

// release gives back a load's slot.
func (s *Share) release() {
	s.loading.Add(-1)
	if s.loads != nil {
		s.loads.Release(1)
	}
}

// seed makes s's view hold tokens at now (at most a full bucket, and at
// least two buckets' debt).
func (s *Share) seed(now time.Time, tokens int64) {
	burst := int64(s.policy.rate.Events)
	lim := rate.NewLimiter(s.policy.perSec, int(burst))
	for take := burst - max(min(tokens, burst), -2*burst); take > 0; {
		n := min(take, burst)
		lim.ReserveN(now, int(n))
		take -= n
	}
	s.local.Store(lim)
}

// idle reports whether s may be forgotten: unused for idleAfter, nothing
// to charge, no load in flight, its bucket full.
func (s *Share) idle(now time.Time) bool {
	if now.UnixNano()-s.used.Load() < int64(idleAfter+time.Second) || s.pending.Load() != 0 || s.owed.Load() != 0 || s.loading.Load() != 0 {
		return false
	}
	return s.policy == nil || s.local.Load().TokensAt(now) >= float64(s.policy.rate.Events)
}

// flushers bounds the charges to the fleet a flush makes at once.
const flushers = 16

// flush charges the fleet what each share served since the last flush,
// and forgets the shares gone idle.
func (l *Limiter) flush(ctx context.Context) {
	now := l.now()
	var charge, idle []*Share
	var idleKeys []key
	l.mu.RLock()
	for k, s := range l.shares {
		switch {
		case l.fleet != nil && s.policy != nil && (s.pending.Load() != 0 || s.owed.Load() != 0):
			charge = append(charge, s)
		case s.idle(now):
			idle, idleKeys = append(idle, s), append(idleKeys, k)
		}
	}
	l.mu.RUnlock()
	if len(idle) > 0 {
		l.mu.Lock()
		for i, k := range idleKeys {
			if l.shares[k] == idle[i] && idle[i].idle(now) {
				delete(l.shares, k)
				idle[i].gone.Store(true)
				if k.byAddress() {
					l.addrs--
				}
				if k.kind == kindAddress {
					l.addresses.Add(-1)
				}
			}
		}
		l.mu.Unlock()
	}
	var g errgroup.Group
	g.SetLimit(flushers)
	for _, s := range charge {
		g.Go(func() error {
			l.settle(ctx, s)
			return nil
		})
	}
	g.Wait()
}

// settle charges the fleet what s served and owes, and takes what the
// fleet holds then, less what s served meanwhile and still owes, as its
// view. What the fleet could not take (other replicas spent it first) is
// owed: charged again at the next flush, up to a bucket. When the fleet
// cannot be asked, what s served is forgotten, and its view goes on
// alone.
func (l *Limiter) settle(ctx context.Context, s *Share) {
	n := s.pending.Swap(0) + s.owed.Swap(0)
	if n == 0 {
		return
	}
	c, ok := l.fleet.Charge(ctx, s.fleetKey, s.policy.rate, int(n), true)
	l.alone.Store(!ok)
	if !ok {
		return
	}
	owe := min(n-int64(c.Allowed), int64(s.policy.rate.Events))
	s.owed.Store(owe)
	s.seed(l.now(), int64(c.Remaining)-owe-s.pending.Load())
}
