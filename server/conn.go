package server

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Listener returns ln with its connections made for serving the API with
// net/http:
//
//   - net/http's own error responses, written before any handler runs (a
//     malformed or missing Host, an invalid header, headers over its
//     limit, an unsupported version or transfer coding), leave in the
//     API's error envelope with the same status (envelopePlainError);
//   - read and write deadlines reach the socket only when an I/O call can
//     be bound by them (lazyDeadline).
func Listener(ln net.Listener) net.Listener { return &listener{ln} }

type listener struct{ net.Listener }

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newConn(c), nil
}

type conn struct {
	net.Conn
	rd, wd lazyDeadline
}

func newConn(c net.Conn) *conn {
	sc := &conn{Conn: c}
	sc.rd.set = c.SetReadDeadline
	sc.wd.set = c.SetWriteDeadline
	return sc
}

func (c *conn) Read(p []byte) (int, error) {
	if err := c.rd.begin(); err != nil {
		return 0, c.opError("read", err)
	}
	defer c.rd.end()
	return c.Conn.Read(p)
}

func (c *conn) Write(p []byte) (int, error) {
	if err := c.wd.begin(); err != nil {
		return 0, c.opError("write", err)
	}
	defer c.wd.end()
	if b, ok := envelopePlainError(p); ok {
		if _, err := c.Conn.Write(b); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// opError reports a deadline the socket refused (it is closed) as the
// read or write failing, as the socket would have: net/http tells a
// common network error by the operation it names.
func (c *conn) opError(op string, err error) error {
	var oe *net.OpError
	if errors.As(err, &oe) {
		err = oe.Err
	}
	return &net.OpError{Op: op, Net: c.LocalAddr().Network(), Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
}

// CloseWrite half-closes the connection when the socket can, as net/http
// does before it closes a connection whose request it did not read to
// the end, so that the client reads the answer before the reset.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *conn) SetDeadline(t time.Time) error {
	return errors.Join(c.rd.request(t), c.wd.request(t))
}

func (c *conn) SetReadDeadline(t time.Time) error  { return c.rd.request(t) }
func (c *conn) SetWriteDeadline(t time.Time) error { return c.wd.request(t) }

// A lazyDeadline is one direction of a connection's deadline.
//
// net/http sets a deadline several times per request: the header read,
// the whole request, the background read that watches for a client
// going away (none, then one long past to stop it, then none again), the
// write, none again once answered, and the idle wait for the next
// request. Each that reaches the socket costs a clock reading and an
// update of the runtime's timers, and most are replaced before any read
// or write could block under them: a request that arrives in one segment
// is parsed from the buffer without another read under its header and
// whole-request deadlines.
//
// So a lazyDeadline keeps the deadline last asked for, and hands it to the
// socket when the next I/O call in its direction starts, or at once when
// one is under way (a read blocked in the background must see the
// deadline that stops it). Every read or write therefore runs under
// exactly the deadline net/http last set before or during it, as if each
// had been set at once; only the ones nothing could wait under are
// skipped.
type lazyDeadline struct {
	set  func(time.Time) error // the socket's own Set*Deadline
	busy atomic.Int32          // I/O calls under way in this direction

	mu   sync.Mutex
	want time.Time // the deadline last asked for
	has  time.Time // the deadline the socket has
}

// request records t, applying it at once while an I/O call is under way.
func (d *lazyDeadline) request(t time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.want = t
	if d.busy.Load() > 0 {
		return d.syncLocked()
	}
	return nil
}

// begin starts an I/O call: the socket gets the deadline asked for, and
// any deadline asked for until end is applied at once. When begin fails,
// the call must not be made (and end not called).
func (d *lazyDeadline) begin() error {
	d.mu.Lock()
	d.busy.Add(1)
	err := d.syncLocked()
	d.mu.Unlock()
	if err != nil {
		d.busy.Add(-1)
	}
	return err
}

func (d *lazyDeadline) end() { d.busy.Add(-1) }

func (d *lazyDeadline) syncLocked() error {
	if d.want == d.has {
		return nil
	}
	if err := d.set(d.want); err != nil {
		return err
	}
	d.has = d.want
	return nil
}
