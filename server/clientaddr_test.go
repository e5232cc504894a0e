package server

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// With trusted ranges, the header is believed only from a peer in them,
// as nginx's set_real_ip_from: a client reaching the service directly
// names itself by its own address whatever it writes, and a client
// behind the proxy by the address the proxy saw, whatever it wrote to
// the left of it. (TestAccessLogClientIP has the cases without ranges.)
func TestClientAddrFromTrustedProxies(t *testing.T) {
	ranges := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	for _, tc := range []struct {
		name, header, remote string
		lines                []string // the header's lines
		want                 string
	}{
		{"a peer outside the ranges", "X-Forwarded-For", "192.0.2.1:1234", []string{"203.0.113.9"}, "192.0.2.1"},
		{"a forged address from outside", "X-Forwarded-For", "192.0.2.1:1234", []string{"10.0.0.5"}, "192.0.2.1"},
		{"the proxy", "X-Forwarded-For", "10.0.0.1:1234", []string{"203.0.113.9"}, "203.0.113.9"},
		{"a forged address to the left of the proxy's", "X-Forwarded-For", "10.0.0.1:1234", []string{"198.51.100.7, 203.0.113.9"}, "203.0.113.9"},
		{"past trusted hops", "X-Forwarded-For", "10.0.0.1:1234", []string{"198.51.100.7, 203.0.113.9, 10.0.0.3, 10.0.0.2"}, "203.0.113.9"},
		{"past trusted hops on other lines", "X-Forwarded-For", "10.0.0.1:1234", []string{"198.51.100.7, 203.0.113.9", "10.0.0.3", "10.0.0.2"}, "203.0.113.9"},
		{"every hop trusted: the left-most", "X-Forwarded-For", "10.0.0.1:1234", []string{"10.0.0.4, 10.0.0.3"}, "10.0.0.4"},
		{"no header from the proxy", "X-Forwarded-For", "10.0.0.1:1234", nil, "10.0.0.1"},
		{"garbage stops at the trusted hop before it", "X-Forwarded-For", "10.0.0.1:1234", []string{"198.51.100.7, unknown, 10.0.0.2"}, "10.0.0.2"},
		{"an empty element", "X-Forwarded-For", "10.0.0.1:1234", []string{"198.51.100.7,,"}, "10.0.0.1"},
		{"an IPv4-mapped peer", "X-Forwarded-For", "[::ffff:10.0.0.1]:1234", []string{"203.0.113.9"}, "203.0.113.9"},
		{"an IPv6 proxy", "X-Forwarded-For", "[2001:db8:ffff::1]:1234", []string{"2001:db8::7, 2001:db8:ffff::2"}, "2001:db8::7"},
		{"an IPv6 peer outside", "X-Forwarded-For", "[2001:db8::1]:1234", []string{"203.0.113.9"}, "2001:db8::1"},
		{"with ports", "X-Forwarded-For", "10.0.0.1:1234", []string{"198.51.100.7:5000, [2001:db8:ffff::3]:443"}, "198.51.100.7"},
		{"Forwarded", "Forwarded", "10.0.0.1:1234", []string{`for=198.51.100.7, for="[2001:db8:ffff::3]:443";proto=https`}, "198.51.100.7"},
		{"Forwarded from outside", "Forwarded", "192.0.2.1:1234", []string{"for=198.51.100.7"}, "192.0.2.1"},
		{"Forwarded, obfuscated", "Forwarded", "10.0.0.1:1234", []string{"for=198.51.100.7, for=_proxy"}, "10.0.0.1"},
		{"X-Real-IP", "X-Real-IP", "10.0.0.1:1234", []string{"203.0.113.9"}, "203.0.113.9"},
		{"X-Real-IP from outside", "X-Real-IP", "192.0.2.1:1234", []string{"203.0.113.9"}, "192.0.2.1"},
		{"no header configured", "", "10.0.0.1:1234", nil, "10.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/prodapi/v1/items", nil)
			r.RemoteAddr = tc.remote
			for _, v := range tc.lines {
				r.Header.Add(tc.header, v)
			}
			if got := newClientAddrs(tc.header, ranges).addr(r); got != netip.MustParseAddr(tc.want) {
				t.Errorf("%s from %s: %s, want %s", tc.lines, tc.remote, got, tc.want)
			}
		})
	}
}

// The address the access log names is the one every part of the server
// reads (requestLog.clientAddr): recorded with the request, or computed
// for a handler served without the middleware.
func TestClientAddrRecorded(t *testing.T) {
	s := New(staticLoader(okRep(`{}`), nil), Options{TrustedProxyHeader: "X-Forwarded-For",
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}})
	r := httptest.NewRequest(http.MethodGet, "/prodapi/v1/items", nil)
	r.RemoteAddr = "10.0.0.1:1234"
	r.Header.Set("X-Forwarded-For", "203.0.113.9")
	var recorded netip.Addr
	h := s.requests.requestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { recorded = s.requests.clientAddr(w, r) }))
	h.ServeHTTP(httptest.NewRecorder(), r)
	want := netip.MustParseAddr("203.0.113.9")
	if recorded != want {
		t.Errorf("recorded %s, want %s", recorded, want)
	}
	if got := s.requests.clientAddr(httptest.NewRecorder(), r); got != want {
		t.Errorf("computed %s, want %s", got, want)
	}
}

// BenchmarkClientAddr is what telling a request's client costs (every
// request pays it once): the peer alone, and from a trusted proxy
// through two trusted hops.
func BenchmarkClientAddr(b *testing.B) {
	ranges := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	for _, bc := range []struct {
		name    string
		c       *clientAddrs
		forward string
	}{
		{"peer", newClientAddrs("", nil), ""},
		{"proxied", newClientAddrs("X-Forwarded-For", ranges), "198.51.100.7, 203.0.113.9, 10.0.0.3, 10.0.0.2"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := httptest.NewRequest(http.MethodGet, "/prodapi/v1/items", nil)
			r.RemoteAddr = "10.0.0.1:40000"
			if bc.forward != "" {
				r.Header.Set("X-Forwarded-For", bc.forward)
			}
			b.ReportAllocs()
			for b.Loop() {
				bc.c.addr(r)
			}
		})
	}
}
