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
// reached, a new connection closes the one idle the longest, and when
// none is idle (every connection is busy or has not yet sent a request)
// the new one is closed at once.
//
// Wrap the listener with listener and set the server's ConnState to
// connState.
type connLimiter struct {
	max  int
	open *metrics.Gauge   // connections held
	shed *metrics.Counter // reason: idle (an idle one closed for a new one), full (a new one refused)
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
			"Client connections closed by the PRODAPI_MAX_CONNS cap, by reason: idle (the longest idle one, for a new one), full (a new one, none being idle).",
			"reason")
		l.shed.Declare("idle")
		l.shed.Declare("full")
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

// admit registers c, making room by closing the longest idle connection
// when at the cap; it returns nil (and closes c) when there is no room.
func (l *connLimiter) admit(c net.Conn) net.Conn {
	lc := &limitedConn{Conn: c, l: l}
	l.mu.Lock()
	var victim *limitedConn
	if len(l.conns) >= l.max {
		var oldest uint64
		for k := range l.conns {
			if mark := k.idle.Load(); mark != 0 && (victim == nil || mark < oldest) {
				victim, oldest = k, mark
			}
		}
		if victim == nil {
			l.mu.Unlock()
			l.shed.Inc("full")
			c.Close()
			return nil
		}
		delete(l.conns, victim)
	}
	l.conns[lc] = struct{}{}
	l.open.Set(float64(len(l.conns))) // under the lock: counts are published in order
	l.mu.Unlock()
	if victim != nil {
		l.shed.Inc("idle")
		victim.Close()
	}
	return lc
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

func (c *limitedConn) Close() error {
	c.once.Do(func() { c.l.remove(c) })
	return c.Conn.Close()
}
