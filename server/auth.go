package server

import (
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/prodapi/prodapi/server/fairshare"
	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// AuthOptions configure token checks; the README ("Using the API") says
// which tokens are accepted.
type AuthOptions struct {
	// Enabled switches authentication on (PRODAPI_AUTH_ENABLED).
	Enabled bool
	// Secret is the HS256 key Superdesk's auth server signs with.
	Secret []byte
	// Leeway is the clock skew allowed on exp and nbf.
	Leeway time.Duration
	// Audience, when set, is the aud a token may carry; a token with any
	// aud is refused unless it names Audience.
	Audience string
	// TokenURL, when set, is the token endpoint of Superdesk's auth server
	// (PRODAPI_TOKEN_URL, an absolute http or https URL): the served
	// OpenAPI document then offers OAuth 2 client credentials against it,
	// and the reference page may reach its origin.
	TokenURL string
	// Issuer, when set, is the iss every token must carry
	// (PRODAPI_ISSUER); a token without it, or with another, is refused.
	Issuer string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Claims are what a verified token grants.
type Claims struct {
	ClientID string
	// Client names the client its limits count against: the token's
	// client_id, else its sub, else a hash of the token.
	Client  string
	Scopes  []string
	Expires time.Time

	// share is Client's share of the fair-share limiter, kept with the
	// claims of a remembered token (shareOf); nil until its first
	// request.
	share atomic.Pointer[fairshare.Share]
}

// Has reports whether the claims carry scope, by exact membership.
func (c *Claims) Has(scope string) bool { return slices.Contains(c.Scopes, scope) }

// tokenClaims is the JWT payload as Superdesk's auth server issues it:
// iss, iat, exp, client_id and scope (a list).
type tokenClaims struct {
	jwt.RegisteredClaims
	ClientID string          `json:"client_id,omitempty"`
	Scope    json.RawMessage `json:"scope,omitempty"`
}

// authenticator verifies tokens. Verified tokens are remembered (the
// whole token is the key, bounded in number) so that a client repeating
// its token pays the signature and parsing once; expiry and not-before
// are still checked against the clock on every request.
type authenticator struct {
	opts   AuthOptions
	parser *jwt.Parser

	// memo maps a token to its verified claims: a sync.Map, read
	// without a lock on every request; size bounds it.
	memo sync.Map
	size atomic.Int64
}

type verified struct {
	claims *Claims
	nbf    time.Time // zero: none
}

const maxMemo = 10000

// maxAuthorization is the longest Authorization header read: a longer one
// is refused (401, invalid_token) before any decoding. Superdesk's tokens
// take well under 2 KiB; a forged one costs its refusal nothing more.
const maxAuthorization = 8 << 10

func newAuthenticator(opts AuthOptions) *authenticator {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &authenticator{
		opts: opts,
		parser: jwt.NewParser(
			jwt.WithValidMethods([]string{"HS256"}),
			jwt.WithExpirationRequired(),
			jwt.WithLeeway(opts.Leeway),
			jwt.WithTimeFunc(opts.Now),
		),
	}
}

var (
	errNoToken     = errors.New("no token")
	errNoSecret    = errors.New("no shared secret")
	errBadScope    = errors.New("scope claim is neither a list of names nor a space-separated string")
	errAudience    = errors.New("token audience does not name this service")
	errDupClaim    = errors.New("token payload repeats a claim")
	errMalformed   = errors.New("token is not three base64url segments with a JSON object payload")
	errNumericDate = errors.New("token date claim is not a JSON number")
	errExtraWords  = errors.New("authorization header has words after the token")
	errTooLong     = errors.New("authorization header is longer than maxAuthorization")
	errIssuer      = errors.New("token issuer is not the one configured")
)

// verify returns the claims of the request's token, or an error (401),
// a remembered token judged at now (the request's time). A token not yet
// remembered is parsed and judged on the options' clock.
func (a *authenticator) verify(r *http.Request, now time.Time) (*Claims, error) {
	h := header(r.Header, "Authorization")
	if len(h) > maxAuthorization {
		return nil, errTooLong
	}
	tok, err := tokenFrom(h)
	if err != nil {
		return nil, err
	}
	if m, ok := a.memo.Load(tok); ok {
		v := m.(verified)
		if now.After(v.claims.Expires.Add(a.opts.Leeway)) {
			return nil, jwt.ErrTokenExpired
		}
		if !v.nbf.IsZero() && now.Add(a.opts.Leeway).Before(v.nbf) {
			return nil, jwt.ErrTokenNotValidYet
		}
		return v.claims, nil
	}
	c, nbf, err := a.parse(tok)
	if err != nil {
		return nil, err
	}
	if a.size.Load() >= maxMemo {
		for k := range a.memo.Range { // evict an arbitrary entry
			if _, loaded := a.memo.LoadAndDelete(k); loaded {
				a.size.Add(-1)
			}
			break
		}
	}
	if _, loaded := a.memo.LoadOrStore(tok, verified{claims: c, nbf: nbf}); !loaded {
		a.size.Add(1)
	}
	return c, nil
}

func (a *authenticator) parse(tok string) (*Claims, time.Time, error) {
	if len(a.opts.Secret) == 0 {
		return nil, time.Time{}, errNoSecret
	}
	if err := checkPayload(tok); err != nil {
		return nil, time.Time{}, err
	}
	var tc tokenClaims
	// Header keys (jwk, jku, x5u, kid) are never looked at: the key is
	// always the shared secret.
	if _, err := a.parser.ParseWithClaims(tok, &tc, func(*jwt.Token) (any, error) { return a.opts.Secret, nil }); err != nil {
		return nil, time.Time{}, err
	}
	if len(tc.Audience) > 0 && (a.opts.Audience == "" || !slices.Contains(tc.Audience, a.opts.Audience)) {
		return nil, time.Time{}, errAudience
	}
	if a.opts.Issuer != "" && tc.Issuer != a.opts.Issuer {
		return nil, time.Time{}, errIssuer
	}
	scopes, err := parseScope(tc.Scope)
	if err != nil {
		return nil, time.Time{}, err
	}
	c := &Claims{ClientID: tc.ClientID, Client: cmp.Or(tc.ClientID, tc.Subject), Scopes: scopes, Expires: tc.ExpiresAt.Time}
	if c.Client == "" {
		sum := sha256.Sum256([]byte(tok))
		c.Client = "#" + hex.EncodeToString(sum[:16])
	}
	var nbf time.Time
	if tc.NotBefore != nil {
		nbf = tc.NotBefore.Time
	}
	return c, nbf, nil
}

// checkPayload reads the token's claims with our one strict JSON reader
// before the JWT library sees them: a payload with duplicate keys (which
// different JSON parsers resolve differently) is refused, and so are exp,
// nbf and iat that are not JSON numbers (RFC 7519 NumericDate; the
// library would also take "4102444800", a string). A token that is not
// three segments or whose payload is not base64url is refused here too
// (the library would refuse it anyway).
func checkPayload(tok string) error {
	parts := strings.Split(tok, ".")
	if len(parts) != 3 {
		return errMalformed
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return errMalformed
	}
	v, err := codec.DecodeJSON(payload, codec.DecodeOptions{Strict: true, MaxDepth: 32})
	if err != nil {
		return fmt.Errorf("%w: %v", errDupClaim, err)
	}
	d, ok := v.(*sources.Doc)
	if !ok {
		return errMalformed
	}
	for _, name := range []string{"exp", "nbf", "iat"} {
		if c, ok := d.Get(name); ok {
			switch c.(type) {
			case int64, float64:
			default:
				return fmt.Errorf("%w: %s", errNumericDate, name)
			}
		}
	}
	return nil
}

// parseScope accepts a JSON list of names (what Superdesk issues) or a
// space-separated string (RFC 8693 style); a missing scope is no scopes.
func parseScope(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return strings.Fields(s), nil
	}
	return nil, errBadScope
}

// tokenFrom extracts the token as Eve's TokenAuth did: the username of
// Basic credentials; else "Bearer <t>" or "Token <t>" (case-insensitive,
// the second space-separated word); else the bare header value. Unlike
// Eve, which took the second word and ignored the rest, a scheme followed
// by more than one word is refused: "Bearer <t> <anything>" is not a
// credential RFC 6750 knows, and accepting it hides client bugs.
func tokenFrom(header string) (string, error) {
	h := strings.TrimSpace(header)
	if h == "" {
		return "", errNoToken
	}
	if scheme, rest, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "basic") {
		if raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(rest)); err == nil {
			if user, _, ok := strings.Cut(string(raw), ":"); ok && user != "" {
				return user, nil
			}
		}
		return "", errNoToken // undecodable Basic credentials carry no token
	}
	if hasPrefixFold(h, "bearer") || hasPrefixFold(h, "token") {
		// Eve took the second word of split(" "): the text between the
		// first space and the next.
		_, rest, ok := strings.Cut(h, " ")
		if !ok {
			return "", errNoToken
		}
		word, _, extra := strings.Cut(rest, " ")
		if extra && word != "" {
			return "", errExtraWords
		}
		if word == "" {
			return "", errNoToken
		}
		return word, nil
	}
	return h, nil
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// authorize checks the request's token and, when scope is not empty, that
// it grants scope (401, 403), then its client's rate limit (429). The
// client a verified token names goes to the access log, refused for its
// scope or not.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request, scope string) error {
	c, err := s.authenticate(w, r)
	if err != nil {
		return err
	}
	if c != nil && scope != "" && !c.Has(scope) {
		s.limits.Charge(w.Header(), s.shareOf(c, s.requestTime(w)), s.requestTime(w)) // refused, and still a request
		return forbidden(c, scope)
	}
	return s.admit(w, r, c)
}

