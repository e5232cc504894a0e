package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/enrich"
	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/server/changes"
	"github.com/prodapi/prodapi/server/changes/changestest"
	"github.com/prodapi/prodapi/server/render"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// panickingLog is a change log with a defect: every read panics.
type panickingLog struct{ *changestest.Log }

func (panickingLog) Read(context.Context, string, []string, int) ([]sources.LogEntry, string, error) {
	panic("test: a defect in the change log")
}

// newOAChangesServer serves /changes of log, with authentication on, and
// the documents of load (include=doc; nil: none).
func newOAChangesServer(t *testing.T, log changes.Log, load server.Loader, edit ...func(*changes.Options)) *httptest.Server {
	t.Helper()
	var opts changes.Options
	for _, e := range edit {
		e(&opts)
	}
	srv := server.New(load, server.Options{
		Auth:    server.AuthOptions{Enabled: true, Secret: []byte(oaSecret), Now: oaNow},
		Now:     oaNow,
		Changes: changes.New(log, opts),
	})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return ts
}

// oaForeignPosition is a position of another server's log: it has a
// position's shape, and does not open.
var oaForeignPosition = strings.Repeat("AQ", 68)

// oaPosition is the position of the end of base's change log, as
// since=now gives it.
func oaPosition(t *testing.T, base, auth string) string {
	t.Helper()
	x := oaDo(t, base, "since=now", "GET", oaPrefix+"/changes?since=now", "Authorization", auth)
	var p struct {
		Meta struct{ Since string } `json:"_meta"`
	}
	if err := json.Unmarshal(x.body, &p); err != nil || p.Meta.Since == "" {
		t.Fatalf("since=now: %d %s", x.status, x.body)
	}
	return p.Meta.Since
}

// oaPositionAfter is the position after the first n entries of base's
// change log, as the answer holding them gives it.
func oaPositionAfter(t *testing.T, base, auth string, n int) string {
	t.Helper()
	x := oaDo(t, base, "first entries", "GET", oaPrefix+"/changes?max_results="+strconv.Itoa(n), "Authorization", auth)
	var p struct {
		Items []any                  `json:"_items"`
		Meta  struct{ Since string } `json:"_meta"`
	}
	if err := json.Unmarshal(x.body, &p); err != nil || len(p.Items) != n {
		t.Fatalf("the first %d entries: %d %s", n, x.status, x.body)
	}
	return p.Meta.Since
}

