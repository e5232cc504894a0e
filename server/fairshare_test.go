package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/cache"
	"github.com/prodapi/prodapi/server/fairshare"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
)

// limited returns a test server whose limiter has opts, on the server's
// clock (which stands still: buckets never refill), flushed by nobody.
func limited(t *testing.T, load LoaderFunc, opts fairshare.Options, edit ...func(*Options)) *testServer {
	t.Helper()
	opts.Now, opts.Flush, opts.Hold = func() time.Time { return testNow }, -1, -1
	if opts.Metrics == nil {
		opts.Metrics = metrics.NewMetrics()
	}
	l, err := fairshare.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(context.Background()) })
	return newTestServer(t, load, append([]func(*Options){func(o *Options) { o.Limits, o.Metrics = l, opts.Metrics }}, edit...)...)
}

// The contract's order: routing (404), the address limit (429), the
// token (401, which the address pays for), its scope (403, which the
// client pays for), the client's limit (429), the parameters (400).
func TestLimitsInOrder(t *testing.T) {
	ts := limited(t, staticLoader(okRep(`{}`), nil), fairshare.Options{
		Client: fairshare.Rate{Events: 5, Per: time.Second}, Address: fairshare.Rate{Events: 2, Per: time.Minute}})
	desks := token(t, sources.ScopeDesks)
	type step struct {
		target, auth string
		status       int
		policy       string // RateLimit's policy and r, "" for none
	}
	for i, s := range []step{
		{"/prodapi/v1/desks", desks, 200, `"client";r=4;t=1`},
		{"/prodapi/v1/items", desks, 403, `"client";r=3;t=1`},
		{"/prodapi/v1/desks?sort=[", desks, 400, `"client";r=2;t=1`},
		{"/prodapi/v1/desks/missing-thing", desks, 200, `"client";r=1;t=1`},
		{"/prodapi/v1/desks", desks, 200, `"client";r=0;t=1`},
		// Spent: refused before its parameters are read, after its scope.
		{"/prodapi/v1/desks?sort=[", desks, 429, `"client";r=0;t=1`},
		{"/prodapi/v1/items", desks, 403, `"client";r=0;t=2`}, // in debt
		// Routing first, whatever the limits.
		{"/prodapi/v1/nope", desks, 404, ""},
		// Tokens refused count against the address: two a minute.
		{"/prodapi/v1/desks", "Bearer bad", 401, `"address";r=1;t=30`},
		{"/prodapi/v1/desks", "", 401, `"address";r=0;t=60`},
		{"/prodapi/v1/desks", "Bearer bad", 429, `"address";r=0;t=30`},
		// The address limit comes before the token: a good one too.
		{"/prodapi/v1/desks", desks, 429, `"address";r=0;t=30`},
		{"/prodapi/v1/desks/x%2Fy", desks, 404, ""},
	} {
		res := do(t, ts, "GET", s.target, "Authorization", s.auth)
		if res.status != s.status || res.header.Get("Ratelimit") != s.policy {
			t.Errorf("step %d, %s: %d with RateLimit %q, want %d with %q (%s)", i, s.target, res.status, res.header.Get("Ratelimit"), s.status, s.policy, res.body)
		}
	}
	if n := ts.loads.Load(); n != 3 {
		t.Errorf("%d loads, want 3: refused requests load nothing", n)
	}
}

