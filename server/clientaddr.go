package server

import (
	"net/http"
	"net/netip"
	"strings"
)

// clientAddrs tells a request's client address, the one the access log
// names and any limit per address counts by: the TCP peer's, unless the
// peer is a trusted proxy (Options.TrustedProxies) and the trusted header
// (Options.TrustedProxyHeader) names another. Its addresses are read from
// the right, the nearest hop first, past every one in a trusted range:
// the first address outside them is the client, as nginx's
// set_real_ip_from with real_ip_recursive on decides (the left-most, when
// every one is trusted). A hop that is no address ("unknown", an
// obfuscated Forwarded node, garbage) ends the walk at the trusted hop
// before it: what lies beyond is anyone's to write.
//
// Without ranges every peer counts as the proxy and no address in the
// header as one: the client is the header's right-most address, from any
// peer at all, which a client that reaches the service directly chooses
// (config warns of it at start).
//
// It allocates nothing: the header is walked in place.
type clientAddrs struct {
	header  string // canonical; "": no header is believed
	rfc7239 bool   // the header is Forwarded: read each element's for=
	trusted []netip.Prefix
}

func newClientAddrs(header string, trusted []netip.Prefix) *clientAddrs {
	c := &clientAddrs{trusted: trusted}
	if header != "" {
		c.header = http.CanonicalHeaderKey(header)
		c.rfc7239 = c.header == "Forwarded"
	}
	return c
}

// addr is r's client address; the zero Addr when r's peer has none (a
// test's recorder, a Unix socket).
func (c *clientAddrs) addr(r *http.Request) netip.Addr {
	var peer netip.Addr
	if ap, err := netip.ParseAddrPort(r.RemoteAddr); err == nil {
		peer = ap.Addr().Unmap()
	}
	if c.header == "" || (len(c.trusted) > 0 && !c.inRange(peer)) {
		return peer
	}
	client := peer
	lines := r.Header[c.header] // several lines are one list, in order
	for i := len(lines) - 1; i >= 0; i-- {
		for rest := lines[i]; ; {
			elem := rest
			j := strings.LastIndexByte(rest, ',')
			if j >= 0 {
				elem, rest = rest[j+1:], rest[:j]
			}
			a, ok := forwardedAddr(elem, c.rfc7239)
			if !ok {
				return client
			}
			if !c.inRange(a) {
				return a
			}
			client = a
			if j < 0 {
				break
			}
		}
	}
	return client
}

// inRange reports whether a is in a trusted range; never without ranges.
func (c *clientAddrs) inRange(a netip.Addr) bool {
	for _, p := range c.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// forwardedAddr is the address of one element of a proxy header's list:
// the element itself (X-Forwarded-For, X-Real-IP), or its for= parameter
// (Forwarded, RFC 7239), with or without a port.
func forwardedAddr(v string, rfc7239 bool) (netip.Addr, bool) {
	if rfc7239 {
		found := false
		for pair := range strings.SplitSeq(v, ";") {
			name, value, _ := strings.Cut(strings.TrimSpace(pair), "=")
			if strings.EqualFold(name, "for") {
				v, found = value, true
				break
			}
		}
		if !found {
			return netip.Addr{}, false
		}
	}
	v = strings.Trim(strings.TrimSpace(v), `"`)
	var a netip.Addr
	var err error
	// An address alone, or with a port ("192.0.2.1:443", "[2001:db8::1]:443"):
	// chosen by shape, as a failed parse costs an allocation.
	if strings.HasPrefix(v, "[") || strings.Count(v, ":") == 1 {
		var ap netip.AddrPort
		ap, err = netip.ParseAddrPort(v)
		a = ap.Addr()
	} else {
		a, err = netip.ParseAddr(v)
	}
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true // a zone names an interface of the proxy's
}

// clientAddr is the request's client address (clientAddrs): what every
// part of the server that names or counts clients by address reads (the
// access log; a limit per address). The outermost middleware, requestID,
// records it once per request; a handler served without it (a test's)
// gets it computed.
func (l *requestLog) clientAddr(w http.ResponseWriter, r *http.Request) netip.Addr {
	if info := infoOf(w); info != nil {
		return info.clientAddr
	}
	return l.clients.addr(r)
}
