package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// A client is its token's client_id, else its sub, else a hash of the
// token; without authentication, its address (an IPv6 one by its /64).
func TestClientOf(t *testing.T) {
	withClaims := func(edit func(jwt.MapClaims)) string {
		c := validClaims([]string{"ARCHIVE_READ"})
		edit(c)
		return sign(t, jwt.SigningMethodHS256, testSecret, c)
	}
	anonymous := withClaims(func(c jwt.MapClaims) { delete(c, "client_id") })
	anonymousToo := withClaims(func(c jwt.MapClaims) { delete(c, "client_id"); c["iat"] = testNow.Unix() - 1 })
	for _, tc := range []struct {
		name, token, addr string
		auth              bool
		want              string
	}{
		{name: "client_id", auth: true, token: withClaims(func(c jwt.MapClaims) { c["sub"] = "someone" }), want: "5dad7ee94269dd1d5a78e6a1"},
		{name: "sub", auth: true, token: withClaims(func(c jwt.MapClaims) { delete(c, "client_id"); c["sub"] = "someone" }), want: "someone"},
		{name: "neither", auth: true, token: anonymous, want: "#"},
		{name: "an IPv4 address", addr: "192.0.2.7:4000", want: "@192.0.2.7"},
		{name: "an IPv6 address", addr: "[2001:db8:1:2:3:4:5:6]:4000", want: "@2001:db8:1:2::"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := New(nil, Options{Auth: AuthOptions{Enabled: tc.auth, Secret: testSecret, Now: func() time.Time { return testNow }}})
			var got string
			h := s.requests.requestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if _, err := s.authenticate(w, r); err != nil {
					t.Fatal(err)
				}
				got = s.clientOf(w, r)
			}))
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tc.addr
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			h.ServeHTTP(httptest.NewRecorder(), r)
			if tc.want == "#" {
				if len(got) != 33 || !strings.HasPrefix(got, "#") {
					t.Errorf("clientOf = %q, want # and 32 hex digits", got)
				}
				return
			}
			if got != tc.want {
				t.Errorf("clientOf = %q, want %q", got, tc.want)
			}
		})
	}
	// Two tokens without a name are two clients.
	a := newAuthenticator(AuthOptions{Enabled: true, Secret: testSecret, Now: func() time.Time { return testNow }})
	var names []string
	for _, tok := range []string{anonymous, anonymousToo} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		c, err := a.verify(r, testNow)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, c.Client)
	}
	if names[0] == names[1] {
		t.Errorf("two tokens without client_id or sub are one client, %q", names[0])
	}
}