// authenticate checks the request's address limit (429) and token (401)
// and returns what the token grants, naming its client in the access
// log; nil claims with authentication off. A token refused counts
// against its address's limit.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) (*Claims, error) {
	if err := s.checkAddress(w, r); err != nil {
		return nil, err
	}
	if !s.auth.opts.Enabled {
		return nil, nil
	}
	c, err := s.auth.verify(r, s.requestTime(w))
	if err != nil {
		s.unauthenticated(w, r)
		return nil, &httperr.Error{
			Status: http.StatusUnauthorized, Msg: msgCredentials, Err: err,
			Header: http.Header{"Www-Authenticate": {challenge(err)}},
		}
	}
	if info := infoOf(w); info != nil {
		info.clientID, info.client = c.ClientID, c.Client
	}
	return c, nil
}

// forbidden is the 403 of a token that lacks scope: the original's body,
// and a challenge naming the scope (space-separated scopes, any of which
// would do, for an endpoint that takes several).
func forbidden(c *Claims, scope string) *httperr.Error {
	return &httperr.Error{Status: http.StatusForbidden, Msg: msgInvalidScope,
		Err:    fmt.Errorf("token of client %q lacks %s", c.ClientID, scope),
		Header: http.Header{"Www-Authenticate": {scopeChallenge(scope)}},
	}
}

