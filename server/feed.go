package server

import (
	"net/http"
	"time"

	"github.com/prodapi/prodapi/server/changes"
)

// getChanges authenticates a /changes request (401), admits it at its
// client's limit (429; a page costs 1) and hands it to the feed, which
// answers it or returns the failure for handle to write. The documents
// a page includes load through the cache, with the client in the
// request's context.
func (s *Server) getChanges(w http.ResponseWriter, r *http.Request) error {
	c, err := s.authenticate(w, r)
	if err != nil {
		return err
	}
	if err := s.admit(w, r, c); err != nil {
		return err
	}
	if ctx := s.loadContext(w, r); ctx != r.Context() {
		r = r.WithContext(ctx)
	}
	return s.feed.Serve(w, r, caller{s: s, w: w, claims: c})
}

// A caller is a /changes request's client as the feed sees it: its
// verified token, nil with authentication off.
type caller struct {
	s      *Server
	w      http.ResponseWriter
	claims *Claims
}

var _ changes.Caller = caller{}

func (c caller) Has(scope string) bool { return c.claims == nil || c.claims.Has(scope) }

func (c caller) Forbidden(scope string) error { return forbidden(c.claims, scope) }

func (c caller) Expires() (time.Duration, bool) {
	if c.claims == nil {
		return 0, false
	}
	return c.claims.Expires.Add(c.s.auth.opts.Leeway).Sub(c.s.requestTime(c.w)), true
}

func (c caller) Waits() {
	if info := infoOf(c.w); info != nil {
		info.untimed = true
	}
}
