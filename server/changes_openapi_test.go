package server_test

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/server/changes"
	"github.com/prodapi/prodapi/server/changes/changestest"
	"github.com/prodapi/prodapi/sources"
)

// panickingLog is a change log with a defect: every read panics.
type panickingLog struct{ *changestest.Log }

func (panickingLog) Read(context.Context, string, []string, int) ([]sources.LogEntry, string, error) {
	panic("test: a defect in the change log")
}

// newOAChangesServer serves /changes of log, with authentication on.
func newOAChangesServer(t *testing.T, log changes.Log) *httptest.Server {
	t.Helper()
	srv := server.New(nil, server.Options{
		Auth:    server.AuthOptions{Enabled: true, Secret: []byte(oaSecret), Now: oaNow},
		Now:     oaNow,
		Changes: changes.New(log, changes.Options{}),
	})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// oaChangesExchanges requests /changes in every way that changes its
// status, pulled and streamed, for TestOpenAPIResponses; the events of
// a stream are held to the document here.
func oaChangesExchanges(t *testing.T, d *openAPIDoc) []*oaExchange {
	t.Helper()
	log := changestest.NewLog()
	ts := newOAChangesServer(t, log)
	all := oaToken(t, sources.AllScopes...)
	desks := oaToken(t, sources.ScopeDesks)
	item := "urn:newsml:riverton.example:2026-11-19T18:05:20.436314:a3a0921f-4393-462e-b5ba-04ffb1315805"
	log.Append("items", item, sources.OpUpdate, oaNow().Add(-2*time.Second))
	log.Append("desks", "67c42d4c957184d45484e656", sources.OpReplace, time.Time{})
	log.Append("planning", "", sources.OpFlush, oaNow())
	log.Append("items", item, sources.OpDelete, oaNow())

	var exchanges []*oaExchange
	do := func(base, name, method, target string, status int, header ...string) *oaExchange {
		t.Helper()
		x := oaDo(t, base, name, method, oaPrefix+"/changes"+target, header...)
		if x.status != status {
			t.Errorf("%s: %s %s → %d, want %d: %s", name, method, target, x.status, status, x.body)
		}
		exchanges = append(exchanges, x)
		return x
	}
	do(ts.URL, "changes", "GET", "", 200, "Authorization", all)
	do(ts.URL, "changes, paged", "GET", "/?max_results=2&since=1-0&pretty", 200, "Authorization", all)
	do(ts.URL, "changes, desks only", "GET", "?resources=desks", 200, "Authorization", desks)
	do(ts.URL, "changes, since=now", "GET", "?since=now&wait=0", 200, "Authorization", all)
	do(ts.URL, "changes, HEAD", "HEAD", "", 200, "Authorization", all)
	do(ts.URL, "changes, bad since", "GET", "?since=yesterday", 400, "Authorization", all)
	do(ts.URL, "changes, bad wait", "GET", "?wait=120", 400, "Authorization", all)
	do(ts.URL, "changes, unknown resource", "GET", "?resources=item", 400, "Authorization", all)
	do(ts.URL, "changes, no token", "GET", "", 401)
	do(ts.URL, "changes, no resource scope", "GET", "", 403, "Authorization", oaToken(t))
	do(ts.URL, "changes, resource outside the scopes", "GET", "?resources=planning", 403, "Authorization", desks)
	do(ts.URL, "changes, 414", "GET", "?q="+strings.Repeat("a", 17<<10), 414, "Authorization", all)
	do(ts.URL, "changes, POST", "POST", "", 405, "Authorization", all)
	exchanges = append(exchanges, oaStream(t, d, ts.URL, log, all))

	log.Trim(2)
	do(ts.URL, "changes, trimmed", "GET", "?since=1-0", 410, "Authorization", all)
	do(ts.URL, "changes, trimmed, streamed", "GET", "?since=1-0", 410, "Authorization", all, "Accept", "text/event-stream")
	log.Fail(errors.New("test: the log is down"))
	do(ts.URL, "changes, log down", "GET", "", 503, "Authorization", all)
	do(newOAChangesServer(t, panickingLog{changestest.NewLog()}).URL, "changes, defect", "GET", "", 500, "Authorization", all)
	return exchanges
}

// oaStream reads a stream of the log's entries until the log drops its
// position (a close event, 410, ends it), and holds each event's data to
// the document: an entry to ChangeEntry, the close event to the error
// envelope.
func oaStream(t *testing.T, d *openAPIDoc, base string, log *changestest.Log, auth string) *oaExchange {
	t.Helper()
	// A stream that never ends fails the test rather than hang it.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", base+oaPrefix+"/changes", nil)
	req.Header.Set("Authorization", auth)
	req.Header.Set("Accept", "text/event-stream")
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	r := bufio.NewReader(res.Body)
	var body strings.Builder
	events, closed := 0, false
	for !closed {
		line, err := r.ReadString('\n')
		body.WriteString(line)
		if err != nil {
			t.Fatalf("stream: %v after %q", err, body.String())
		}
		switch {
		case strings.HasPrefix(line, "event: change"):
			events++
			if events == 4 {
				// Caught up: the log drops the stream's position, then
				// grows, which wakes the stream to find it gone. (Trimmed
				// after the append, the stream could read the new entry
				// first and wait on past the trim.)
				log.Trim(5)
				log.Append("items", "urn:x", sources.OpUpdate, oaNow())
			}
		case strings.HasPrefix(line, "event: close"):
			closed = true
		default:
			continue
		}
		data, err := r.ReadString('\n')
		body.WriteString(data)
		if err != nil || !strings.HasPrefix(data, "data: ") {
			t.Fatalf("an event without data: %q %v", data, err)
		}
		v, err := decodeJSON([]byte(strings.TrimPrefix(data, "data: ")))
		if err != nil {
			t.Fatalf("event data: %v", err)
		}
		schema := map[string]any{"$ref": "#/components/schemas/ChangeEntry"}
		if closed {
			schema = map[string]any{"$ref": "#/components/schemas/Error"}
		}
		for _, e := range d.v.validate(schema, v) {
			t.Errorf("event %s: %s", data, e)
		}
	}
	if events != 4 {
		t.Errorf("%d change events, want 4", events)
	}
	return &oaExchange{name: "changes, streamed", method: "GET", target: oaPrefix + "/changes",
		status: res.StatusCode, header: res.Header, body: []byte(body.String())}
}
