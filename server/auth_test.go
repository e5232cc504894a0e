package server

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

var (
	testSecret = []byte("a-test-secret-that-is-at-least-32-bytes-long")
	testNow    = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
)

func sign(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func validClaims(scope any) jwt.MapClaims {
	return jwt.MapClaims{"iss": "Superdesk Auth Server", "iat": testNow.Unix(), "exp": testNow.Add(time.Hour).Unix(),
		"client_id": "5dad7ee94269dd1d5a78e6a1", "scope": scope}
}

func TestTokenFrom(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	for _, tc := range []struct{ header, want string }{
		{"Bearer abc def", ""}, // more words than a token: refused (Eve took abc)
		{"Bearer abc ", "abc"}, // trailing space is trimmed first
		{"Token abc def", ""},
		{"Bearer abc\tdef", "abc\tdef"}, // one word: the signature check refuses it
		{"", ""},
		{"Bearer abc", "abc"},
		{"bearer abc", "abc"},
		{"BEARER abc", "abc"},
		{"Token abc", "abc"},
		{"token abc", "abc"},
		{"  Bearer abc  ", "abc"},
		{"Bearer  abc", ""}, // Eve took the second space-separated word
		{"Bearer", ""},
		{"Bearerabc", ""},
		{"abc.def.ghi", "abc.def.ghi"},
		{"Basic " + b64("abc.def.ghi:"), "abc.def.ghi"},
		{"Basic " + b64("abc.def.ghi:ignored"), "abc.def.ghi"},
		{"basic " + b64("abc:x"), "abc"},
		{"Basic " + b64("nocolon"), ""},
		{"Basic !!!", ""},
	} {
		got, err := tokenFrom(tc.header)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("tokenFrom(%q) = %q, %v; want %q", tc.header, got, err, tc.want)
		}
	}
}

