package server

import "net"

// Listener returns ln with its connections made for serving the API with
// net/http: net/http's own error responses, written before any handler
// runs (a malformed or missing Host, an invalid header, headers over its
// limit, an unsupported version or transfer coding), leave in the API's
// error envelope with the same status (envelopePlainError).
func Listener(ln net.Listener) net.Listener { return &listener{ln} }

type listener struct{ net.Listener }

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &conn{c}, nil
}

type conn struct{ net.Conn }

func (c *conn) Write(p []byte) (int, error) {
	if b, ok := envelopePlainError(p); ok {
		if _, err := c.Conn.Write(b); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// NetConn is the connection under the server's, for what a request does
// to its own socket (a change stream's send buffer).
func (c *conn) NetConn() net.Conn { return c.Conn }

// CloseWrite half-closes the connection when the socket can, as net/http
// does before it closes a connection whose request it did not read to
// the end, so that the client reads the answer before the reset.
func (c *conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