// A 429 is the error envelope, never cached, with Retry-After and the
// RateLimit headers; HEAD gets the headers without the body.
func TestTooManyRequestsAnswer(t *testing.T) {
	ts := limited(t, staticLoader(okRep(`{}`), nil), fairshare.Options{Client: fairshare.Rate{Events: 1, Per: time.Second}})
	auth := token(t, sources.ScopeDesks)
	if res := do(t, ts, "GET", "/prodapi/v1/desks", "Authorization", auth); res.status != 200 ||
		res.header.Get("Ratelimit-Policy") != `"client";q=1;w=1` || res.header.Get("Ratelimit") != `"client";r=0;t=1` {
		t.Fatalf("the first request: %d %v", res.status, res.header)
	}
	res := do(t, ts, "GET", "/prodapi/v1/desks", "Authorization", auth)
	var env struct {
		Status string `json:"_status"`
		Error  struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"_error"`
	}
	if err := json.Unmarshal([]byte(res.body), &env); err != nil || env.Status != "ERR" || env.Error.Code != 429 ||
		!strings.Contains(env.Error.Message, "Retry-After") {
		t.Errorf("the 429's body: %s", res.body)
	}
	got := map[string]string{}
	for _, k := range []string{"Retry-After", "Ratelimit-Policy", "Ratelimit", "Cache-Control", "Content-Type"} {
		got[k] = res.header.Get(k)
	}
	want := map[string]string{"Retry-After": "1", "Ratelimit-Policy": `"client";q=1;w=1`, "Ratelimit": `"client";r=0;t=1`,
		"Cache-Control": "no-store", "Content-Type": "application/json"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the 429's headers (-want +got):\n%s", diff)
	}
	if head := do(t, ts, "HEAD", "/prodapi/v1/desks", "Authorization", auth); head.status != 429 || head.body != "" || head.header.Get("Retry-After") != "1" {
		t.Errorf("HEAD: %d %q %v", head.status, head.body, head.header)
	}
}

// Over the real cache: a hit costs 1, the request that loads 1 +
// MissCost, charged before the load; a client that cannot pay for a load
// is refused it (429) and still reads what is cached. The cache gets the
// client's share as the gate of the request (LoadGated), or, behind
// another Loader, finds it in the request's context (Options.Gate).
func TestLoadsCostTheirMissCost(t *testing.T) {
	for _, how := range []string{"gated", "context"} {
		t.Run(how, func(t *testing.T) {
			m := metrics.NewMetrics()
			l, err := fairshare.New(fairshare.Options{Client: fairshare.Rate{Events: 26, Per: time.Second}, MissCost: 10, MaxLoads: 1,
				Now: func() time.Time { return testNow }, Flush: -1, Hold: -1, Metrics: m})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { l.Close(context.Background()) })
			loads := 0
			var opts cache.Options
			if how == "context" {
				opts.Gate = l
			}
			c := cache.New(nil, LoaderFunc(func(_ context.Context, q *sources.Query) (*sources.Representation, error) {
				loads++
				return okRep(`{"_id":"` + q.ID + `"}`), nil
			}), opts)
			t.Cleanup(func() { c.Close(context.Background()) })
			var load Loader = c
			if how == "context" {
				load = LoaderFunc(c.Load)
			}
			srv := New(load, Options{Auth: AuthOptions{Enabled: true, Secret: testSecret, Now: func() time.Time { return testNow }},
				Now: func() time.Time { return testNow }, Limits: l, Metrics: m})
			ts := &testServer{Server: httptest.NewServer(srv.Handler()), srv: srv}
			t.Cleanup(ts.Close)
			auth := token(t, sources.ScopeDesks)
			var got []string
			for _, target := range []string{"a", "a", "b", "c", "a", "a", "a", "a"} {
				res := do(t, ts, "GET", "/prodapi/v1/desks/"+target, "Authorization", auth)
				got = append(got, target+":"+res.header.Get("Ratelimit")[len(`"client";`):]+":"+http.StatusText(res.status))
			}
			want := []string{
				"a:r=25;t=1:OK",               // 1, then the load of a: 10 more
				"a:r=14;t=1:OK",               // a hit
				"b:r=13;t=1:OK",               // the load of b
				"c:r=2;t=1:Too Many Requests", // 2 left: a load takes 10
				"a:r=1;t=1:OK",                // a hit with what is left
				"a:r=0;t=1:OK",
				"a:r=0;t=1:Too Many Requests",
				"a:r=0;t=1:Too Many Requests",
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("requests (-want +got):\n%s", diff)
			}
			if loads != 2 {
				t.Errorf("%d loads, want 2", loads)
			}
		})
	}
}

// The cache takes a request's gate with the request: the server's hits
// carry no context value for it.
var _ gatedLoader = (*cache.Cache)(nil)

// With authentication off the address is the client: its requests are
// charged to it, under the limit of clients without one of their own.
func TestAuthOffLimitsTheAddress(t *testing.T) {
	ts := limited(t, staticLoader(okRep(`{}`), nil), fairshare.Options{Client: fairshare.Rate{Events: 2, Per: time.Second}},
		func(o *Options) { o.Auth.Enabled = false })
	var got []int
	for range 3 {
		got = append(got, do(t, ts, "GET", "/prodapi/v1/desks").status)
	}
	if diff := cmp.Diff([]int{200, 200, 429}, got); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
}

// A token's client is its client_id, else its sub, else the token
// itself (hashed): each has its own bucket.
func TestClientOfAToken(t *testing.T) {
	a := newAuthenticator(AuthOptions{Enabled: true, Secret: testSecret, Now: func() time.Time { return testNow }})
	signed := func(edit func(jwt.MapClaims)) string {
		c := validClaims([]string{sources.ScopeDesks})
		edit(c)
		return sign(t, jwt.SigningMethodHS256, testSecret, c)
	}
	for _, tc := range []struct {
		name string
		edit func(jwt.MapClaims)
		want string
	}{
		{"client_id", func(c jwt.MapClaims) { c["client_id"], c["sub"] = "mirror", "u1" }, "mirror"},
		{"sub", func(c jwt.MapClaims) { delete(c, "client_id"); c["sub"] = "u1" }, "u1"},
	} {
		c, _, err := a.parse(signed(tc.edit))
		if err != nil || c.Client != tc.want {
			t.Fatalf("%s: client %v (%v), want %q", tc.name, c, err, tc.want)
		}
	}
	one, _, err1 := a.parse(signed(func(c jwt.MapClaims) { delete(c, "client_id"); c["iat"] = testNow.Unix() - 1 }))
	two, _, err2 := a.parse(signed(func(c jwt.MapClaims) { delete(c, "client_id") }))
	if err1 != nil || err2 != nil || !strings.HasPrefix(one.Client, "#") || one.Client == two.Client {
		t.Errorf("tokens without client_id or sub: %v and %v (%v, %v), want two hashes", one, two, err1, err2)
	}
}
