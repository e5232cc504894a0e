package server

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

// readiness is /readyz: the checks it probes, whether it needs a backend
// up (Options.ReadyRequiresBackends), and whether the replica drains.
type readiness struct {
	checks          []Check
	requireBackends bool
	draining        atomic.Bool
	checkUp         *metrics.Gauge
}

func newReadiness(checks []Check, requireBackends bool, m *metrics.Metrics) *readiness {
	return &readiness{checks: checks, requireBackends: requireBackends,
		checkUp: m.Gauge("prodapi_check_up",
			"1 while the named check of /readyz (mongo, elastic, sandbox, redis, change_feed, rate_limits) passed its last probe, 0 while it failed.", "check")}
}

// ServeHTTP answers /readyz: whether this replica takes traffic, and how its
// dependencies are. Readiness is the replica's own: 200 while it serves,
// 503 once it drains (Drain, on SIGTERM) so that load balancers stop
// sending before the listener closes. A backend outage does not make it
// unready: every replica shares the backends, and a fleet that turned
// unready together would have no endpoint left to serve its stale
// entries from. With Options.ReadyRequiresBackends it also answers 503
// while no critical check passes, as readiness did before.
//
// Every check is probed at once, each under a second; the body names
// each one's state, never an error's text: {"status": "ready" (all
// pass), "degraded" (some fail), "unavailable" (no backend, when that
// decides) or "draining", "checks": {...}}, and "notes": {...} when a
// check has something to say (Check.Note). Each probe also sets
// prodapi_check_up{check}.
func (rd *readiness) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), time.Second)
	defer cancel()
	states := rd.probe(ctx)
	checks, notes := sources.NewDoc(), sources.NewDoc()
	critical, up, allUp := 0, 0, true
	for i, c := range rd.checks {
		checks.Set(c.Name, states[i])
		if c.Note != nil {
			if n := c.Note(); n != "" {
				notes.Set(c.Name, n)
			}
		}
		if states[i] != "ok" {
			allUp = false
		}
		if c.Critical {
			critical++
			if states[i] == "ok" {
				up++
			}
		}
	}
	status, code := "ready", http.StatusOK
	switch {
	case rd.draining.Load():
		status, code = "draining", http.StatusServiceUnavailable
	case rd.requireBackends && critical > 0 && up == 0:
		status, code = "unavailable", http.StatusServiceUnavailable
	case !allUp:
		status = "degraded"
	}
	doc := sources.D("status", status, "checks", checks)
	if notes.Len() > 0 {
		doc.Set("notes", notes)
	}
	body := codec.AppendJSON(nil, doc)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	w.Write(body)
}

// probe runs every check at once and returns their states in order: ok,
// timeout or unavailable. It records each in prodapi_check_up.
func (rd *readiness) probe(ctx context.Context) []string {
	states := make([]string, len(rd.checks))
	var wg sync.WaitGroup
	for i, c := range rd.checks {
		wg.Go(func() {
			switch kind, _ := sources.Classify(c.Probe(ctx)); kind {
			case sources.KindNone:
				states[i] = "ok"
			case sources.KindTimeout:
				states[i] = "timeout"
			default:
				states[i] = "unavailable"
			}
		})
	}
	wg.Wait()
	for i, c := range rd.checks {
		v := 0.0
		if states[i] == "ok" {
			v = 1
		}
		rd.checkUp.Set(v, c.Name)
	}
	return states
}
