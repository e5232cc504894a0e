package changes_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/server/changes"
	"github.com/prodapi/prodapi/server/changes/changestest"
	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/testkit"
)

var (
	testSecret = []byte("a-test-secret-that-is-at-least-32-bytes-long")
	testNow    = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
)

// The server's words, for its refusals (401, 403) in front of the feed.
const (
	msgCredentials  = "Please provide proper credentials"
	msgInvalidScope = "Invalid scope"
)

// token is an Authorization header granting scopes, for an hour from
// testNow.
func token(t *testing.T, scopes ...string) string {
	t.Helper()
	tok, err := server.MintToken(testSecret, "test-client", scopes, time.Hour, testNow)
	if err != nil {
		t.Fatal(err)
	}
	return "Bearer " + tok
}

// changesServer serves a change log through the whole server, on a
// clock the test moves.
type changesServer struct {
	*httptest.Server
	srv     *server.Server
	feed    *changes.Feed
	log     *changestest.Log
	timers  *fakeTimers
	metrics *metrics.Metrics
	access  *lines        // the access log
	load    server.Loader // the documents' loader (include=doc, min_position); nil: none
}

// pos is the position of a token of cs.log, as the feed hands it out.
func (cs *changesServer) pos(tok string) string { return changes.Seal(cs.feed, tok) }

// tok is the token a position seals, or what it is when it seals none.
func (cs *changesServer) tok(pos string) string {
	if tok, ok := changes.Open(cs.feed, pos); ok {
		return tok
	}
	return "not a position: " + pos
}

// positionRE finds the positions in an answer.
var positionRE = regexp.MustCompile(`[A-Za-z0-9_-]{40,}`)

// plain replaces each position in s with the token it seals, or with
// "<position>" when it seals none of cs's.
func (cs *changesServer) plain(s string) string {
	return positionRE.ReplaceAllStringFunc(s, func(pos string) string {
		if len(pos) != changes.PositionLen(cs.feed) {
			return pos
		}
		if tok, ok := changes.Open(cs.feed, pos); ok {
			return tok
		}
		return "<position>"
	})
}

// lines is a writer that keeps what it is given, a line a Write.
type lines struct {
	mu    sync.Mutex
	lines []string
}

func (l *lines) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, string(b))
	return len(b), nil
}

func (l *lines) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// newChangesServer serves cs.log; edit changes the feed's options.
func newChangesServer(t *testing.T, edit ...func(*changes.Options)) *changesServer {
	t.Helper()
	return newLoadedServer(t, nil, edit...)
}

// newLoadedServer serves cs.log, and the lists and details of load.
func newLoadedServer(t *testing.T, load server.Loader, edit ...func(*changes.Options)) *changesServer {
	t.Helper()
	cs := &changesServer{log: changestest.NewLog(), load: load}
	cs.serve(t, cs.log, edit...)
	return cs
}

// serve serves log, in place of cs.log.
func (cs *changesServer) serve(t *testing.T, log changes.Log, edit ...func(*changes.Options)) {
	t.Helper()
	cs.timers, cs.metrics, cs.access = newFakeTimers(), metrics.NewMetrics(), &lines{}
	fopts := changes.Options{Metrics: cs.metrics, Now: func() time.Time { return testNow }, AfterFunc: cs.timers.afterFunc}
	for _, e := range edit {
		e(&fopts)
	}
	cs.feed = changes.New(log, fopts)
	cs.srv = server.New(cs.load, server.Options{
		Auth:      server.AuthOptions{Enabled: true, Secret: testSecret, Now: func() time.Time { return testNow }},
		Now:       func() time.Time { return testNow },
		Metrics:   cs.metrics,
		AccessLog: cs.access,
		Changes:   cs.feed,
	})
	cs.Server = httptest.NewUnstartedServer(cs.srv.Handler())
	cs.Config.RegisterOnShutdown(cs.srv.EndStreams)
	cs.Config.ConnContext = server.ConnContext
	cs.Start()
	t.Cleanup(cs.Close)
}

// A response is what a request got.
type response struct {
	status int
	header http.Header
	body   string
}

// do sends a request, its header given as name, value pairs.
func (cs *changesServer) do(t *testing.T, method, target string, header ...string) response {
	t.Helper()
	r := testkit.Do(t, method, cs.URL+target, header...)
	return response{r.Status, r.Header, r.Body}
}

// changesPage is a /changes answer in JSON.
type changesPage struct {
	Items []map[string]any `json:"_items"`
	Links map[string]struct {
		Title, Href string
	} `json:"_links"`
	Meta struct {
		Since      string `json:"since"`
		MaxResults int    `json:"max_results"`
	} `json:"_meta"`
}

func (cs *changesServer) get(t *testing.T, target, auth string, header ...string) (response, *changesPage) {
	t.Helper()
	res := cs.do(t, "GET", "/prodapi/v1/changes"+target, append([]string{"Authorization", auth}, header...)...)
	if res.status != http.StatusOK {
		return res, nil
	}
	var p changesPage
	if err := json.Unmarshal([]byte(res.body), &p); err != nil {
		t.Fatalf("GET %s: %v: %s", target, err, res.body)
	}
	return res, &p
}

// ids lists the resource/_id (or resource/op) of a page's entries.
func ids(p *changesPage) []string {
	out := []string{}
	for _, e := range p.Items {
		id, ok := e["_id"].(string)
		if !ok {
			id = e["op"].(string)
		}
		out = append(out, e["resource"].(string)+"/"+id)
	}
	return out
}

var changeAt = time.Date(2026, 12, 1, 10, 30, 15, 250_000_000, time.UTC)

