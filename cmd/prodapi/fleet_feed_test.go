package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/sandbox"
	"github.com/prodapi/prodapi/test/realserver"
)

// A rawStream is a /changes event stream read line by line, every line
// kept: events, comments, a last close event.
type rawStream struct {
	lines  chan string
	cancel context.CancelFunc
}

// openRawStream opens /changes on base as an event stream, from the
// position lastID (Last-Event-ID), with the query given; the stream must
// open (200).
func openRawStream(t *testing.T, base, query, auth, lastID string) *rawStream {
	t.Helper()
	res, cancel := openChanges(t, base, query, auth, lastID)
	s := &rawStream{lines: make(chan string, 1024), cancel: cancel}
	go func() { // ends when the stream does, or cancel
		defer close(s.lines)
		defer res.Body.Close()
		r := bufio.NewReader(res.Body)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			s.lines <- strings.TrimSuffix(line, "\n")
		}
	}()
	return s
}

// event reads the lines up to the end of the next event (its blank
// line), comments included; ok is false when the stream ended first.
func (s *rawStream) event(t *testing.T) (lines []string, ok bool) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case line, open := <-s.lines:
			if !open {
				return lines, false
			}
			if line == "" && len(lines) > 0 && !strings.HasPrefix(lines[len(lines)-1], ":") {
				return lines, true
			}
			if line != "" {
				lines = append(lines, line)
			}
		case <-deadline:
			t.Fatalf("no event within a minute; read %q", lines)
		}
	}
}

// field returns the value of an event's field ("" when absent).
func field(lines []string, name string) string {
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, name+": "); ok {
			return v
		}
	}
	return ""
}

// position answers since=now on in, for auth: the log's end.
func position(t *testing.T, in *instance, auth string) string {
	t.Helper()
	status, _, body := in.get(t, "/prodapi/v1/changes?since=now", auth)
	var page changesPage
	if status != 200 || json.Unmarshal(body, &page) != nil || page.Meta.Since == "" {
		t.Fatalf("since=now: %d %s", status, body)
	}
	return page.Meta.Since
}

// Sixty fetches made right after their entries, each on another replica
// than the one whose stream delivered the entry, with min_position (the
// event's id): none is stale. Each edit (an update, an insert or a
// delete, drawn at random) is made, its entry awaited on the first
// replica's stream, then the document fetched from the second or third:
// an update or insert answers with the edit's number in the document, a
// delete with 404. A fetch without min_position on the remaining replica
// shows, in the log, how often one would have been stale.
func TestFleetMinPositionFetches(t *testing.T) {
	rs := realserver.StartRedis(t, 0)
	dir := t.TempDir()
	if err := os.CopyFS(dir, sandbox.SampleFS()); err != nil {
		t.Fatal(err)
	}
	room := openConvRoom(t, dir, uint64(time.Now().UnixNano()))
	t.Logf("seed %d", room.seed)
	fleet := startFleet(t, 3, dir, rs.URL(), "PRODAPI_URL", "http://prodapi.example")
	auth := bearer(t, devSecret, sources.AllScopes...)
	s := follow(t, fleet[0].base, auth, position(t, fleet[0], auth))

	const fetches = 60
	stale, unavailable := 0, 0
	for i := range fetches {
		// Updates, inserts and deletes of documents no other edit
		// touches: the first entry of the document after the edit is
		// the edit's.
		e := room.once(t, []string{"update", "update", "update", "insert", "delete"}[i%5], []string{"archive", "desks", "users", "contacts"})
		var pos string
		s.until(t, "the entry of "+e.String(), func(ev change) {
			if ev.Resource == e.resource && ev.DocID == e.id && (ev.Op == sources.OpDelete) == (e.op == "delete") {
				pos = ev.ID
			}
		}, func() bool { return pos != "" })
		with, without := fleet[1+i%2], fleet[2-i%2]
		target := "/prodapi/v1/" + e.resource + "/" + url.PathEscape(e.id)
		var status int
		var body []byte
		eventually(t, "an answer other than 503 to "+target, func() bool {
			status, _, body = with.get(t, target+"?min_position="+url.QueryEscape(pos), auth)
			if status == http.StatusServiceUnavailable {
				unavailable++ // not applied within PRODAPI_MIN_POSITION_WAIT: a client tries again
				return false
			}
			return true
		})
		if !fresh(e, status, body) {
			t.Errorf("%s, fetched with min_position: %d %.300s", e, status, body)
		}
		if status, _, body := without.get(t, target, auth); !fresh(e, status, body) {
			stale++
		}
	}
	t.Logf("%d fetches with min_position, none stale (%d 503s tried again); without it, %d of %d were stale", fetches, unavailable, stale, fetches)
}

