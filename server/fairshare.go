package server

import (
	"context"
	"net/http"
	"time"

	"github.com/prodapi/prodapi/server/fairshare"
	"github.com/prodapi/prodapi/sources"
)

// The fair-share limiter's places in a request (Options.Limits; the
// order is the contract's): after routing, the address limit
// (checkAddress), then authentication, whose refusals the address pays
// for (unauthenticated), then the scope, whose refusals the client pays
// for, then the client's limit (admit), then the parameters; and the
// loads the request starts, which the cache charges to the client it
// finds in the request's context (loadContext). Every answer after
// admit carries the RateLimit headers; the refusals of a client that
// does not wait as Retry-After says are held before they go out (hold).

// checkAddress refuses a request from an address that has spent its
// limit of refused requests (429).
func (s *Server) checkAddress(w http.ResponseWriter, r *http.Request) error {
	if !s.limits.Watching() {
		return nil
	}
	return s.hold(w, r, s.limits.CheckAddress(s.requests.clientAddr(w, r), s.requestTime(w)))
}

// hold holds a request refused at a rate limit before its 429 goes out,
// when its client did not wait as its last 429 said (fairshare's Hold: a
// second), and leaves it out of the request-duration histogram, whose
// latencies it would swamp, as long polls are. It returns err.
func (s *Server) hold(w http.ResponseWriter, r *http.Request, err error) error {
	if err != nil && s.limits.Hold(r.Context(), err) {
		if info := infoOf(w); info != nil {
			info.untimed = true
		}
	}
	return err
}

// unauthenticated charges a request authentication refused to its
// address.
func (s *Server) unauthenticated(w http.ResponseWriter, r *http.Request) {
	if s.limits != nil {
		s.limits.Unauthenticated(w.Header(), s.requests.clientAddr(w, r), s.requestTime(w))
	}
}

// admit charges the request to its client (the token's, or with
// authentication off, its address), or refuses it: 429 once the
// client's limit is spent. The client's share goes with the request, for
// the loads it starts.
func (s *Server) admit(w http.ResponseWriter, r *http.Request, c *Claims) error {
	if s.limits == nil {
		return nil
	}
	now := s.requestTime(w)
	var share *fairshare.Share
	var err error
	if c == nil {
		share, err = s.limits.AdmitAddress(w.Header(), s.requests.clientAddr(w, r), now)
	} else {
		share = s.shareOf(c, now)
		err = s.limits.Admit(w.Header(), share, now)
	}
	if info := infoOf(w); info != nil && err == nil {
		info.share = share
	}
	return s.hold(w, r, err)
}

// shareOf is the share of c's client, kept with c: a remembered token's
// requests find it without asking the limiter, until the limiter forgets
// it.
func (s *Server) shareOf(c *Claims, now time.Time) *fairshare.Share {
	if sh := c.share.Load(); sh != nil && !sh.Forgotten() {
		return sh
	}
	sh := s.limits.Client(c.Client, now)
	if sh != nil {
		c.share.Store(sh)
	}
	return sh
}

// loadGate admits the loads of one request: its client's share
// (*fairshare.Share). The same interface as the cache's Gate, declared
// here as a type alias of its method set, so that the cache's LoadGated
// matches gatedLoader without the server importing the cache.
type loadGate = interface {
	AdmitLoad(ctx context.Context) (done func(), err error)
}

// A gatedLoader takes the gate of the loads a request may start with the
// request, asking it only if the request loads (the cache): a hit pays
// nothing for carrying it.
type gatedLoader interface {
	LoadGated(ctx context.Context, q *sources.Query, gate loadGate) (*sources.Representation, error)
}

// loadAs loads q for the request, its client paying for the load it may
// start: through the loader's gate when it has one, else through the
// context (loadContext).
func (s *Server) loadAs(w http.ResponseWriter, r *http.Request, q *sources.Query) (*sources.Representation, error) {
	if info := infoOf(w); info != nil && info.share != nil {
		if gl, ok := s.load.(gatedLoader); ok {
			return gl.LoadGated(r.Context(), q, info.share)
		}
	}
	return s.load.Load(s.loadContext(w, r), q)
}

// loadContext is the context of the loads the request starts: its own,
// with its client's share for the cache's gate to charge.
func (s *Server) loadContext(w http.ResponseWriter, r *http.Request) context.Context {
	if info := infoOf(w); info != nil && info.share != nil {
		return fairshare.WithShare(r.Context(), info.share)
	}
	return r.Context()
}