func TestChangesPaging(t *testing.T) {
	cs := newChangesServer(t)
	all := token(t, sources.AllScopes...)
	cs.log.Append("items", "urn:a", sources.OpInsert, changeAt)
	cs.log.Append("desks", "d1", sources.OpUpdate, time.Time{})
	cs.log.Append("items", "urn:a", sources.OpDelete, changeAt)
	cs.log.Append("planning", "", sources.OpFlush, changeAt)
	cs.log.Append("users", "u1", sources.OpReplace, changeAt)

	res, p := cs.get(t, "?max_results=2", all)
	if res.status != 200 {
		t.Fatalf("status %d: %s", res.status, res.body)
	}
	if got := res.header.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q, want no-store", got)
	}
	if got := res.header.Get("ETag"); got != "" {
		t.Errorf("ETag %q on a feed", got)
	}
	want := `{"_items":[` +
		`{"resource":"items","_id":"urn:a","op":"insert","changed":"2026-12-01T10:30:15+0000","_links":{"self":{"title":"Item","href":"items/urn:a"}}},` +
		`{"resource":"desks","_id":"d1","op":"update","changed":null,"_links":{"self":{"title":"Desk","href":"desks/d1"}}}],` +
		`"_links":{"parent":{"title":"home","href":"/"},"self":{"title":"changes","href":"changes?max_results=2"},` +
		`"next":{"title":"next page","href":"changes?max_results=2&since=2-0"}},"_meta":{"since":"2-0","max_results":2}}`
	if got := cs.plain(res.body); got != want {
		t.Errorf("body (positions opened)\n got %s\nwant %s", got, want)
	}

	// Following next walks the rest; a flush carries neither _id nor _links.
	var walked []string
	next := p.Links["next"].Href
	for range 5 {
		_, p = cs.get(t, strings.TrimPrefix(next, "changes"), all)
		walked = append(walked, ids(p)...)
		next = p.Links["next"].Href
		if len(p.Items) == 0 {
			break
		}
	}
	if diff := cmp.Diff([]string{"items/urn:a", "planning/flush", "users/u1"}, walked); diff != "" {
		t.Errorf("walk (-want +got):\n%s", diff)
	}
	if cs.tok(p.Meta.Since) != "5-0" || cs.plain(next) != "changes?max_results=2&since=5-0" {
		t.Errorf("caught up at since %q, next %q; want 5-0", cs.plain(p.Meta.Since), cs.plain(next))
	}
	_, p = cs.get(t, "?since="+cs.pos("3-0"), all)
	if p.Items[0]["_links"] != nil || p.Items[0]["_id"] != nil {
		t.Errorf("flush entry %v carries _id or _links", p.Items[0])
	}

	// since=now: nothing, resuming from the end.
	_, p = cs.get(t, "?since=now&resources=users", all)
	if len(p.Items) != 0 || cs.tok(p.Meta.Since) != "5-0" || p.Meta.MaxResults != 25 {
		t.Errorf("since=now: %v, since %q, max_results %d", ids(p), cs.plain(p.Meta.Since), p.Meta.MaxResults)
	}
	if got := p.Links["self"].Href; got != "changes?resources=users&since=now" {
		t.Errorf("self %q", got)
	}
	// Lenient max_results, as lists; a trailing slash is the same.
	for target, want := range map[string]int{"?max_results=abc": 25, "?max_results=1e9": 500, "/?max_results=3.7": 3} {
		if _, p := cs.get(t, target, all); p == nil || p.Meta.MaxResults != want {
			t.Errorf("%s: max_results %v, want %d", target, p, want)
		}
	}
}

// The done-when of the feed's scopes: a token with DESKS_READ alone, on
// a feed of item and desk edits, sees desk entries only, and the log is
// asked for nothing else, so no other resource shows, even in counts.
func TestChangesScopes(t *testing.T) {
	cs := newChangesServer(t)
	for i := range 4 {
		cs.log.Append("items", "urn:"+string(rune('a'+i)), sources.OpUpdate, changeAt)
		cs.log.Append("desks", "d"+string(rune('1'+i)), sources.OpUpdate, changeAt)
	}
	desks := token(t, sources.ScopeDesks)
	_, p := cs.get(t, "?max_results=3", desks)
	if diff := cmp.Diff([]string{"desks/d1", "desks/d2", "desks/d3"}, ids(p)); diff != "" {
		t.Errorf("desks-only token (-want +got):\n%s", diff)
	}
	if cs.tok(p.Meta.Since) != "6-0" {
		t.Errorf("since %q, want 6-0 (the last entry examined)", cs.plain(p.Meta.Since))
	}
	if _, p = cs.get(t, "?since="+p.Meta.Since, desks); len(p.Items) != 1 {
		t.Errorf("after 6-0: %v, want desks/d4", ids(p))
	}
	for _, r := range cs.log.Reads() {
		if diff := cmp.Diff([]string{"desks"}, r); diff != "" {
			t.Errorf("the log was asked for (-want +got):\n%s", diff)
		}
	}
	var body map[string]any
	_, _ = cs.get(t, "", desks)
	res, _ := cs.get(t, "", desks)
	json.Unmarshal([]byte(res.body), &body)
	if meta := body["_meta"].(map[string]any); len(meta) != 2 {
		t.Errorf("_meta %v: only since and max_results", meta)
	}

	// resources= narrows within the scopes: events serves three resources.
	events := token(t, sources.ScopeEvents, sources.ScopeDesks)
	cs.get(t, "?resources=events_files,desks,events_files", events)
	reads := cs.log.Reads()
	if diff := cmp.Diff([]string{"desks", "events_files"}, reads[len(reads)-1]); diff != "" {
		t.Errorf("resources= read (-want +got):\n%s", diff)
	}
	cs.get(t, "", events)
	reads = cs.log.Reads()
	if diff := cmp.Diff([]string{"desks", "events", "events_history", "events_files"}, reads[len(reads)-1]); diff != "" {
		t.Errorf("all allowed read (-want +got):\n%s", diff)
	}
}