// fresh reports whether a detail's answer shows edit e: 404 for a
// delete, else the document with e's number.
func fresh(e convEdit, status int, body []byte) bool {
	if e.op == "delete" {
		return status == http.StatusNotFound
	}
	return status == http.StatusOK && markerOf(e.resource, body) >= e.n
}

// While redis-server is down, /changes says so: a stream open on the
// replica ends with a close event carrying the 503 envelope, a long poll
// waiting answers 503 at once, and a page is a 503 with Retry-After;
// never an empty page. Restarted on its append-only file, the log
// answers the same position again.
func TestFleetChangesWhileRedisDown(t *testing.T) {
	aof := t.TempDir()
	rs := startAOFRedis(t, aof, 0)
	room := newNewsroomDir(t)
	in := start(t, "PRODAPI_SANDBOX", room.dir, "REDIS_URL", rs.URL())
	auth := bearer(t, devSecret, sources.AllScopes...)
	since := position(t, in, auth)
	stream := openRawStream(t, in.base, "?include=doc", auth, since)
	type answer struct {
		status int
		header http.Header
		body   []byte
		err    error
	}
	polled := make(chan answer, 1)
	go func() { // ends when the poll is answered, or after half its wait
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, in.base+"/prodapi/v1/changes?wait=60&since="+url.QueryEscape(since), nil)
		req.Header.Set("Authorization", auth)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			polled <- answer{err: err}
			return
		}
		defer res.Body.Close()
		var b strings.Builder
		_, err = bufio.NewReader(res.Body).WriteTo(&b)
		polled <- answer{res.StatusCode, res.Header, []byte(b.String()), err}
	}()

	rs.Kill()
	<-rs.Done()
	const unavailable = `{"_status":"ERR","_error":{"code":503,"message":"The change log is temporarily unavailable. Please try again shortly."}}`
	ev, _ := stream.event(t)
	if field(ev, "event") != "close" || field(ev, "data") != unavailable || field(ev, "id") != "" {
		t.Errorf("the stream: %q, want a close event with %s", ev, unavailable)
	}
	if _, open := <-stream.lines; open {
		t.Error("the stream goes on after its close event")
	}
	a := <-polled
	if a.err != nil || a.status != 503 || string(a.body) != unavailable || a.header.Get("Retry-After") == "" {
		t.Errorf("the long poll: %d %v %s %v, want 503 with Retry-After", a.status, a.header, a.body, a.err)
	}
	status, h, body := in.get(t, "/prodapi/v1/changes?since="+url.QueryEscape(since), auth)
	if status != 503 || string(body) != unavailable || h.Get("Retry-After") == "" {
		t.Errorf("a page: %d %v %s, want 503 with Retry-After", status, h, body)
	}
	status, _, body = in.get(t, "/prodapi/v1/changes?since=now", auth)
	if status != 503 {
		t.Errorf("since=now: %d %s, want 503", status, body)
	}

	startAOFRedis(t, aof, rs.Port)
	eventually(t, "the log answering again", func() bool {
		status, _, body = in.get(t, "/prodapi/v1/changes?since="+url.QueryEscape(since), auth)
		return status != 503
	})
	if status != 200 || !strings.Contains(string(body), `"_items":[]`) {
		t.Errorf("the same position after the restart: %d %s, want 200 and no entries", status, body)
	}
}

// A long poll made with a token that expires in 3 s ends at its expiry,
// through run and a real redis-server, with the empty page: not before,
// and not at the end of its wait (60 s).
func TestFleetLongPollEndsWithItsToken(t *testing.T) {
	rs := realserver.StartRedis(t, 0)
	room := newNewsroomDir(t)
	in := start(t, "PRODAPI_SANDBOX", room.dir, "REDIS_URL", rs.URL())
	issued := time.Now()
	tok, err := server.MintToken([]byte(devSecret), "e2e", []string{sources.ScopeDesks}, 3*time.Second, issued)
	if err != nil {
		t.Fatal(err)
	}
	auth := "Bearer " + tok
	since := position(t, in, auth)
	expiry := time.Unix(issued.Add(3*time.Second).Unix(), 0)                 // exp is whole seconds
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // half the wait
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, in.base+"/prodapi/v1/changes?wait=60&since="+url.QueryEscape(since), nil)
	req.Header.Set("Authorization", auth)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the long poll did not end by its token's expiry: %v", err)
	}
	answered := time.Now()
	var page changesPage
	err = json.NewDecoder(res.Body).Decode(&page)
	res.Body.Close()
	if answered.Before(expiry) {
		t.Errorf("answered at %v, before the token's expiry at %v", answered, expiry)
	}
	if res.StatusCode == 200 && (err != nil || len(page.Items) > 0) {
		t.Errorf("at the token's expiry: %v, entries %v, want the empty page", err, page.Items)
	} else if res.StatusCode != 200 && res.StatusCode != 401 {
		t.Errorf("at the token's expiry: %d, want the empty page or 401", res.StatusCode)
	}
}

