package server

import (
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/go-chi/chi/v5"

	"github.com/prodapi/prodapi/server/metrics"
)

// outcomes are the outcome label values of
// prodapi_http_request_duration_seconds: the cache outcomes a response
// carries (sources.Representation.Outcome), "error" for a 5xx answered
// without one, and "none" for every other response the cache had no part
// in (health, metrics, refused requests).
var outcomes = [...]string{"hit", "stale", "miss", "collapsed", "bypass", "error", "none"}

const (
	outcomeError = 5
	outcomeNone  = 6
)

// outcomeIndex is the index of a response's outcome in outcomes, or -1
// for an outcome not in the list.
func outcomeIndex(outcome string, status int) int {
	switch outcome {
	case "hit":
		return 0
	case "stale":
		return 1
	case "miss":
		return 2
	case "collapsed":
		return 3
	case "bypass":
		return 4
	case "error":
		return outcomeError
	case "":
		if status >= 500 {
			return outcomeError
		}
		return outcomeNone
	}
	return -1
}

// durationTable holds the request series of every route: a row per
// route, made when the router is built, with the duration series of each
// outcome and the request counter of each common status code. The
// counters of the server errors (5xx) are resolved with the row,
// so they exist at 0 from the start: an alert on the rate of 5xx has
// data, and sees the first one. The other series are resolved on their
// first request (so routes, outcomes and other codes never seen expose
// no series), after which recording a request allocates nothing and
// takes no lock.
type durationTable struct {
	hist     *metrics.Histogram
	requests *metrics.Counter
	routes   map[string]*durationRow // written only before serving
}

type durationRow struct {
	observers [len(outcomes)]atomic.Pointer[metrics.Observer]
	counters  [len(commonCodes)]atomic.Pointer[metrics.CounterSeries]
}

// commonCodes are the status codes whose request counters a row keeps:
// among them the server errors the API answers with (internal,
// unavailable, timeout), whose counters exist from the start.
var commonCodes = [...]int{200, 206, 302, 304, 400, 401, 403, 404, 500, 503, 504}

func newDurationTable(hist *metrics.Histogram, requests *metrics.Counter) *durationTable {
	return &durationTable{hist: hist, requests: requests, routes: map[string]*durationRow{}}
}

// add makes the row of route, with its server-error counters at 0, unless
// it has one (both routers have "unmatched").
func (t *durationTable) add(route string) {
	if t.routes[route] != nil {
		return
	}
	row := new(durationRow)
	for i, code := range commonCodes {
		if code >= 500 {
			c := t.requests.Series(route, strconv.Itoa(code))
			row.counters[i].Store(&c)
		}
	}
	t.routes[route] = row
}

// addRoutes resolves the series of every route of r, and of "unmatched".
func (t *durationTable) addRoutes(r chi.Routes) {
	t.add("unmatched")
	chi.Walk(r, func(_, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		t.add(route)
		return nil
	})
}

// observer returns the series of route and outcome.
func (t *durationTable) observer(route, outcome string, status int) metrics.Observer {
	i := outcomeIndex(outcome, status)
	if row := t.routes[route]; row != nil && i >= 0 {
		if o := row.observers[i].Load(); o != nil {
			return *o
		}
		o := t.hist.Observer(route, outcomes[i]) // the same series, should two requests race here
		row.observers[i].Store(&o)
		return o
	}
	if i >= 0 {
		outcome = outcomes[i]
	}
	return t.hist.Observer(route, outcome) // a route or outcome not foreseen: looked up, still without garbage
}

// count counts a request of route answered with status.
func (t *durationTable) count(route string, status int) {
	row := t.routes[route]
	i := slices.Index(commonCodes[:], status)
	if row == nil || i < 0 {
		t.requests.Inc(route, statusLabel(status))
		return
	}
	if c := row.counters[i].Load(); c != nil {
		(*c).Inc()
		return
	}
	c := t.requests.Series(route, statusLabel(status))
	row.counters[i].Store(&c)
	c.Inc()
}