// Refusals come before any read of the log: 401, 403, 400, then 403 for
// a resource asked for that the token may not read.
func TestChangesRefused(t *testing.T) {
	cs := newChangesServer(t)
	cs.log.Append("items", "urn:a", sources.OpUpdate, changeAt)
	all := token(t, sources.AllScopes...)
	desks := token(t, sources.ScopeDesks)
	none := token(t)
	sse := "text/event-stream"
	for _, tc := range []struct {
		name, target, auth, accept, lastID string
		status                             int
		msg, challenge                     string
	}{
		{"no token", "", "", "", "", 401, msgCredentials, `Bearer realm="prodapi"`},
		{"no resource scope", "", none, "", "", 403, msgInvalidScope,
			`Bearer realm="prodapi", error="insufficient_scope", scope="ARCHIVE_READ DESKS_READ ASSIGNMENTS_READ EVENTS_READ PLANNING_READ CONTACTS_READ USERS_READ"`},
		{"no resource scope, streaming", "", none, sse, "", 403, msgInvalidScope, ""},
		{"a resource outside the scopes", "?resources=desks,items", desks, "", "", 403, msgInvalidScope,
			`Bearer realm="prodapi", error="insufficient_scope", scope="ARCHIVE_READ"`},
		{"bad since", "?since=abc", all, "", "", 400, "since: " + changes.MsgBadToken, ""},
		{"bad since, streaming", "?since=12", all, sse, "", 400, "since: " + changes.MsgBadToken, ""},
		{"bad Last-Event-ID", "?since=now", all, sse, "x", 400, "Last-Event-ID: " + changes.MsgBadToken, ""},
		{"bad include", "?include=docs", all, "", "", 400, changes.MsgBadInclude, ""},
		{"unknown resource", "?resources=items,nope", all, "", "", 400,
			`resources: unknown resource "nope"; the resources are items, desks, assignments, events, events_history, events_files, planning, contacts, users`, ""},
		{"unknown resource before scope", "?resources=nope,items", desks, "", "", 400, "", ""},
		{"wait too long", "?wait=61", all, "", "", 400, "wait: a whole number of seconds from 0 to 60", ""},
		{"wait negative", "?wait=-1", all, "", "", 400, "", ""},
		{"wait fraction", "?wait=1.5", all, "", "", 400, "", ""},
		{"malformed query", "?since=%zz", all, "", "", 400, `query string: malformed (an invalid %-escape, or a ";")`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(cs.log.Reads())
			h := []string{}
			if tc.accept != "" {
				h = append(h, "Accept", tc.accept)
			}
			if tc.lastID != "" {
				h = append(h, "Last-Event-ID", tc.lastID)
			}
			res, _ := cs.get(t, tc.target, tc.auth, h...)
			if res.status != tc.status {
				t.Fatalf("status %d, want %d: %s", res.status, tc.status, res.body)
			}
			if tc.msg != "" {
				if want := string(httperr.Body(tc.status, tc.msg)); res.body != want {
					t.Errorf("body\n got %s\nwant %s", res.body, want)
				}
			}
			if tc.challenge != "" {
				if got := res.header.Get("WWW-Authenticate"); got != tc.challenge {
					t.Errorf("WWW-Authenticate %q, want %q", got, tc.challenge)
				}
			}
			if n := len(cs.log.Reads()) - before; n != 0 {
				t.Errorf("%d reads of the log for a refused request", n)
			}
		})
	}
}

func TestChangesLogErrors(t *testing.T) {
	cs := newChangesServer(t)
	all := token(t, sources.AllScopes...)
	for range 3 {
		cs.log.Append("items", "urn:a", sources.OpUpdate, changeAt)
	}
	cs.log.Trim(2)
	gone := cs.metrics.Counter("prodapi_changes_gone_total", "")
	for _, accept := range []string{"", "text/event-stream"} {
		res, _ := cs.get(t, "?since="+cs.pos("1-0"), all, "Accept", accept)
		if want := string(httperr.Body(410, changes.MsgChangesGone)); res.status != 410 || res.body != want {
			t.Errorf("Accept %q, an expired token: %d %s, want 410 %s", accept, res.status, res.body, want)
		}
		if got := res.header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("410 Cache-Control %q", got)
		}
	}
	if got := gone.Value(); got != 2 {
		t.Errorf("prodapi_changes_gone_total %d, want 2", got)
	}
	if _, p := cs.get(t, "?since="+cs.pos("2-0"), all); p == nil || len(p.Items) != 1 {
		t.Errorf("the oldest kept position: %v", p)
	}

	cs.log.Fail(errors.New("redis: connection refused"))
	res, _ := cs.get(t, "", all)
	if res.status != 503 || res.header.Get("Retry-After") == "" || strings.Contains(res.body, "redis") {
		t.Errorf("log down: %d Retry-After %q %s", res.status, res.header.Get("Retry-After"), res.body)
	}
	cs.log.Fail(sources.ErrInvalid)
	if res, _ := cs.get(t, "?since="+cs.pos("1-0"), all); res.status != 400 {
		t.Errorf("the log refusing the token: %d %s", res.status, res.body)
	}
}

