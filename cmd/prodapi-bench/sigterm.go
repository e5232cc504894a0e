package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// A sigtermResult is SIGTERM under load (no failed in-flight request,
// exit within 10s).
//
// A request is accepted when prodapi has read it and run its handler:
// its access log then has a line with the request's X-Request-Id (the
// line is written when the handler returns, and Shutdown waits for
// handlers). An accepted request is lost unless its client got a whole
// 200 response, and also when prodapi ran it twice (a client retry of a
// request it had read). A request refused at connect time, after the
// listener closed, or reset before prodapi read it (no log line) was
// never accepted: a client retries it elsewhere, as a load balancer does
// when a replica goes away. Go's client already resends a GET whose
// keep-alive connection the server closed as idle before reading it.
// All of this holds when prodapi drained (exit status 0 and its "stopped"
// line); when it did not, every failed request without a log line counts
// as lost.
type sigtermResult struct {
	sent       int
	inFlight   int // started before SIGTERM, finished after it
	afterTerm  int // started after SIGTERM
	ok         int // 200
	refused    int // connection refused: never accepted
	unaccepted int // other transport errors, never read by prodapi (no log line)
	lost       []string
	exitAfter  time.Duration
	exitErr    error
	stopped    bool // prodapi logged its clean stop
}

// sigterm drives prodapi with a mix of hits (the Zipf mix) and misses
// (each waiting on the backend), sends SIGTERM after two seconds, and
// keeps sending until the listener refuses connections.
func (h *harness) sigterm(ctx context.Context, p *prodapiProc, mix []string, newMiss func() string) (*sigtermResult, error) {
	type record struct {
		id         string
		start, end time.Time
		status     int
		err        error
	}
	client := newClient(h.o.conns)
	records := make([][]record, h.o.conns)
	var seq atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range h.o.conns {
		rng := rand.New(rand.NewPCG(uint64(w), 13))
		pick := zipf(mix, h.o.zipfS).newPicker(w, rng)
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				target := pick()
				if rng.IntN(2) == 0 {
					target = newMiss()
				}
				rec := record{id: fmt.Sprintf("bench-%s-%d", h.runID, seq.Add(1))}
				req := newRequest(p.base+target, h.token)
				req.Header.Set("X-Request-Id", rec.id)
				rec.start = time.Now()
				res, err := client.Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, res.Body)
					res.Body.Close()
					rec.status = res.StatusCode
				}
				rec.end, rec.err = time.Now(), err
				records[w] = append(records[w], rec)
				if errors.Is(err, syscall.ECONNREFUSED) {
					return // the listener is closed: every later request is refused too
				}
			}
		})
	}

	r := &sigtermResult{}
	select {
	case <-time.After(2 * time.Second):
	case <-ctx.Done():
	}
	term := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		r.exitAfter, r.exitErr = time.Since(term), p.err
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
		r.exitAfter, r.exitErr = time.Since(term), errors.New("did not exit within 30s of SIGTERM: killed")
	}
	// With the process gone, every worker's next request is refused.
	done := make(chan struct{})
	go func() { // ends when every worker has returned
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		close(stop)
		<-done
	}

	logged, stopped, err := accessLog(p.logPath)
	if err != nil {
		return nil, err
	}
	r.stopped = stopped
	// Only a drained exit vouches for requests without a log line: then
	// Shutdown waited for every connection that had started reading a
	// request. Otherwise a handler may have been cut before it logged
	// (and Go's client may have resent its GET into a refused connect),
	// so every failed request without a log line counts as lost.
	drained := r.exitErr == nil && r.stopped
	for _, recs := range records {
		for _, rec := range recs {
			r.sent++
			if rec.start.Before(term) && rec.end.After(term) {
				r.inFlight++
			}
			if !rec.start.Before(term) {
				r.afterTerm++
			}
			statuses := logged[rec.id]
			switch {
			case len(statuses) > 1:
				r.lost = append(r.lost, fmt.Sprintf("%s: run %d times by prodapi (statuses %v)", rec.id, len(statuses), statuses))
			case rec.err == nil && rec.status == http.StatusOK:
				r.ok++
			case rec.err == nil:
				r.lost = append(r.lost, fmt.Sprintf("%s: answered %d", rec.id, rec.status))
			case len(statuses) == 0 && !drained:
				r.lost = append(r.lost, fmt.Sprintf("%s: %v, no log line, and prodapi did not drain", rec.id, rec.err))
			case errors.Is(rec.err, syscall.ECONNREFUSED) && len(statuses) == 0:
				r.refused++
			case len(statuses) == 0:
				r.unaccepted++
			default:
				r.lost = append(r.lost, fmt.Sprintf("%s: accepted (logged %v) but the client got %v", rec.id, statuses, rec.err))
			}
		}
	}
	h.progress("sigterm: %d requests, %d in flight at SIGTERM, %d ok, %d lost, %d refused after close, %d reset unread; exit after %s (%v)",
		r.sent, r.inFlight, r.ok, len(r.lost), r.refused, r.unaccepted, r.exitAfter.Round(time.Millisecond), r.exitErr)
	return r, nil
}

// accessLog reads prodapi's log: the statuses logged for each request
// id, and whether it logged its clean stop.
func accessLog(path string) (map[string][]int, bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	logged := map[string][]int{}
	stopped := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), `"msg":"request"`) {
			stopped = stopped || strings.Contains(string(line), `"msg":"stopped"`)
			continue
		}
		var l struct {
			ID     string `json:"request_id"`
			Status int    `json:"status"`
		}
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, false, fmt.Errorf("prodapi's log: %w", err)
		}
		logged[l.ID] = append(logged[l.ID], l.Status)
	}
	return logged, stopped, sc.Err()
}

func (r *sigtermResult) passed() bool {
	return len(r.lost) == 0 && r.exitErr == nil && r.exitAfter <= 10*time.Second && r.stopped
}