// positionPattern matches a sealed position: every one is 136 base64url
// characters.
var positionPattern = regexp.MustCompile(`[A-Za-z0-9_-]{136}`)

// changedPattern matches an entry's time.
var changedPattern = regexp.MustCompile(`"changed":"[^"]*"`)

// A DESKS_READ-only token's view of /changes, on two replicas over a
// real redis-server, is the same whether or not items changed between
// the desk edits: pages (since, next), a long poll and a stream (ids,
// lines, comments) read the same, once positions (each of one length)
// and the entries' times are masked. Nothing says whether, when or how
// many items changed.
func TestFleetDesksTokenLearnsNothing(t *testing.T) {
	var alone, among []string
	t.Run("desk edits alone", func(t *testing.T) { alone = desksTranscript(t, false) })
	t.Run("desk edits among item edits", func(t *testing.T) { among = desksTranscript(t, true) })
	if len(alone) < 5 {
		t.Fatalf("a transcript of %d lines: %q", len(alone), alone)
	}
	if strings.Join(alone, "\n") != strings.Join(among, "\n") {
		t.Errorf("what a desks token read differs when items change:\nalone:\n%s\namong item edits:\n%s",
			strings.Join(alone, "\n"), strings.Join(among, "\n"))
	}
}

// desksTranscript is what a DESKS_READ-only token reads of desk edits,
// with item edits between them when items is set, positions and times
// masked.
func desksTranscript(t *testing.T, items bool) []string {
	rs := realserver.StartRedis(t, 0)
	room := newNewsroomDir(t)
	fleet := startFleet(t, 2, room.dir, rs.URL())
	a, b := fleet[0], fleet[1]
	desksOnly := bearer(t, devSecret, sources.ScopeDesks)
	all := bearer(t, devSecret, sources.AllScopes...)
	desks, archive := room.ids(t, "desks"), room.ids(t, "archive")
	watch := follow(t, a.base, all, position(t, a, all))
	// edit edits a desk, after three items when items is set, and waits
	// for every entry on the stream of a token that reads everything.
	n := 0
	edit := func(desk string) {
		t.Helper()
		want := map[string]bool{"desks/" + desk: true}
		if items {
			for range 3 {
				id := archive[n%len(archive)]
				n++
				room.edit(t, "archive", id)
				want["items/"+id] = true
			}
		}
		room.edit(t, "desks", desk)
		watch.until(t, "the entries of the edits", func(ev change) { delete(want, ev.Resource+"/"+ev.DocID) },
			func() bool { return len(want) == 0 })
	}

	var out []string
	record := func(what, s string) {
		t.Helper()
		s = positionPattern.ReplaceAllString(s, "<position>")
		out = append(out, what+": "+changedPattern.ReplaceAllString(s, `"changed":"<time>"`))
	}
	page := func(what string, in *instance, target string) changesPage {
		t.Helper()
		status, _, body := in.get(t, target, desksOnly)
		var p changesPage
		if status != 200 || json.Unmarshal(body, &p) != nil {
			t.Fatalf("%s: %d %s", what, status, body)
		}
		record(what, string(body))
		return p
	}
	// The token reads from the replica whose stream showed every entry
	// (so it applied them, and hands them out): what it reads does not
	// depend on how far behind another replica is.
	from := page("since=now", b, "/prodapi/v1/changes?since=now").Meta.Since
	edit(desks[0])
	edit(desks[1])
	got := page("pulled", a, "/prodapi/v1/changes?since="+from)
	page("pulled again", a, "/prodapi/v1/changes?since="+got.Meta.Since)

	// A stream from the first position: the two desk entries, then the
	// third's, nothing between them but comments.
	s := openRawStream(t, a.base, "", desksOnly, from)
	for range 2 {
		ev, ok := s.event(t)
		if !ok {
			t.Fatal("the stream ended")
		}
		record("event", strings.Join(noComments(t, ev), "\n"))
	}
	polled := make(chan string, 1)
	go func() { // ends when the poll is answered
		_, _, body, err := tryRequest(http.MethodGet, a.base+"/prodapi/v1/changes?wait=60&since="+got.Meta.Since, "Authorization", desksOnly)
		polled <- fmt.Sprint(string(body), err)
	}()
	edit(desks[2])
	ev, ok := s.event(t)
	if !ok {
		t.Fatal("the stream ended")
	}
	record("event", strings.Join(noComments(t, ev), "\n"))
	record("long poll", <-polled)
	return out
}

// noComments returns an event's lines without its comments, each of
// which must be a bare keepalive.
func noComments(t *testing.T, lines []string) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, ":") {
			if l != ": keepalive" {
				t.Errorf("a comment %q, want only keepalives", l)
			}
			continue
		}
		out = append(out, l)
	}
	return out
}