func TestChangesMethods(t *testing.T) {
	cs := newChangesServer(t)
	cs.log.Append("items", "urn:a", sources.OpUpdate, changeAt)
	all := token(t, sources.AllScopes...)
	if res := cs.do(t, "OPTIONS", "/prodapi/v1/changes"); res.status != 200 || res.header.Get("Allow") != "GET, HEAD, OPTIONS" {
		t.Errorf("OPTIONS: %d %v", res.status, res.header)
	}
	if res := cs.do(t, "POST", "/prodapi/v1/changes", "Authorization", all); res.status != 405 {
		t.Errorf("POST: %d", res.status)
	}
	get := cs.do(t, "GET", "/prodapi/v1/changes", "Authorization", all)
	// HEAD answers the GET's headers, and never waits nor streams.
	for _, accept := range []string{"", "text/event-stream"} {
		head := cs.do(t, "HEAD", "/prodapi/v1/changes?wait=60", "Authorization", all, "Accept", accept)
		if head.status != 200 || head.body != "" || head.header.Get("Content-Type") != "application/json" ||
			head.header.Get("Content-Length") == "" {
			t.Errorf("HEAD, Accept %q: %d %v %q", accept, head.status, head.header, head.body)
		}
	}
	if get.header.Get("Content-Type") != "application/json" {
		t.Errorf("GET: %v", get.header)
	}
}

// A long poll answers as soon as an entry it may see arrives; entries of
// other resources move its position without waking it.
func TestChangesLongPoll(t *testing.T) {
	cs := newChangesServer(t)
	desks := token(t, sources.ScopeDesks)
	type answer struct {
		res response
		p   *changesPage
	}
	poll := func(target string) chan answer {
		ch := make(chan answer, 1)
		go func() { // ends when the poll is answered
			res, p := cs.get(t, target, desks)
			ch <- answer{res, p}
		}()
		return ch
	}

	ch := poll("?since=now&wait=30")
	cs.log.AwaitWaiter(t)
	cs.log.Append("items", "urn:a", sources.OpUpdate, changeAt) // not for this token
	cs.log.AwaitWaiter(t)
	cs.log.Append("desks", "d1", sources.OpUpdate, changeAt)
	a := <-ch
	if diff := cmp.Diff([]string{"desks/d1"}, ids(a.p)); diff != "" {
		t.Errorf("woken with (-want +got):\n%s", diff)
	}
	if cs.tok(a.p.Meta.Since) != "2-0" || cs.plain(a.p.Links["next"].Href) != "changes?since=2-0&wait=30" {
		t.Errorf("since %q, next %q", cs.plain(a.p.Meta.Since), cs.plain(a.p.Links["next"].Href))
	}

	// Nothing arrives: at the end of wait, no entries and the position
	// moved past what the token may not see.
	ch = poll("?since=" + cs.pos("2-0") + "&wait=30")
	cs.log.AwaitWaiter(t)
	cs.log.Append("items", "urn:b", sources.OpUpdate, changeAt)
	cs.log.AwaitWaiter(t)
	cs.timers.fire(t, 30*time.Second)
	a = <-ch
	if a.res.status != 200 || len(a.p.Items) != 0 || cs.tok(a.p.Meta.Since) != "3-0" {
		t.Errorf("timed out: %d %v since %q, want nothing since 3-0", a.res.status, ids(a.p), cs.plain(a.p.Meta.Since))
	}

	// The server draining answers a long poll at once, and then any
	// other without waiting.
	ch = poll("?since=" + cs.pos("3-0") + "&wait=60")
	cs.log.AwaitWaiter(t)
	cs.srv.EndStreams()
	if a = <-ch; a.res.status != 200 || len(a.p.Items) != 0 || cs.tok(a.p.Meta.Since) != "3-0" {
		t.Errorf("drained: %d %v since %q", a.res.status, a.p, cs.plain(a.p.Meta.Since))
	}
	if a = <-poll("?since=" + cs.pos("3-0") + "&wait=60"); a.res.status != 200 || len(a.p.Items) != 0 {
		t.Errorf("while draining: %d %v", a.res.status, a.p)
	}
}

// An sseEvent is one event block of a stream.
type sseEvent struct {
	id, event, data string
	retry           string
	hasID           bool
	comments        []string
}

// readEvent reads the next block of an event stream (up to its blank
// line).
func readEvent(r *bufio.Reader) (sseEvent, error) {
	var ev sseEvent
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimSuffix(line, "\n")
		if line == "" {
			return ev, nil
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "":
			ev.comments = append(ev.comments, value)
		case "id":
			ev.id, ev.hasID = value, true
		case "event":
			ev.event = value
		case "data":
			ev.data = value
		case "retry":
			ev.retry = value
		}
	}
}

// openStream opens an event stream and returns its reader; the test's
// end closes it.
func (cs *changesServer) openStream(t *testing.T, target, auth string, header ...string) (*http.Response, *bufio.Reader) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", cs.URL+"/prodapi/v1/changes"+target, nil)
	req.Header.Set("Authorization", auth)
	req.Header.Set("Accept", "text/event-stream")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	return res, bufio.NewReader(res.Body)
}

func mustEvent(t *testing.T, r *bufio.Reader) sseEvent {
	t.Helper()
	ev, err := readEvent(r)
	if err != nil {
		t.Fatalf("reading an event: %v", err)
	}
	return ev
}

