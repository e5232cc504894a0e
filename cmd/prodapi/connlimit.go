package main

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/prodapi/prodapi/server/metrics"
)

// A connLimiter caps the connections a server holds open
// (PRODAPI_MAX_CONNS). Idle keep-alive connections cost memory and a
// file descriptor each for up to the idle timeout; when the cap is
// reached, a new connection closes the one idle the longest; when none
// is idle, the /changes long poll that has waited the longest is
// answered at once (its empty page, then its connection closes: evict);
// and when there is none either (every connection is busy otherwise or
// has not yet sent a request) the new one is closed at once.
//
// Wrap the listener with listener, set the server's ConnState to
// connState, and, for evict to find a long poll's connection, its
// ConnContext to server.ConnContext.
type connLimiter struct {
	max  int
	open *metrics.Gauge   // connections held
	shed *metrics.Counter // reason: idle (an idle one closed for a new one), poll (a long poll answered early for one), full (a new one refused)
	// evict, when set, answers the long poll that has waited the longest
	// at once and returns its connection as the listener gave it
	// (server.Server.EndOldestPoll); nil when none waits.
	evict func() net.Conn
	// idleSeq orders the moments connections go idle: the one idle the
	// longest has the smallest mark. A counter instead of a clock: a
	// request's two state changes then cost no clock reading and no lock.
	idleSeq atomic.Uint64

	mu    sync.Mutex
	conns map[*limitedConn]struct{}
}

func newConnLimiter(max int, m *metrics.Metrics) *connLimiter {
	l := &connLimiter{max: max, conns: map[*limitedConn]struct{}{}}
	if m != nil {
		l.open = m.Gauge("prodapi_http_connections", "Client connections held open.")
		l.shed = m.Counter("prodapi_http_connections_shed_total",
			"Client connections closed by the PRODAPI_MAX_CONNS cap, by reason: idle (the longest idle one, for a new one), "+
				"poll (the longest waiting /changes long poll, answered early, for a new one, none being idle), full (a new one, none being idle and no long poll waiting).",
			"reason")
		for _, reason := range []string{"idle", "poll", "full"} {
			l.shed.Declare(reason)
		}
	}
	return l
}

// listener returns ln under the cap.
func (l *connLimiter) listener(ln net.Listener) net.Listener {
	return &limitedListener{Listener: ln, l: l}
}

type limitedListener struct {
	net.Listener
	l *connLimiter
}

func (ll *limitedListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if lc := ll.l.admit(c); lc != nil {
			return lc, nil
		}
	}
}

// admit registers c, making room when at the cap: by closing the longest
// idle connection, else by answering the longest waiting long poll early
// (its connection closes once answered, and no longer counts); it
// returns nil (and closes c) when there is no room.
func (l *connLimiter) admit(c net.Conn) net.Conn {
	lc := &limitedConn{Conn: c, l: l}
	l.mu.Lock()
	var idle *limitedConn
	if len(l.conns) >= l.max {
		var oldest uint64
		for k := range l.conns {
			if mark := k.idle.Load(); mark != 0 && (idle == nil || mark < oldest) {
				idle, oldest = k, mark
			}
		}
		switch {
		case idle != nil:
			delete(l.conns, idle)
		case l.evictPoll():
		default:
			l.mu.Unlock()
			l.shed.Inc("full")
			c.Close()
			return nil
		}
	}
	l.conns[lc] = struct{}{}
	l.open.Set(float64(len(l.conns))) // under the lock: counts are published in order
	l.mu.Unlock()
	if idle != nil {
		l.shed.Inc("idle")
		idle.Close()
	}
	return lc
}

// evictPoll answers the longest waiting long poll early, and lets its
// connection go: it reports whether one of the connections held was.
// Called with mu held (evict never calls back into the limiter).
func (l *connLimiter) evictPoll() bool {
	if l.evict == nil {
		return false
	}
	for {
		c := l.evict()
		if c == nil {
			return false
		}
		// A long poll whose connection is already leaving made no room:
		// the next one.
		if lc, ok := c.(*limitedConn); ok && lc.l == l {
			if _, held := l.conns[lc]; held {
				delete(l.conns, lc)
				l.shed.Inc("poll")
				return true
			}
		}
	}
}

// connState is the http.Server's ConnState hook: it tells idle
// connections from busy ones.
func (l *connLimiter) connState(c net.Conn, s http.ConnState) {
	lc, ok := c.(*limitedConn)
	if !ok || lc.l != l {
		return
	}
	switch s {
	case http.StateIdle:
		lc.idle.Store(l.idleSeq.Add(1))
	case http.StateActive:
		lc.idle.Store(0)
	case http.StateHijacked, http.StateClosed:
		l.remove(lc)
	}
}

// remove lets go of c, once it is closed or hijacked.
func (l *connLimiter) remove(c *limitedConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, held := l.conns[c]; held {
		delete(l.conns, c)
		l.open.Set(float64(len(l.conns)))
	}
}

// counts reports the connections held and how many are idle, for tests.
func (l *connLimiter) counts() (open, idle int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		if c.idle.Load() != 0 {
			idle++
		}
	}
	return len(l.conns), idle
}

// A limitedConn leaves the limiter when it closes.
type limitedConn struct {
	net.Conn
	l *connLimiter
	// idle is the limiter's idleSeq when the connection last went idle;
	// 0 while it is busy or has not yet sent a request.
	idle atomic.Uint64
	once sync.Once
}

// CloseWrite passes net/http's half-close through (see server.Listener).
func (c *limitedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

// NetConn is the connection under the limiter's, for what a request
// does to its own socket (a change stream's send buffer).
func (c *limitedConn) NetConn() net.Conn { return c.Conn }

func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.remove(c) })
	return c.Conn.Close()
}
