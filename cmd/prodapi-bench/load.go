package main

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// newClient is the load generator's client: keep-alive connections, one
// per concurrent request, and bodies read as they come (requests ask for
// gzip themselves; the client does not decompress).
func newClient(conns int) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			MaxIdleConns:        conns + 16,
			MaxIdleConnsPerHost: conns + 16,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
	}
}

// A picker gives one worker its next request target; newPicker makes
// one per worker, with its own random source.
type picker func() string

// A target set: how workers pick targets, and whether a target repeats
// (then a worker builds its request once and reuses it).
type targets struct {
	newPicker func(worker int, rng *rand.Rand) picker
	repeat    bool
}

// uniform picks among list with equal probability.
func uniform(list []string) targets {
	return targets{repeat: true, newPicker: func(_ int, rng *rand.Rand) picker {
		return func() string { return list[rng.IntN(len(list))] }
	}}
}

// zipf picks list[k] with probability proportional to 1/(1+k)^s.
func zipf(list []string, s float64) targets {
	return targets{repeat: true, newPicker: func(_ int, rng *rand.Rand) picker {
		z := rand.NewZipf(rand.New(rng), s, 1, uint64(len(list)-1))
		return func() string { return list[z.Uint64()] }
	}}
}

// A slice is the result of driving one server for a while.
type slice struct {
	requests int
	errors   int            // transport errors
	statuses map[int]int    // status codes
	outcomes map[string]int // Cache-Status, classified (stampedes only)
	dropped  int            // open loop: requests the schedule could not issue
	lat      []time.Duration
	elapsed  time.Duration
}

func (s *slice) add(o *slice) {
	s.requests += o.requests
	s.errors += o.errors
	s.dropped += o.dropped
	s.elapsed += o.elapsed
	s.lat = append(s.lat, o.lat...)
	if s.statuses == nil {
		s.statuses, s.outcomes = map[int]int{}, map[string]int{}
	}
	for k, v := range o.statuses {
		s.statuses[k] += v
	}
	for k, v := range o.outcomes {
		s.outcomes[k] += v
	}
}

func (s *slice) rps() float64 {
	if s.elapsed <= 0 {
		return 0
	}
	return float64(s.requests) / s.elapsed.Seconds()
}

// failed counts transport errors and responses other than 200.
func (s *slice) failed() int {
	n := s.errors
	for code, c := range s.statuses {
		if code != http.StatusOK {
			n += c
		}
	}
	return n
}

func (s *slice) percentile(p float64) time.Duration {
	if len(s.lat) == 0 {
		return 0
	}
	if !slices.IsSorted(s.lat) {
		slices.Sort(s.lat)
	}
	i := int(p * float64(len(s.lat)-1))
	return s.lat[i]
}

// outcomeOf classifies a Cache-Status header (see cache/doc.go).
func outcomeOf(cs string) string {
	switch {
	case cs == "":
		return "none"
	case strings.Contains(cs, "fwd=bypass"):
		return "bypass"
	case strings.Contains(cs, "fwd=stale"):
		return "stale-if-error"
	case strings.Contains(cs, "collapsed"):
		return "collapsed"
	case strings.Contains(cs, "fwd=miss"):
		return "miss"
	case strings.Contains(cs, "hit; ttl=-"):
		return "stale"
	case strings.Contains(cs, "hit"):
		return "hit"
	}
	return "other"
}

// A load drives one server with the harness's client settings.
type load struct {
	base   string
	client *http.Client
	token  string
	conns  int
	rate   float64 // open loop when > 0
	seed   uint64
}

// run drives the server for d: conns workers in a closed loop, or, with
// a rate, requests issued on a fixed schedule and timed from their
// scheduled start (so a stall counts against the server, not the
// client).
func (l *load) run(ctx context.Context, d time.Duration, t targets) *slice {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var tickets chan time.Time
	var dropped atomic.Int64
	if l.rate > 0 {
		tickets = make(chan time.Time, 1<<16)
		go schedule(ctx, l.rate, tickets, &dropped) // ends at the deadline
	}
	results := make([]*slice, l.conns)
	start := time.Now()
	var wg sync.WaitGroup
	for w := range l.conns {
		l.seed++
		rng := rand.New(rand.NewPCG(l.seed, uint64(w)))
		wg.Go(func() { results[w] = l.worker(ctx, t.newPicker(w, rng), t.repeat, tickets) })
	}
	wg.Wait()
	total := &slice{elapsed: time.Since(start)}
	for _, r := range results {
		r.elapsed = 0
		total.add(r)
	}
	total.dropped = int(dropped.Load())
	return total
}

// schedule sends the start time of each request of an open-loop run, at
// rate per second, until ctx ends; a full queue drops the request.
func schedule(ctx context.Context, rate float64, tickets chan<- time.Time, dropped *atomic.Int64) {
	defer close(tickets)
	interval := time.Duration(float64(time.Second) / rate)
	next := time.Now()
	for {
		for now := time.Now(); !next.After(now); next = next.Add(interval) {
			select {
			case tickets <- next:
			default:
				dropped.Add(1)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(next)):
		}
	}
}

func (l *load) worker(ctx context.Context, pick picker, repeat bool, tickets <-chan time.Time) *slice {
	s := &slice{statuses: map[int]int{}, outcomes: map[string]int{}}
	reqs := map[string]*http.Request{}
	for ctx.Err() == nil {
		start := time.Now()
		if tickets != nil {
			t, ok := <-tickets
			if !ok {
				break
			}
			start = t
		}
		target := pick()
		req := reqs[target]
		if req == nil {
			req = newRequest(l.base+target, l.token)
			if repeat {
				reqs[target] = req
			}
		}
		res, err := l.client.Do(req)
		if err == nil {
			_, err = io.Copy(io.Discard, res.Body)
			res.Body.Close()
		}
		s.requests++
		s.lat = append(s.lat, time.Since(start))
		if err != nil {
			s.errors++
			continue
		}
		s.statuses[res.StatusCode]++
	}
	return s
}

// newRequest is a GET with the token, asking for gzip as HTTP libraries
// do. Requests carry no context: a run's deadline never cuts one short
// (the client's timeout bounds them).
func newRequest(rawURL, token string) *http.Request {
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		panic(err) // the harness builds every URL
	}
	if token != "" {
		req.Header.Set("Authorization", token)
	}
	req.Header.Set("Accept-Encoding", "gzip")
	return req
}