func TestChangesStream(t *testing.T) {
	cs := newChangesServer(t)
	all := token(t, sources.AllScopes...)
	cs.log.Append("items", "urn:a", sources.OpInsert, changeAt)
	cs.log.Append("desks", "d1", sources.OpUpdate, changeAt)
	cs.log.Append("items", "urn:a", sources.OpUpdate, changeAt)

	res, r := cs.openStream(t, "?resources=items", all)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/event-stream" ||
		res.Header.Get("Cache-Control") != "no-store" || res.Header.Get("Content-Length") != "" {
		t.Fatalf("stream: %d %v", res.StatusCode, res.Header)
	}
	ev := mustEvent(t, r)
	want := `{"resource":"items","_id":"urn:a","op":"insert","changed":"2026-12-01T10:30:15+0000","_links":{"self":{"title":"Item","href":"items/urn:a"}}}`
	if cs.tok(ev.id) != "1-0" || ev.event != "change" || ev.data != want {
		t.Errorf("first event %+v, want id 1-0, change, %s", ev, want)
	}
	if ev = mustEvent(t, r); cs.tok(ev.id) != "3-0" || !strings.Contains(ev.data, `"op":"update"`) {
		t.Errorf("second event %+v", ev)
	}
	streams := cs.metrics.Gauge("prodapi_changes_streams", "")
	if got := streams.Value(); got != 1 {
		t.Errorf("prodapi_changes_streams %v, want 1", got)
	}

	// Caught up: an append arrives as it is made.
	cs.log.AwaitWaiter(t)
	cs.log.Append("items", "urn:b", sources.OpDelete, changeAt)
	if ev = mustEvent(t, r); cs.tok(ev.id) != "4-0" || !strings.Contains(ev.data, `"op":"delete"`) {
		t.Errorf("live event %+v", ev)
	}

	// A heartbeat after Heartbeat's silence: a comment and nothing else,
	// past entries the stream may not see too (an id would say there
	// were some).
	cs.log.AwaitWaiter(t)
	cs.timers.fire(t, changes.DefaultHeartbeat)
	if ev = mustEvent(t, r); len(ev.comments) != 1 || ev.comments[0] != "keepalive" || ev.hasID || ev.data != "" {
		t.Errorf("heartbeat %+v", ev)
	}
	cs.log.AwaitWaiter(t)
	cs.log.Append("desks", "d2", sources.OpUpdate, changeAt)
	cs.log.AwaitWaiter(t)
	cs.timers.fire(t, changes.DefaultHeartbeat)
	if ev = mustEvent(t, r); len(ev.comments) != 1 || ev.comments[0] != "keepalive" || ev.hasID || ev.data != "" {
		t.Errorf("heartbeat past a hidden entry %+v", ev)
	}

	delivered := cs.metrics.Counter("prodapi_changes_delivered_total", "", "transport")
	if got := delivered.Value("sse"); got != 3 {
		t.Errorf("delivered over sse %d, want 3", got)
	}
	lag := cs.metrics.Histogram("prodapi_changes_delivery_lag_seconds", "", nil, "transport")
	if got := lag.Count("sse"); got != 3 {
		t.Errorf("lag observations %d, want 3", got)
	}
}

// Last-Event-ID resumes, over the URL's since (a reconnecting
// EventSource repeats its URL).
func TestChangesStreamResume(t *testing.T) {
	cs := newChangesServer(t)
	all := token(t, sources.AllScopes...)
	for _, id := range []string{"a", "b", "c"} {
		cs.log.Append("items", id, sources.OpUpdate, changeAt)
	}
	_, r := cs.openStream(t, "?since="+cs.pos("1-0"), all, "Last-Event-ID", cs.pos("2-0"))
	if ev := mustEvent(t, r); cs.tok(ev.id) != "3-0" {
		t.Errorf("resumed at %+v, want 3-0", ev)
	}
	_, r = cs.openStream(t, "?since=now", all)
	cs.log.AwaitWaiter(t)
	cs.log.Append("items", "d", sources.OpUpdate, changeAt)
	if ev := mustEvent(t, r); cs.tok(ev.id) != "4-0" {
		t.Errorf("since=now got %+v, want 4-0", ev)
	}
}

// The stream ends when its token expires, with a close event saying so;
// when its position leaves the log (410), or the log fails (503), in the
// same terms.
func TestChangesStreamEnds(t *testing.T) {
	dropped := func(cs *changesServer, reason string) uint64 {
		return cs.metrics.Counter("prodapi_changes_consumers_dropped_total", "", "reason").Value(reason)
	}
	closing := func(t *testing.T, r *bufio.Reader, status int, msg string) {
		t.Helper()
		ev := mustEvent(t, r)
		if want := string(httperr.Body(status, msg)); ev.event != "close" || ev.data != want || ev.hasID {
			t.Errorf("last event %+v, want close %s", ev, want)
		}
		if rest, err := io.ReadAll(r); err != nil || len(rest) > 0 {
			t.Errorf("after close: %q, %v", rest, err)
		}
	}
	t.Run("token expires", func(t *testing.T) {
		cs := newChangesServer(t)
		_, r := cs.openStream(t, "", token(t, sources.ScopeDesks))
		cs.log.AwaitWaiter(t)
		cs.timers.fire(t, time.Hour) // the token's lifetime, on the server's clock
		closing(t, r, 401, changes.MsgStreamExpired)
		if got := dropped(cs, "expired"); got != 1 {
			t.Errorf("dropped{expired} %d", got)
		}
	})
	t.Run("position trimmed", func(t *testing.T) {
		cs := newChangesServer(t)
		all := token(t, sources.AllScopes...)
		cs.log.Append("items", "a", sources.OpUpdate, changeAt)
		_, r := cs.openStream(t, "", all)
		mustEvent(t, r)
		cs.log.AwaitWaiter(t)
		cs.log.Trim(3)
		cs.log.Append("items", "b", sources.OpUpdate, changeAt)
		closing(t, r, 410, changes.MsgChangesGone)
		if got := dropped(cs, "gone"); got != 1 {
			t.Errorf("dropped{gone} %d", got)
		}
	})
	t.Run("log fails", func(t *testing.T) {
		cs := newChangesServer(t)
		_, r := cs.openStream(t, "", token(t, sources.AllScopes...))
		cs.log.AwaitWaiter(t)
		cs.log.Fail(errors.New("redis: down"))
		cs.log.Append("items", "b", sources.OpUpdate, changeAt)
		closing(t, r, 503, changes.MsgChangesUnavailable)
		if got := dropped(cs, "unavailable"); got != 1 {
			t.Errorf("dropped{unavailable} %d", got)
		}
	})
}