// oaChangesExchanges requests /changes in every way that changes its
// status, pulled and streamed, for TestOpenAPIResponses; the events of
// a stream are held to the document here.
func oaChangesExchanges(t *testing.T, d *openAPIDoc) []*oaExchange {
	t.Helper()
	log := changestest.NewLog()
	store, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := newOAChangesServer(t, log, render.New(store, enrich.New(store, enrich.Options{}).Enrich))
	all := oaToken(t, sources.AllScopes...)
	desks := oaToken(t, sources.ScopeDesks)
	item := "urn:newsml:riverton.example:2026-11-19T18:05:20.436314:a3a0921f-4393-462e-b5ba-04ffb1315805"
	log.Append("items", item, sources.OpUpdate, oaNow().Add(-2*time.Second))
	log.Append("desks", "67c42d4c957184d45484e656", sources.OpReplace, time.Time{})
	log.Append("planning", "", sources.OpFlush, oaNow())
	log.Append("items", item, sources.OpDelete, oaNow())

	after1 := oaPositionAfter(t, ts.URL, all, 1)
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
	do(ts.URL, "changes, paged", "GET", "/?max_results=2&since="+after1+"&pretty", 200, "Authorization", all)
	do(ts.URL, "changes, with documents", "GET", "?include=doc", 200, "Authorization", all)
	do(ts.URL, "changes, bad include", "GET", "?include=docs", 400, "Authorization", all)
	do(ts.URL, "changes, foreign position", "GET", "?since="+oaForeignPosition, 410, "Authorization", all)
	timeout := server.LoaderFunc(func(context.Context, *sources.Query) (*sources.Representation, error) {
		return nil, fmt.Errorf("test: %w", sources.ErrTimeout)
	})
	do(newOAChangesServer(t, log, timeout).URL, "changes, a document times out", "GET", "?include=doc", 504, "Authorization", all)
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

	// The caps: a long poll of one client waits; the same client's next
	// is over its cap (429), another client's over the server's (503).
	capped := changestest.NewLog()
	cts := newOAChangesServer(t, capped, nil, func(o *changes.Options) { o.ClientMaxWaits = 1; o.MaxPolls = 1 })
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", cts.URL+oaPrefix+"/changes?since=now&wait=60", nil)
	req.Header.Set("Authorization", all)
	go http.DefaultTransport.RoundTrip(req) // ends when cancel ends it
	capped.AwaitWaiter(t)
	do(cts.URL, "changes, the client's cap", "GET", "?since=now&wait=60", 429, "Authorization", all)
	other, err := server.MintToken([]byte(oaSecret), "another-client", sources.AllScopes, time.Hour, oaNow())
	if err != nil {
		t.Fatal(err)
	}
	do(cts.URL, "changes, the server's long polls", "GET", "?since=now&wait=60", 503, "Authorization", "Bearer "+other)

	log.Trim(2)
	do(ts.URL, "changes, trimmed", "GET", "?since="+after1, 410, "Authorization", all)
	do(ts.URL, "changes, trimmed, streamed", "GET", "?since="+after1, 410, "Authorization", all, "Accept", "text/event-stream")
	log.Fail(errors.New("test: the log is down"))
	do(ts.URL, "changes, log down", "GET", "", 503, "Authorization", all)
	do(newOAChangesServer(t, panickingLog{changestest.NewLog()}, nil).URL, "changes, defect", "GET", "", 500, "Authorization", all)
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

// TestOpenAPIChangesExamples sends every example of /changes's
// parameters, and of min_position on a detail, as the document shows
// it. A position's example shows the shape of one, and no literal one
// can work on another log: it is a 410 (a position that does not open:
// its shape is right, never a 400). Every other example works.
func TestOpenAPIChangesExamples(t *testing.T) {
	d := loadOpenAPI(t)
	log := changestest.NewLog()
	log.Append("items", oaResources[0].details[0], sources.OpUpdate, oaNow())
	log.Append("desks", oaResources[1].details[0], sources.OpReplace, oaNow())
	store, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := newOAChangesServer(t, log, render.New(store, enrich.New(store, enrich.Options{}).Enrich))
	all := oaToken(t, sources.AllScopes...)
	position := regexp.MustCompile(`^[A-Za-z0-9_-]{136}$`)
	send := func(name, target string, header ...string) int {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel() // a stream is read no further than its header
		req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+target, nil)
		req.Header.Set("Authorization", all)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		if req.Header.Get("Last-Event-ID") != "" {
			req.Header.Set("Accept", "text/event-stream") // Last-Event-ID resumes streams
		}
		res, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	sent := 0
	examples := func(o oaOperation, path string) {
		for _, raw := range o.op["parameters"].([]any) {
			p := d.deref(t, raw)
			name, in := p["name"].(string), p["in"].(string)
			var values []string
			if v, ok := p["example"]; ok {
				values = append(values, fmt.Sprint(v))
			}
			for _, ex := range mapAt(p, "examples") {
				values = append(values, fmt.Sprint(at(ex, "value")))
			}
			for _, v := range values {
				want := http.StatusOK
				if position.MatchString(v) {
					want = http.StatusGone
				}
				var status int
				switch in {
				case "query":
					status = send(name+"="+v, path+"?"+oaQuery(name, v))
				case "header":
					status = send(name+": "+v, path, name, v)
				default:
					continue
				}
				sent++
				if status != want {
					t.Errorf("%s %s example %.40q: %d, want %d", o.id, name, v, status, want)
				}
			}
		}
	}
	changesOp, ok := d.operation("getChanges")
	desk, ok2 := d.operation("getDesk")
	if !ok || !ok2 {
		t.Fatal("no getChanges or getDesk")
	}
	examples(changesOp, oaPrefix+"/changes")
	minPosition := mapAt(d.root, "components", "parameters", "MinPosition")
	if status := send("min_position", oaPrefix+"/desks/"+oaResources[1].details[0]+"?"+oaQuery("min_position", fmt.Sprint(minPosition["example"]))); status != http.StatusGone {
		t.Errorf("min_position's example on %s: %d, want 410", desk.id, status)
	}
	if sent < 10 {
		t.Errorf("only %d examples sent", sent)
	}
}
