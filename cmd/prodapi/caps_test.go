package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/realserver"
)

// At the connection cap, with every connection a waiting long poll, a
// new connection is served: the oldest long poll is answered at once,
// its empty page with the position to resume from, and its connection
// closes; the others wait on.
func TestConnCapAnswersTheOldestLongPoll(t *testing.T) {
	log := newCountingLog()
	fs := newFeedServer(t, log, 3, time.Hour)
	polls := fs.metrics.Gauge("prodapi_changes_polls", "")
	var conns []*rawConn
	for i := range 3 {
		c := dialRaw(t, fs.addr)
		if _, err := io.WriteString(c.c, "GET /prodapi/v1/changes?since=now&wait=60 HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		// One at a time: the first is the oldest.
		eventually(t, fmt.Sprintf("long poll %d to wait", i+1), func() bool { return polls.Value() == float64(i+1) })
		conns = append(conns, c)
	}

	fresh := dialRaw(t, fs.addr)
	if code, err := fresh.get(t); err != nil || code != 404 {
		t.Fatalf("a new connection at the cap: %d %v, want it served (404)", code, err)
	}
	res, err := http.ReadResponse(conns[0].r, nil)
	if err != nil {
		t.Fatalf("the oldest long poll: %v", err)
	}
	body, _ := io.ReadAll(res.Body)
	var page struct {
		Items []any                  `json:"_items"`
		Meta  struct{ Since string } `json:"_meta"`
	}
	if res.StatusCode != 200 || json.Unmarshal(body, &page) != nil || len(page.Items) != 0 || page.Meta.Since == "" {
		t.Errorf("the oldest long poll: %d %s, want the empty page with _meta.since", res.StatusCode, body)
	}
	if !conns[0].closed() {
		t.Error("the oldest long poll's connection stayed open")
	}
	if got := polls.Value(); got != 2 {
		t.Errorf("%v long polls wait, want 2", got)
	}
	log.append()
	for i, c := range conns[1:] {
		res, err := http.ReadResponse(c.r, nil)
		if err != nil {
			t.Fatalf("long poll %d: %v", i+2, err)
		}
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != 200 || !strings.Contains(string(body), `"_id":"1"`) {
			t.Errorf("long poll %d: %d %s, want the entry that came", i+2, res.StatusCode, body)
		}
	}
	shed := fs.metrics.Counter("prodapi_http_connections_shed_total", "", "reason")
	if got := []uint64{shed.Value("poll"), shed.Value("full"), shed.Value("idle")}; got[0] != 1 || got[1] != 0 || got[2] != 0 {
		t.Errorf("shed poll, full, idle = %v, want 1, 0, 0", got)
	}
}

// waitsServed is what a replica's /metrics says of its waiters: the
// event streams open and the long polls waiting.
func waitsServed(t *testing.T, in *instance) int {
	t.Helper()
	return int(in.metric(t, "prodapi_changes_streams") + in.metric(t, "prodapi_changes_polls"))
}

// A client's streams and long polls are capped across the fleet, on a
// real Redis: whichever replica it asks, it never holds more than
// PRODAPI_CLIENT_MAX_WAITS, and is answered 429 with Retry-After beyond;
// meanwhile another client opens a stream and a long poll.
func TestClientWaitsCapAcrossTheFleet(t *testing.T) {
	rs := realserver.StartRedis(t, 0)
	const maxWaits = 3
	fleet := []*instance{
		start(t, "REDIS_URL", rs.URL(), "PRODAPI_CLIENT_MAX_WAITS", fmt.Sprint(maxWaits)),
		start(t, "REDIS_URL", rs.URL(), "PRODAPI_CLIENT_MAX_WAITS", fmt.Sprint(maxWaits)),
	}
	auth := func(client string) string {
		tok, err := server.MintToken([]byte(devSecret), client, sources.AllScopes, time.Hour, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		return "Bearer " + tok
	}
	greedy, calm := auth("greedy"), auth("calm")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel() // every request ends
		wg.Wait()
	}()
	// open sends a stream (stream) or a long poll to in, and returns its
	// status once it is answered, or 0 once it waits (the replica counts
	// it among its waiters).
	open := func(in *instance, authorization string, stream bool) int {
		t.Helper()
		before := waitsServed(t, in)
		req, _ := http.NewRequestWithContext(ctx, "GET", in.base+"/prodapi/v1/changes?since=now&wait=60", nil)
		req.Header.Set("Authorization", authorization)
		if stream {
			req.Header.Set("Accept", "text/event-stream")
		}
		answered := make(chan *http.Response, 1)
		wg.Add(1)
		go func() { // ends when the request is answered, or when ctx ends
			defer wg.Done()
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				answered <- &http.Response{StatusCode: -1, Header: http.Header{}}
				return
			}
			if res.StatusCode != 200 || !stream {
				io.Copy(io.Discard, res.Body)
			}
			answered <- res
			<-ctx.Done()
			res.Body.Close()
		}()
		var status int
		eventually(t, "the request answered or waiting", func() bool {
			select {
			case res := <-answered:
				status = res.StatusCode
				if status == 429 && res.Header.Get("Retry-After") == "" {
					t.Error("a 429 without Retry-After")
				}
				if status != 200 || !stream {
					return true
				}
			default:
			}
			return waitsServed(t, in) > before
		})
		if status == 200 && stream {
			return 0 // an open stream waits
		}
		return status
	}

	held, refused := 0, 0
	for i := range 4 * maxWaits {
		switch status := open(fleet[i%2], greedy, i%3 == 0); status {
		case 0:
			held++
		case 429:
			refused++
		default:
			t.Fatalf("attempt %d: %d", i, status)
		}
	}
	if held != maxWaits || refused != 3*maxWaits {
		t.Errorf("the client holds %d waits and was refused %d times, want %d and %d", held, refused, maxWaits, 3*maxWaits)
	}
	if got := waitsServed(t, fleet[0]) + waitsServed(t, fleet[1]); got != maxWaits {
		t.Errorf("the replicas hold %d waits, want %d", got, maxWaits)
	}
	if s0, s1 := open(fleet[0], calm, true), open(fleet[1], calm, false); s0 != 0 || s1 != 0 {
		t.Errorf("another client's stream and long poll: %d %d, want both open", s0, s1)
	}
	for _, in := range fleet {
		if got := in.metric(t, `prodapi_cap_refusals_total{cap="client_waits"}`); got == 0 {
			t.Errorf("%s counted no refusal at the client's cap", in.base)
		}
	}
}