func TestChangesStreamLimit(t *testing.T) {
	cs := newChangesServer(t, func(o *changes.Options) { o.MaxStreams = 1 })
	all := token(t, sources.AllScopes...)
	first, _ := cs.openStream(t, "", all)
	if first.StatusCode != 200 {
		t.Fatalf("first stream: %d", first.StatusCode)
	}
	res, _ := cs.get(t, "", all, "Accept", "text/event-stream")
	if res.status != 503 || res.header.Get("Retry-After") != "5" || res.body != string(httperr.Body(503, changes.MsgTooManyStreams)) {
		t.Errorf("second stream: %d %v %s", res.status, res.header, res.body)
	}
	if res, _ := cs.get(t, "", all); res.status != 200 {
		t.Errorf("JSON beside the streams: %d", res.status)
	}
	if got := cs.metrics.Counter("prodapi_changes_streams_refused_total", "").Value(); got != 1 {
		t.Errorf("refused %d", got)
	}
	if got := cs.capRefusals("changes_streams"); got != 1 {
		t.Errorf("cap_refusals{changes_streams} = %d, want 1", got)
	}
}

// Shutdown ends streams at once, rather than waiting for them to end.
func TestChangesStreamShutdown(t *testing.T) {
	cs := newChangesServer(t)
	_, r := cs.openStream(t, "", token(t, sources.AllScopes...))
	cs.log.AwaitWaiter(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cs.Config.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if rest, err := io.ReadAll(r); err != nil || len(rest) > 0 {
		t.Errorf("after shutdown: %q, %v", rest, err)
	}
	if got := cs.metrics.Counter("prodapi_changes_consumers_dropped_total", "", "reason").Value("shutdown"); got != 1 {
		t.Errorf("dropped{shutdown} %d", got)
	}
}

// Why the server ended a stream goes to the access log, on the stream's
// line (status 200: the answer had begun).
func TestChangesStreamEndLogged(t *testing.T) {
	cs := newChangesServer(t)
	_, r := cs.openStream(t, "", token(t, sources.ScopeDesks))
	cs.log.AwaitWaiter(t)
	cs.timers.fire(t, time.Hour) // the token expires
	if rest, err := io.ReadAll(r); err != nil || !strings.Contains(string(rest), "event: close") {
		t.Fatalf("stream: %q, %v", rest, err)
	}
	// The access log writes the line once the handler has returned.
	testkit.Eventually(t, "the stream's access line", func() bool { return len(cs.access.get()) == 1 })
	line := cs.access.get()[0]
	if !strings.Contains(line, `"status":200,`) || !strings.Contains(line, `"error":"changes: the stream's token expired"`) {
		t.Errorf("the stream's access line: %s", line)
	}
}

// Long polls and streams are timed in the feed's own histograms, and
// leave the request-duration histogram, whose latency they would swamp;
// /changes without wait, and HEAD, which never waits, stay in it.
func TestChangesWaitsTimedApart(t *testing.T) {
	cs := newChangesServer(t)
	desks := token(t, sources.ScopeDesks)
	requests := cs.metrics.Histogram("prodapi_http_request_duration_seconds", "", nil, "route", "outcome")
	waits := cs.metrics.Histogram("prodapi_changes_wait_seconds", "", nil)
	streams := cs.metrics.Histogram("prodapi_changes_stream_seconds", "", nil)
	timed := func(t *testing.T, requestsWant, waitsWant, streamsWant uint64) {
		t.Helper()
		// The access log writes a request's line once it is counted.
		testkit.Eventually(t, "the access log's line", func() bool {
			return len(cs.access.get()) == int(requestsWant+waitsWant+streamsWant)
		})
		got := []uint64{requests.Count("/prodapi/v1/changes", "none"), waits.Count(), streams.Count()}
		if diff := cmp.Diff([]uint64{requestsWant, waitsWant, streamsWant}, got); diff != "" {
			t.Errorf("requests, long polls, streams timed (-want +got):\n%s", diff)
		}
	}

	cs.get(t, "", desks)
	timed(t, 1, 0, 0)

	poll := make(chan response, 1)
	go func() { // ends when the poll is answered
		res, _ := cs.get(t, "?since=now&wait=30", desks)
		poll <- res
	}()
	cs.log.AwaitWaiter(t)
	cs.log.Append("desks", "d1", sources.OpUpdate, changeAt)
	if res := <-poll; res.status != 200 {
		t.Fatalf("long poll: %d %s", res.status, res.body)
	}
	timed(t, 1, 1, 0)

	if res := cs.do(t, "HEAD", "/prodapi/v1/changes?wait=30", "Authorization", desks); res.status != 200 {
		t.Fatalf("HEAD: %d", res.status)
	}
	timed(t, 2, 1, 0)

	_, r := cs.openStream(t, "?since=now", desks)
	cs.log.AwaitWaiter(t)
	cs.timers.fire(t, time.Hour) // the token expires
	if rest, err := io.ReadAll(r); err != nil || !strings.Contains(string(rest), "event: close") {
		t.Fatalf("stream: %q, %v", rest, err)
	}
	timed(t, 2, 1, 1)
}

// Every series of the feed is there from the start.
func TestChangesMetricsDeclared(t *testing.T) {
	cs := newChangesServer(t)
	var b strings.Builder
	cs.metrics.WriteText(&b)
	for _, series := range []string{
		`prodapi_changes_streams 0`,
		`prodapi_changes_polls 0`,
		`prodapi_changes_delivered_total{transport="json"} 0`,
		`prodapi_changes_delivered_total{transport="sse"} 0`,
		`prodapi_changes_delivery_lag_seconds_count{transport="sse"} 0`,
		`prodapi_changes_consumers_dropped_total{reason="slow"} 0`,
		`prodapi_changes_gone_total 0`,
		`prodapi_changes_streams_refused_total 0`,
	} {
		if !strings.Contains(b.String(), series+"\n") {
			t.Errorf("no %s", series)
		}
	}
	all := token(t, sources.AllScopes...)
	cs.log.Append("items", "a", sources.OpUpdate, testNow.Add(-1500*time.Millisecond))
	cs.get(t, "", all)
	if got := cs.metrics.Counter("prodapi_changes_delivered_total", "", "transport").Value("json"); got != 1 {
		t.Errorf("delivered{json} %d", got)
	}
}

// endlessLog always has max more entries after any position, at once.
type endlessLog struct{ reads atomic.Int64 }

func (l *endlessLog) Valid(tok string) bool { _, ok := changestest.Position(tok); return ok }

func (l *endlessLog) Wait(context.Context, string) error { return nil }

func (l *endlessLog) WaitApplied(context.Context, string) error { return nil }

func (l *endlessLog) Read(_ context.Context, since string, resources []string, max int) ([]sources.LogEntry, string, error) {
	l.reads.Add(1)
	n, _ := changestest.Position(since)
	out := make([]sources.LogEntry, max)
	for i := range out {
		out[i] = sources.LogEntry{Token: changestest.Token(n + i + 1), Resource: resources[0], ID: strings.Repeat("x", 200), Op: sources.OpUpdate}
	}
	return out, changestest.Token(n + max), nil
}

// A consumer that stops reading is dropped once a write cannot complete
// within WriteTimeout: the stream never buffers more than the socket
// holds, however much the log has.
func TestChangesSlowConsumer(t *testing.T) {
	m := metrics.NewMetrics()
	srv := server.New(nil, server.Options{Metrics: m,
		Changes: changes.New(&endlessLog{}, changes.Options{Metrics: m, WriteTimeout: 100 * time.Millisecond})})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)

	c, err := net.Dial("tcp", ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "GET /prodapi/v1/changes?max_results=500 HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n")
	r := bufio.NewReader(c)
	res, err := http.ReadResponse(r, nil)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("stream: %v %v", res, err)
	}
	// The client reads nothing more until the server gave up on it.
	dropped := m.Counter("prodapi_changes_consumers_dropped_total", "", "reason")
	for deadline := time.Now().Add(time.Minute); dropped.Value("slow") == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the consumer was never dropped")
		}
	}
	// What the socket held arrives, then the end: bounded by the
	// buffers, not by the log.
	n, _ := io.Copy(io.Discard, res.Body)
	if n > 64<<20 {
		t.Errorf("%d bytes were buffered for a consumer that did not read", n)
	}
	if got := m.Gauge("prodapi_changes_streams", "").Value(); got != 0 {
		t.Errorf("prodapi_changes_streams %v after the drop", got)
	}
}

