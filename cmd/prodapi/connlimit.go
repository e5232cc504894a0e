package main

import (
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prodapi/prodapi/sources/metrics"
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
	now  func() time.Time
	open *metrics.Gauge   // connections held
	shed *metrics.Counter // reason: idle (an idle one closed for a new one), full (a new one refused)

	mu    sync.Mutex
	conns map[net.Conn]*connInfo
}

type connInfo struct {
	idle      bool
	idleSince time.Time
}

func newConnLimiter(max int, m *metrics.Metrics) *connLimiter {
	l := &connLimiter{max: max, now: time.Now, conns: map[net.Conn]*connInfo{}}
	if m != nil {
		l.open = m.Gauge("prodapi_http_connections", "Client connections held open.")
		l.shed = m.Counter("prodapi_http_connections_shed_total",
			"Client connections closed by the PRODAPI_MAX_CONNS cap, by reason: idle (the longest idle one, for a new one), full (a new one, none being idle).",
			"reason")
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
	var victim net.Conn
	if len(l.conns) >= l.max {
		var oldest *connInfo
		for k, info := range l.conns {
			if info.idle && (oldest == nil || info.idleSince.Before(oldest.idleSince)) {
				victim, oldest = k, info
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
	l.conns[lc] = &connInfo{}
	n := len(l.conns)
	l.mu.Unlock()
	l.open.Set(float64(n))
	if victim != nil {
		l.shed.Inc("idle")
		victim.Close()
	}
	return lc
}

// connState is the http.Server's ConnState hook: it tells idle
// connections from busy ones.
func (l *connLimiter) connState(c net.Conn, s http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	info, ok := l.conns[c]
	if !ok {
		return
	}
	switch s {
	case http.StateIdle:
		info.idle, info.idleSince = true, l.now()
	case http.StateActive:
		info.idle = false
	case http.StateHijacked, http.StateClosed:
		delete(l.conns, c)
		l.open.Set(float64(len(l.conns)))
	}
}

// counts reports the connections held and how many are idle, for tests.
func (l *connLimiter) counts() (open, idle int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, info := range l.conns {
		if info.idle {
			idle++
		}
	}
	return len(l.conns), idle
}

// A limitedConn leaves the limiter when it closes.
type limitedConn struct {
	net.Conn
	l    *connLimiter
	once sync.Once
}

func (c *limitedConn) Close() error {
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		n := len(c.l.conns)
		c.l.mu.Unlock()
		c.l.open.Set(float64(n))
	})
	return c.Conn.Close()
}