func TestVerify(t *testing.T) {
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	good := sign(t, jwt.SigningMethodHS256, testSecret, validClaims([]string{"ARCHIVE_READ"}))
	noneTok, _ := jwt.NewWithClaims(jwt.SigningMethodNone, validClaims([]string{"ARCHIVE_READ"})).SignedString(jwt.UnsafeAllowNoneSignatureType)
	withClaims := func(edit func(jwt.MapClaims)) string {
		c := validClaims([]string{"ARCHIVE_READ"})
		edit(c)
		return sign(t, jwt.SigningMethodHS256, testSecret, c)
	}
	dupPayload := func() string {
		header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
		payload := base64.RawURLEncoding.EncodeToString([]byte(`{"exp":9999999999,"scope":[],"scope":["ARCHIVE_READ"]}`))
		m := jwt.SigningMethodHS256
		sig, _ := m.Sign(header+"."+payload, testSecret)
		return header + "." + payload + "." + base64.RawURLEncoding.EncodeToString(sig)
	}()

	for _, tc := range []struct {
		name     string
		token    string
		opts     func(*AuthOptions)
		ok       bool
		wantScop []string
		desc     string // the 401's error_description
	}{
		{name: "valid", token: good, ok: true, wantScop: []string{"ARCHIVE_READ"}},
		{name: "words after the token", desc: "the Authorization header has words after the token", token: good + " extra"},
		{name: "wrong secret", desc: "the token's signature is invalid", token: sign(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), validClaims([]string{"ARCHIVE_READ"}))},
		{name: "alg none", desc: "the token's signature is invalid", token: noneTok},
		{name: "HS512", desc: "the token's signature is invalid", token: sign(t, jwt.SigningMethodHS512, testSecret, validClaims([]string{"ARCHIVE_READ"}))},
		{name: "RS256", desc: "the token's signature is invalid", token: sign(t, jwt.SigningMethodRS256, rsaKey, validClaims([]string{"ARCHIVE_READ"}))},
		{name: "expired", desc: "the token has expired", token: withClaims(func(c jwt.MapClaims) { c["exp"] = testNow.Add(-time.Second).Unix() })},
		{name: "expired within leeway", token: withClaims(func(c jwt.MapClaims) { c["exp"] = testNow.Add(-30 * time.Second).Unix() }),
			opts: func(o *AuthOptions) { o.Leeway = time.Minute }, ok: true, wantScop: []string{"ARCHIVE_READ"}},
		{name: "no exp", desc: "the token has no expiry", token: withClaims(func(c jwt.MapClaims) { delete(c, "exp") })},
		{name: "string exp", desc: "the token is malformed", token: withClaims(func(c jwt.MapClaims) { c["exp"] = "tomorrow" })},
		// RFC 7519 NumericDate is a JSON number; the JWT library alone
		// takes a numeric string.
		{name: "numeric string exp", desc: "the token is malformed", token: withClaims(func(c jwt.MapClaims) { c["exp"] = "4102444800" })},
		{name: "numeric string nbf", desc: "the token is malformed", token: withClaims(func(c jwt.MapClaims) { c["nbf"] = "1000000000" })},
		{name: "numeric string iat", desc: "the token is malformed", token: withClaims(func(c jwt.MapClaims) { c["iat"] = "1000000000" })},
		{name: "null iat", desc: "the token is malformed", token: withClaims(func(c jwt.MapClaims) { c["iat"] = nil })},
		{name: "boolean nbf", desc: "the token is malformed", token: withClaims(func(c jwt.MapClaims) { c["nbf"] = true })},
		{name: "fractional exp", token: withClaims(func(c jwt.MapClaims) { c["exp"] = float64(testNow.Add(time.Hour).Unix()) + 0.5 }),
			ok: true, wantScop: []string{"ARCHIVE_READ"}},
		{name: "payload not an object", desc: "the token is malformed", token: func() string {
			header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`))
			payload := base64.RawURLEncoding.EncodeToString([]byte(`[1]`))
			sig, _ := jwt.SigningMethodHS256.Sign(header+"."+payload, testSecret)
			return header + "." + payload + "." + base64.RawURLEncoding.EncodeToString(sig)
		}()},
		{name: "nbf in future", desc: "the token is not valid yet", token: withClaims(func(c jwt.MapClaims) { c["nbf"] = testNow.Add(time.Hour).Unix() })},
		{name: "nbf past", token: withClaims(func(c jwt.MapClaims) { c["nbf"] = testNow.Add(-time.Hour).Unix() }), ok: true, wantScop: []string{"ARCHIVE_READ"}},
		{name: "aud without audience configured", desc: "the token is for another audience", token: withClaims(func(c jwt.MapClaims) { c["aud"] = "prodapi" })},
		{name: "aud names us", token: withClaims(func(c jwt.MapClaims) { c["aud"] = []string{"x", "prodapi"} }),
			opts: func(o *AuthOptions) { o.Audience = "prodapi" }, ok: true, wantScop: []string{"ARCHIVE_READ"}},
		{name: "aud names another", desc: "the token is for another audience", token: withClaims(func(c jwt.MapClaims) { c["aud"] = "other" }),
			opts: func(o *AuthOptions) { o.Audience = "prodapi" }},
		{name: "scope string", token: withClaims(func(c jwt.MapClaims) { c["scope"] = "ARCHIVE_READ DESKS_READ" }), ok: true,
			wantScop: []string{"ARCHIVE_READ", "DESKS_READ"}},
		{name: "scope object", desc: "the token's scope claim is malformed", token: withClaims(func(c jwt.MapClaims) { c["scope"] = map[string]any{"ARCHIVE_READ": true} })},
		{name: "scope number", desc: "the token's scope claim is malformed", token: withClaims(func(c jwt.MapClaims) { c["scope"] = 1 })},
		{name: "scope list of mixed", desc: "the token's scope claim is malformed", token: withClaims(func(c jwt.MapClaims) { c["scope"] = []any{"ARCHIVE_READ", 1} })},
		{name: "scope missing", token: withClaims(func(c jwt.MapClaims) { delete(c, "scope") }), ok: true},
		{name: "duplicate claim", desc: "the token is malformed", token: dupPayload},
		{name: "garbage", desc: "the token is malformed", token: "not.a.token"},
		{name: "two segments", desc: "the token is malformed", token: "abc.def"},
		{name: "no secret", desc: "the token cannot be verified", token: good, opts: func(o *AuthOptions) { o.Secret = nil }},
		{name: "issuer configured", token: good, opts: func(o *AuthOptions) { o.Issuer = "Superdesk Auth Server" }, ok: true, wantScop: []string{"ARCHIVE_READ"}},
		{name: "another issuer", desc: "the token is from another issuer", token: withClaims(func(c jwt.MapClaims) { c["iss"] = "elsewhere" }),
			opts: func(o *AuthOptions) { o.Issuer = "Superdesk Auth Server" }},
		{name: "no issuer", desc: "the token is from another issuer", token: withClaims(func(c jwt.MapClaims) { delete(c, "iss") }),
			opts: func(o *AuthOptions) { o.Issuer = "Superdesk Auth Server" }},
		{name: "any issuer when none is configured", token: withClaims(func(c jwt.MapClaims) { c["iss"] = "elsewhere" }), ok: true, wantScop: []string{"ARCHIVE_READ"}},
		// Refused for its length alone, before any decoding: valid as it
		// is, and one byte under the limit a token that is no token.
		{name: "a valid token over 8 KiB", desc: "the Authorization header is longer than 8 KiB",
			token: withClaims(func(c jwt.MapClaims) { c["pad"] = strings.Repeat("x", maxAuthorization) })},
		{name: "8 KiB exactly", desc: "the token is malformed", token: strings.Repeat("x", maxAuthorization-len("Bearer "))},
		{name: "one byte over 8 KiB", desc: "the Authorization header is longer than 8 KiB", token: strings.Repeat("x", maxAuthorization-len("Bearer ")+1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := AuthOptions{Enabled: true, Secret: testSecret, Now: func() time.Time { return testNow }}
			if tc.opts != nil {
				tc.opts(&opts)
			}
			a := newAuthenticator(opts)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Header.Set("Authorization", "Bearer "+tc.token)
			c, err := a.verify(r, a.opts.Now())
			if (err == nil) != tc.ok {
				t.Fatalf("verify: err = %v, want ok %v", err, tc.ok)
			}
			if tc.ok && strings.Join(c.Scopes, " ") != strings.Join(tc.wantScop, " ") {
				t.Errorf("scopes = %v, want %v", c.Scopes, tc.wantScop)
			}
			if !tc.ok {
				want := `Bearer realm="prodapi", error="invalid_token", error_description="` + tc.desc + `"`
				if got := challenge(err); got != want {
					t.Errorf("challenge(%v) = %s, want %s", err, got, want)
				}
			}
		})
	}
}

// A remembered token still expires, and not-before still holds.
func TestVerifyMemoRespectsTime(t *testing.T) {
	now := testNow
	a := newAuthenticator(AuthOptions{Enabled: true, Secret: testSecret, Now: func() time.Time { return now }})
	c := validClaims([]string{"ARCHIVE_READ"})
	c["nbf"] = testNow.Add(-time.Minute).Unix()
	tok := sign(t, jwt.SigningMethodHS256, testSecret, c)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	if _, err := a.verify(r, now); err != nil {
		t.Fatalf("first verify: %v", err)
	}
	if _, err := a.verify(r, now); err != nil {
		t.Fatalf("remembered verify: %v", err)
	}
	now = testNow.Add(2 * time.Hour)
	if _, err := a.verify(r, now); err == nil {
		t.Error("remembered token verified after its expiry")
	}
	now = testNow.Add(-2 * time.Minute)
	if _, err := a.verify(r, now); err == nil {
		t.Error("remembered token verified before its nbf")
	}
}

// Without a clock of its own, a remembered token is judged at the time
// the request gives (its start), not at a reading of its own.
func TestVerifyAtRequestTime(t *testing.T) {
	a := newAuthenticator(AuthOptions{Enabled: true, Secret: testSecret})
	now := time.Now()
	tok, err := MintToken(testSecret, "client", []string{"ARCHIVE_READ"}, time.Hour, now)
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	if _, err := a.verify(r, now); err != nil {
		t.Fatalf("first verify: %v", err)
	}
	if _, err := a.verify(r, now.Add(2*time.Hour)); err == nil {
		t.Error("a request two hours on was not judged at its own time")
	}
	if _, err := a.verify(r, time.Time{}); err != nil {
		t.Errorf("without a request time: %v", err)
	}
}

func TestMintToken(t *testing.T) {
	tok, err := MintToken(testSecret, "client", []string{"ARCHIVE_READ", "DESKS_READ"}, time.Hour, testNow)
	if err != nil {
		t.Fatal(err)
	}
	a := newAuthenticator(AuthOptions{Enabled: true, Secret: testSecret, Now: func() time.Time { return testNow }})
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Authorization", tok)
	c, err := a.verify(r, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if c.ClientID != "client" || !c.Has("DESKS_READ") || c.Has("USERS_READ") || !c.Expires.Equal(testNow.Add(time.Hour)) {
		t.Errorf("claims = %+v", c)
	}
	if _, err := MintToken(nil, "c", nil, time.Hour, testNow); err == nil {
		t.Error("MintToken without a secret succeeded")
	}
}

// RFC 6750 on 401 and 403: the realm alone without a token; with a
// refused one, invalid_token and why; with too narrow a scope,
// insufficient_scope and the scope needed. The bodies stay the
// original's, and the token never comes back.
func TestAuthChallenges(t *testing.T) {
	ts := newTestServer(t, staticLoader(okRep(`{"_items":[]}`), nil))
	expired, err := MintToken(testSecret, "test-client", []string{"ARCHIVE_READ"}, time.Hour, testNow.Add(-2*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	forged := sign(t, jwt.SigningMethodHS256, []byte("another-secret-another-secret-xx"), validClaims([]string{"ARCHIVE_READ"}))
	const invalid = `Bearer realm="prodapi", error="invalid_token", error_description=`
	for _, tc := range []struct {
		name, target, auth string
		status             int
		body, challenge    string
	}{
		{"no header", "/prodapi/v1/items", "", 401, body401, `Bearer realm="prodapi"`},
		{"a scheme without a token", "/prodapi/v1/items", "Bearer", 401, body401, `Bearer realm="prodapi"`},
		{"undecodable Basic credentials", "/prodapi/v1/items", "Basic !!!", 401, body401, `Bearer realm="prodapi"`},
		{"expired", "/prodapi/v1/items", "Bearer " + expired, 401, body401, invalid + `"the token has expired"`},
		{"bad signature", "/prodapi/v1/items", "Bearer " + forged, 401, body401, invalid + `"the token's signature is invalid"`},
		{"malformed", "/prodapi/v1/items", "Bearer not.a.token", 401, body401, invalid + `"the token is malformed"`},
		{"malformed, home", "/prodapi/v1", "Bearer x", 401, body401, invalid + `"the token is malformed"`},
		{"64 KiB", "/prodapi/v1/items", forgedAuthorization("claims", 64<<10), 401, body401, invalid + `"the Authorization header is longer than 8 KiB"`},
		{"scope lacking", "/prodapi/v1/items", token(t, "DESKS_READ"), 403, body403,
			`Bearer realm="prodapi", error="insufficient_scope", scope="ARCHIVE_READ"`},
		{"scope lacking, detail", "/prodapi/v1/users/x", token(t, "DESKS_READ"), 403, body403,
			`Bearer realm="prodapi", error="insufficient_scope", scope="USERS_READ"`},
		{"scope lacking, asset", "/prodapi/v1/assets/x.jpg", token(t, "DESKS_READ"), 403, body403,
			`Bearer realm="prodapi", error="insufficient_scope", scope="ARCHIVE_READ"`},
		{"granted", "/prodapi/v1/desks", token(t, "DESKS_READ"), 200, `{"_items":[]}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := do(t, ts, http.MethodGet, tc.target, "Authorization", tc.auth)
			if res.status != tc.status || res.body != tc.body {
				t.Errorf("%d %s, want %d %s", res.status, res.body, tc.status, tc.body)
			}
			if got := res.header.Values("Www-Authenticate"); strings.Join(got, "|") != tc.challenge {
				t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
			}
			if tok, _ := tokenFrom(tc.auth); tok != "" && strings.Contains(res.header.Get("Www-Authenticate"), tok) {
				t.Error("the challenge echoes the token")
			}
		})
	}
}

