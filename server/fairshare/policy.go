package fairshare

import (
	"math"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/server/metrics"
)

// The names of the policies in the RateLimit headers.
const (
	policyClient  = "client"
	policyAddress = "address"
)

// What a client reads in a 429's envelope: what it ran into, and what to
// do (the headers say how long).
const (
	msgClient  = "Too many requests: this client has spent its rate limit. Wait as long as Retry-After says before the next request; RateLimit says what is left."
	msgAddress = "Too many requests without valid credentials from this address. Wait as long as Retry-After says before the next request."
	msgLoads   = "Too many requests: this client has as many backend loads in flight as it may. Wait for an answer, or as long as Retry-After says."
)

// A policy is a limit as the headers name it, with the series its
// refusals count in.
type policy struct {
	name    string
	rate    Rate
	perSec  rate.Limit // Events per second
	limited metrics.CounterSeries
	msg     string
	// declared is RateLimit-Policy's value: "<name>";q=<events>;w=<seconds>.
	declared []string
	// values are RateLimit's values by r and t (t 0 or 1, the values a
	// limit per second has), made on first use; nil for a limit with
	// more events than maxValues, which keeps its last value instead
	// (a bucket far from empty says the same r on every request).
	values []atomic.Pointer[[]string]
	last   atomic.Pointer[lastValue]
}

// A lastValue is RateLimit's last value of a policy without values.
type lastValue struct {
	r, t  int64
	value []string
}

// maxValues bounds the values a policy keeps made.
const maxValues = 8192

func newPolicy(name string, r Rate, limited metrics.CounterSeries, msg string) *policy {
	p := &policy{name: name, rate: r, perSec: rate.Limit(float64(r.Events) / r.Per.Seconds()), limited: limited, msg: msg}
	window := max(int64(math.Ceil(r.Per.Seconds())), 1)
	p.declared = []string{strconv.Quote(name) + ";q=" + strconv.Itoa(r.Events) + ";w=" + strconv.FormatInt(window, 10)}
	if n := 2 * (r.Events + 1); n <= maxValues {
		p.values = make([]atomic.Pointer[[]string], n)
	}
	return p
}

// state is what a bucket holding tokens says in RateLimit: r, the whole
// events it holds, and t, the seconds until it is full.
func (p *policy) state(tokens float64) (r, t int64) {
	burst := float64(p.rate.Events)
	tokens = min(tokens, burst)
	r = int64(max(tokens, 0))
	t = int64(math.Ceil((burst - tokens) / float64(p.perSec)))
	return r, t
}

// header says in h what a bucket holding tokens has left.
func (p *policy) header(h http.Header, tokens float64) {
	h["Ratelimit-Policy"] = p.declared
	h["Ratelimit"] = p.value(p.state(tokens))
}

// value is RateLimit's value: "<name>";r=<r>;t=<t>.
func (p *policy) value(r, t int64) []string {
	if i := 2*r + t; t <= 1 && i < int64(len(p.values)) {
		if v := p.values[i].Load(); v != nil {
			return *v
		}
		v := []string{p.format(r, t)}
		p.values[i].Store(&v)
		return v
	}
	if l := p.last.Load(); l != nil && l.r == r && l.t == t {
		return l.value
	}
	l := &lastValue{r: r, t: t, value: []string{p.format(r, t)}}
	p.last.Store(l)
	return l.value
}

func (p *policy) format(r, t int64) string {
	b := make([]byte, 0, len(p.name)+24)
	b = strconv.AppendQuote(b, p.name)
	b = append(b, ";r="...)
	b = strconv.AppendInt(b, r, 10)
	b = append(b, ";t="...)
	b = strconv.AppendInt(b, t, 10)
	return string(b)
}

// wait is how long until a bucket holding tokens holds need.
func (p *policy) wait(tokens float64, need int) time.Duration {
	return time.Duration((float64(need) - tokens) / float64(p.perSec) * float64(time.Second))
}

// refusal is the 429 of a request refused by a bucket holding tokens,
// which holds what it needed after wait: Retry-After is that wait in
// whole seconds, at least 1, and RateLimit's t the same.
func (p *policy) refusal(tokens float64, wait time.Duration, cause error) *httperr.Error {
	retry := retryAfter(wait)
	r, _ := p.state(tokens)
	return &httperr.Error{Status: http.StatusTooManyRequests, Msg: p.msg, Err: cause, Header: http.Header{
		"Retry-After":      {strconv.FormatInt(retry, 10)},
		"Ratelimit-Policy": p.declared,
		"Ratelimit":        {p.format(r, retry)},
	}}
}

// retryAfter is a wait in Retry-After's whole seconds: rounded up, at
// least 1.
func retryAfter(wait time.Duration) int64 {
	return max(int64(math.Ceil(wait.Seconds())), 1)
}

// loadCapRefusal is the 429 of a request whose client has MaxLoads loads
// in flight: a load ends soon, so one second, and what its bucket says.
func loadCapRefusal(s *Share, now time.Time) *httperr.Error {
	h := http.Header{"Retry-After": {"1"}}
	if p := s.policy; p != nil {
		p.header(h, s.local.Load().TokensAt(now))
	}
	return &httperr.Error{Status: http.StatusTooManyRequests, Msg: msgLoads, Err: errLoadCap, Header: h}
}