// leakyLog ignores the resources it is given, as a defective log would.
type leakyLog struct{ *changestest.Log }

func (l leakyLog) Read(ctx context.Context, since string, _ []string, max int) ([]sources.LogEntry, string, error) {
	var all []string
	for _, res := range sources.Resources() {
		all = append(all, res.Name)
	}
	return l.Log.Read(ctx, since, all, max)
}

// Whatever the log returns, no resource outside the request's leaves, and
// the log's own slice is left as it was.
func TestChangesNeverLeak(t *testing.T) {
	log := changestest.NewLog()
	log.Append("items", "a", sources.OpUpdate, changeAt)
	log.Append("desks", "d", sources.OpUpdate, changeAt)
	log.Append("users", "u", sources.OpUpdate, changeAt)
	cs := &changesServer{log: log}
	cs.serve(t, leakyLog{log})
	_, p := cs.get(t, "", token(t, sources.ScopeDesks))
	if diff := cmp.Diff([]string{"desks/d"}, ids(p)); diff != "" {
		t.Errorf("served (-want +got):\n%s", diff)
	}
	entries, _, _ := log.Read(context.Background(), "", []string{"items", "desks", "users"}, 10)
	if got := changes.Visible([]string{"desks"}, entries); len(got) != 1 || entries[0].Resource != "items" || entries[2].Resource != "users" {
		t.Errorf("visible: %v, and the log's slice became %v", got, entries)
	}
}

// fakeTimers is the streams' clock in tests: afterFunc registers a timer,
// and fire runs one, as if its time had come.
type fakeTimers struct {
	mu      sync.Mutex
	pending map[*fakeTimer]bool
	added   chan struct{} // gets a value on every afterFunc
}

type fakeTimer struct {
	d time.Duration
	f func()
}

