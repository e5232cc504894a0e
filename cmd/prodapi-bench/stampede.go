package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// A stampedeResult is many concurrent requests on a few cold keys.
type stampedeResult struct {
	keys, perKey int
	loadCost     float64 // backend queries of one load of such a key, alone
	queries      float64 // backend queries the stampede caused
	s            *slice
}

// loads is how many loads the stampede's queries amount to.
func (r *stampedeResult) loads() float64 {
	if r.loadCost == 0 {
		return 0
	}
	return r.queries / r.loadCost
}

// stampede sends perKey requests on each of keys cold keys at once.
// Every connection is opened first, and every request written at the same
// instant, so all of them reach prodapi while the first load is under
// way. The backend queries they cause are compared with the cost of one
// load of a key of the same shape, measured alone just before.
func (h *harness) stampede(ctx context.Context, p *prodapiProc, keys, perKey int, newKey func() string) (*stampedeResult, error) {
	r := &stampedeResult{keys: keys, perKey: perKey, s: &slice{statuses: map[int]int{}, outcomes: map[string]int{}}}
	q0, err := p.sourceQueries(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := h.capture(ctx, p, newKey()); err != nil {
		return nil, err
	}
	q1, err := p.sourceQueries(ctx)
	if err != nil {
		return nil, err
	}
	r.loadCost = q1 - q0

	host := hostOf(p.base)
	var targets []string
	for range keys {
		targets = append(targets, newKey())
	}
	n := keys * perKey
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.Dial("tcp", host)
		if err != nil {
			return nil, fmt.Errorf("opening %d connections: %w", n, err)
		}
		conns = append(conns, c)
	}

	type answer struct {
		status  int
		outcome string
		lat     time.Duration
		err     error
	}
	answers := make([]answer, n)
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	for i, c := range conns {
		request := "GET " + targets[i%keys] + " HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: " + h.token + "\r\nAccept-Encoding: gzip\r\n\r\n"
		ready.Add(1)
		done.Go(func() {
			ready.Done()
			<-start
			t0 := time.Now()
			if _, err := io.WriteString(c, request); err != nil {
				answers[i].err = err
				return
			}
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				answers[i].err = err
				return
			}
			_, err = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			answers[i] = answer{status: res.StatusCode, outcome: outcomeOf(res.Header.Get("Cache-Status")), lat: time.Since(t0), err: err}
		})
	}
	ready.Wait()
	q0, err = p.sourceQueries(ctx)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	close(start)
	done.Wait()
	r.s.elapsed = time.Since(t0)
	// Loads run detached from the requests; with the answers in, they
	// are over.
	q1, err = p.sourceQueries(ctx)
	if err != nil {
		return nil, err
	}
	r.queries = q1 - q0
	for _, a := range answers {
		r.s.requests++
		if a.err != nil {
			r.s.errors++
			continue
		}
		r.s.statuses[a.status]++
		r.s.outcomes[a.outcome]++
		r.s.lat = append(r.s.lat, a.lat)
	}
	h.progress("stampede %d×%d: %.0f backend queries, one load costs %.0f: %.2f loads; %s", keys, perKey, r.queries, r.loadCost, r.loads(), outcomeSummary(r.s.outcomes, r.s.requests))
	return r, nil
}

func (r *stampedeResult) describe() string {
	if r.keys == 1 {
		return fmt.Sprintf("%d concurrent requests on one cold key", r.perKey)
	}
	return fmt.Sprintf("%d cold keys × %d concurrent requests", r.keys, r.perKey)
}

func (r *stampedeResult) ok() bool {
	return r.s.failed() == 0 && r.queries == float64(r.keys)*r.loadCost
}
