package server

import (
	"context"
	"net"
	"net/http"

	"github.com/prodapi/prodapi/server/fairshare"
)

// clientOf names the request's client as its limits and caps count it:
// its verified token's client (Claims.Client: the client_id, else the
// sub, else a hash of the token), or without one (authentication off)
// its address, "@<address>" (an IPv6 address by its /64, what one host
// is usually given); "" when neither is known.
func (s *Server) clientOf(w http.ResponseWriter, r *http.Request) string {
	if info := infoOf(w); info != nil && info.client != "" {
		return info.client
	}
	a := s.requests.clientAddr(w, r)
	if !a.IsValid() {
		return ""
	}
	return "@" + fairshare.Host(a).String()
}

// ConnContext is the http.Server's ConnContext hook of the API: it keeps
// each request's connection in its context, for what a request does to
// its own connection (a change stream caps its send buffer; the oldest
// long poll is found by its connection at the connection cap).
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

type connKey struct{}

// connOf is the connection r came on, as the server accepted it (the
// outermost of the listener's wrappers); nil without ConnContext.
func connOf(r *http.Request) net.Conn {
	c, _ := r.Context().Value(connKey{}).(net.Conn)
	return c
}