// realm is the protection space every challenge names.
const realm = `Bearer realm="prodapi"`

// tokenFaults say, in a 401's error_description, why a token that came
// was refused: the first whose error the refusal wraps. Short, fixed
// texts: never the token, a claim's value or the JWT library's words.
// Anything else refused is "malformed".
var tokenFaults = []struct {
	err  error
	desc string
}{
	{jwt.ErrTokenExpired, "the token has expired"},
	{jwt.ErrTokenNotValidYet, "the token is not valid yet"},
	{jwt.ErrTokenSignatureInvalid, "the token's signature is invalid"}, // also any algorithm but HS256
	{jwt.ErrTokenRequiredClaimMissing, "the token has no expiry"},
	{errAudience, "the token is for another audience"},
	{errIssuer, "the token is from another issuer"},
	{errBadScope, "the token's scope claim is malformed"},
	{errExtraWords, "the Authorization header has words after the token"},
	{errTooLong, "the Authorization header is longer than 8 KiB"},
	{errNoSecret, "the token cannot be verified"},
}

// challenge is a 401's WWW-Authenticate (RFC 6750 §3): the realm alone
// when the request carried no token; when it carried one, the realm,
// error="invalid_token" and a description of the fault.
func challenge(err error) string {
	if errors.Is(err, errNoToken) {
		return realm
	}
	desc := "the token is malformed"
	for _, f := range tokenFaults {
		if errors.Is(err, f.err) {
			desc = f.desc
			break
		}
	}
	return realm + `, error="invalid_token", error_description=` + quoted(desc)
}

// scopeChallenge is a 403's WWW-Authenticate: the scope the resource
// needs (RFC 6750 §3.1, insufficient_scope).
func scopeChallenge(scope string) string {
	return realm + `, error="insufficient_scope", scope=` + quoted(scope)
}

// quoted is s as an RFC 7235 quoted-string: quotes and backslashes
// escaped, control characters (which no quoted-string may hold) dropped.
func quoted(s string) string {
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < ' ' || c == 0x7f:
		default:
			b = append(b, c)
		}
	}
	return string(append(b, '"'))
}

// MintToken signs a token the way Superdesk's auth server issues them
// (HS256; iss, iat, exp, client_id, scope as a list). It serves
// `prodapi token` and tests.
func MintToken(secret []byte, clientID string, scopes []string, ttl time.Duration, now time.Time) (string, error) {
	if len(secret) == 0 {
		return "", errors.New("server: no shared secret to sign with")
	}
	if scopes == nil {
		scopes = []string{}
	}
	claims := jwt.MapClaims{
		"iss":       "Superdesk Auth Server",
		"iat":       now.Unix(),
		"exp":       now.Add(ttl).Unix(),
		"client_id": clientID,
		"scope":     scopes,
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}