func newFakeTimers() *fakeTimers {
	return &fakeTimers{pending: map[*fakeTimer]bool{}, added: make(chan struct{}, 1)}
}

func (ft *fakeTimers) afterFunc(d time.Duration, f func()) func() bool {
	t := &fakeTimer{d: d, f: f}
	ft.mu.Lock()
	ft.pending[t] = true
	ft.mu.Unlock()
	select {
	case ft.added <- struct{}{}:
	default:
	}
	return func() bool {
		ft.mu.Lock()
		defer ft.mu.Unlock()
		was := ft.pending[t]
		delete(ft.pending, t)
		return was
	}
}

// count is the number of pending timers of d.
func (ft *fakeTimers) count(d time.Duration) int {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	n := 0
	for p := range ft.pending {
		if p.d == d {
			n++
		}
	}
	return n
}

// fire waits for a pending timer of d, and runs it.
func (ft *fakeTimers) fire(t *testing.T, d time.Duration) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		ft.mu.Lock()
		var due *fakeTimer
		for p := range ft.pending {
			if p.d == d {
				due = p
				break
			}
		}
		delete(ft.pending, due)
		ft.mu.Unlock()
		if due != nil {
			due.f()
			return
		}
		select {
		case <-ft.added:
		case <-deadline:
			t.Fatalf("no timer of %s was set", d)
		}
	}
}

// A long poll ends when its token expires: its wait is bounded by the
// token's life, and it answers the empty page then, not an entry that
// comes after.
func TestChangesLongPollEndsWithItsToken(t *testing.T) {
	cs := newChangesServer(t)
	tok, err := server.MintToken(testSecret, "test-client", []string{sources.ScopeDesks}, 3*time.Second, testNow)
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan response, 1)
	go func() { // ends when the poll is answered
		res, _ := cs.get(t, "?since=now&wait=30", "Bearer "+tok)
		ch <- res
	}()
	cs.log.AwaitWaiter(t)
	cs.timers.fire(t, 3*time.Second) // the token's expiry, not the wait's 30 s
	res := <-ch
	if res.status != 200 || !strings.Contains(res.body, `"_items":[]`) {
		t.Errorf("at the token's expiry: %d %s, want the empty page", res.status, res.body)
	}
}

// While the log cannot be read, /changes says so: 503 with Retry-After
// in JSON, at once for a long poll already waiting (an outage is never a
// quiet newsroom), and a close event (503) on a stream.
func TestChangesLogUnavailable(t *testing.T) {
	cs := newChangesServer(t)
	desks := token(t, sources.ScopeDesks)
	down := errors.New("redis: connection refused")
	want := string(httperr.Body(503, changes.MsgChangesUnavailable))
	unavailable := func(what string, res response) {
		t.Helper()
		if res.status != 503 || res.body != want || res.header.Get("Retry-After") == "" {
			t.Errorf("%s: %d %v %s, want 503 %s", what, res.status, res.header, res.body, want)
		}
	}

	ch := make(chan response, 1)
	go func() { // ends when the poll is answered
		res, _ := cs.get(t, "?since=now&wait=30", desks)
		ch <- res
	}()
	cs.log.AwaitWaiter(t)
	cs.log.Fail(down) // no timer fires: the poll answers at once
	unavailable("a long poll waiting", <-ch)

	res, _ := cs.get(t, "?since=now", desks)
	unavailable("JSON", res)
	res, _ = cs.get(t, "?since=now&wait=30", desks)
	unavailable("a long poll", res)
	res, _ = cs.get(t, "", desks, "Accept", "text/event-stream")
	unavailable("a stream that cannot open", res)

	cs.log.Fail(nil)
	_, r := cs.openStream(t, "?since=now", desks)
	cs.log.AwaitWaiter(t)
	cs.log.Fail(down)
	if ev := mustEvent(t, r); ev.event != "close" || ev.data != want {
		t.Errorf("a stream: %+v, want close %s", ev, want)
	}
}

// Positions are sealed: a since that is not one is a 400; one sealed
// under another secret (a rotated one, another process's own) and a
// bare token of the log (as an older prodapi handed them out) are a 410,
// resync.
func TestChangesPositions(t *testing.T) {
	cs := newChangesServer(t)
	all := token(t, sources.AllScopes...)
	cs.log.Append("desks", "d1", sources.OpUpdate, changeAt)
	other := changes.New(cs.log, changes.Options{Secret: []byte("another secret, at least 32 bytes long")})
	gone := string(httperr.Body(410, changes.MsgChangesGone))
	for _, tc := range []struct {
		name, since string
		status      int
	}{
		{"its own", cs.pos("0-0"), 200},
		{"another secret's", changes.Seal(other, "0-0"), 410},
		{"a bare token", "0-0", 410},
		{"truncated", cs.pos("0-0")[1:], 400},
		{"garbage", strings.Repeat("x", changes.PositionLen(cs.feed)), 410},
	} {
		res, _ := cs.get(t, "?since="+tc.since, all)
		if res.status != tc.status || (tc.status == 410 && res.body != gone) {
			t.Errorf("%s: %d %s, want %d", tc.name, res.status, res.body, tc.status)
		}
	}
	// Each position is sealed anew: two answers at the same place give
	// two positions of one length.
	_, a := cs.get(t, "?since=now", all)
	_, b := cs.get(t, "?since=now", all)
	if a.Meta.Since == b.Meta.Since || len(a.Meta.Since) != len(b.Meta.Since) || cs.tok(a.Meta.Since) != cs.tok(b.Meta.Since) {
		t.Errorf("two positions of one place: %s, %s", a.Meta.Since, b.Meta.Since)
	}
}