func TestQuoted(t *testing.T) {
	for in, want := range map[string]string{
		"":                      `""`,
		"ARCHIVE_READ":          `"ARCHIVE_READ"`,
		`say "hi"`:              `"say \"hi\""`,
		`back\slash`:            `"back\\slash"`,
		"line\r\nbreak\x00\x7f": `"linebreak"`,
	} {
		if got := quoted(in); got != want {
			t.Errorf("quoted(%q) = %s, want %s", in, got, want)
		}
	}
}

// forgedAuthorization is an Authorization header of size bytes that no
// secret signed, of one shape: junk (no JWT at all), claims (a payload of
// thousands of distinct claim names) or scope (one long scope string).
func forgedAuthorization(shape string, size int) string {
	const prefix = "Bearer "
	b64 := base64.RawURLEncoding.EncodeToString
	head := b64([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "."
	sig := "." + b64(make([]byte, 32))
	// The payload's JSON is 3/4 of what its base64 may take.
	room := (size - len(prefix) - len(head) - len(sig)) * 3 / 4
	var payload []byte
	switch shape {
	case "junk":
		junk := make([]byte, size-len(prefix))
		for i := range junk {
			junk[i] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_."[i*7919%65]
		}
		return prefix + string(junk)
	case "claims":
		payload = []byte(`{"exp":4102444800`)
		for i := 0; len(payload)+16 < room; i++ {
			payload = fmt.Appendf(payload, `,"c%d":%d`, i, i%10)
		}
	case "scope":
		payload = []byte(`{"exp":4102444800,"scope":"`)
		for len(payload)+16 < room {
			payload = append(payload, "ARCHIVE_READ "...)
		}
		payload = append(payload, '"')
	default:
		panic("forgedAuthorization: no shape " + shape)
	}
	payload = append(payload, '}')
	return prefix + head + b64(payload) + sig
}

// A forged Authorization header of any shape and any size is a 401 with
// invalid_token: over 8 KiB for its length, under it once read to the
// end (BenchmarkForgedAuthorization measures what each costs).
func TestForgedAuthorization(t *testing.T) {
	ts := newTestServer(t, staticLoader(okRep(`{"_items":[]}`), nil))
	for _, shape := range []string{"junk", "claims", "scope"} {
		for _, size := range []int{maxAuthorization - 64, 64 << 10} {
			t.Run(fmt.Sprintf("%s/%d", shape, size), func(t *testing.T) {
				auth := forgedAuthorization(shape, size)
				if len(auth) > size || len(auth) < size-64 {
					t.Fatalf("the header has %d bytes, want about %d", len(auth), size)
				}
				desc := "the token's signature is invalid" // read to the end, and refused for it
				switch {
				case size > maxAuthorization:
					desc = "the Authorization header is longer than 8 KiB"
				case shape == "junk":
					desc = "the token is malformed"
				}
				res := do(t, ts, http.MethodGet, "/prodapi/v1/items", "Authorization", auth)
				want := `Bearer realm="prodapi", error="invalid_token", error_description="` + desc + `"`
				if got := res.header.Get("Www-Authenticate"); res.status != 401 || got != want {
					t.Errorf("%d, WWW-Authenticate %q; want 401, %q", res.status, got, want)
				}
			})
		}
	}
}
