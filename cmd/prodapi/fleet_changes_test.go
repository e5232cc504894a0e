package main

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources/sandbox"
	"github.com/prodapi/prodapi/test/realserver"
)

// A newsroomDir is a copy of the sample newsroom in a directory the
// replicas watch, edited as an editor would: each edit rewrites one
// collection file and renames it into place.
type newsroomDir struct {
	dir string
	mu  sync.Mutex
	n   int
}

func newNewsroomDir(t testing.TB) *newsroomDir {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, sandbox.SampleFS()); err != nil {
		t.Fatal(err)
	}
	d := &newsroomDir{dir: dir}
	// In the form edit writes, before anything watches: an edit then
	// changes its document only.
	for _, coll := range []string{"archive", "desks"} {
		d.rewrite(t, coll, func(map[string]json.RawMessage) {})
	}
	return d
}

// ids returns the _id of each document of a collection file whose ids
// are strings.
func (d *newsroomDir) ids(t testing.TB, collection string) []string {
	t.Helper()
	var docs []struct {
		ID json.RawMessage `json:"_id"`
	}
	b, err := os.ReadFile(filepath.Join(d.dir, collection+".json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &docs); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, doc := range docs {
		var s string
		if json.Unmarshal(doc.ID, &s) == nil {
			ids = append(ids, s)
			continue
		}
		var oid struct {
			OID string `json:"$oid"`
		}
		if err := json.Unmarshal(doc.ID, &oid); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, oid.OID)
	}
	return ids
}

// edit changes the document of collection whose id is given: a new
// field "edited" with a number no edit used before. It returns the
// time of the rename.
func (d *newsroomDir) edit(t testing.TB, collection, id string) time.Time {
	t.Helper()
	d.mu.Lock()
	d.n++
	n := d.n
	d.mu.Unlock()
	d.set(t, collection, id, "edited", n)
	return time.Now()
}

// set gives field the value in the document of collection whose id is
// given.
func (d *newsroomDir) set(t testing.TB, collection, id, field string, value any) {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	v, err := json.Marshal(value)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	d.rewrite(t, collection, func(doc map[string]json.RawMessage) {
		if strings.Contains(string(doc["_id"]), `"`+id+`"`) {
			doc[field] = v
			found = true
		}
	})
	if !found {
		t.Fatalf("no %s %s", collection, id)
	}
}

// rewrite passes each document of a collection file to change, then
// writes the file anew and renames it into place.
func (d *newsroomDir) rewrite(t testing.TB, collection string, change func(map[string]json.RawMessage)) {
	t.Helper()
	path := filepath.Join(d.dir, collection+".json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]json.RawMessage
	if err := json.Unmarshal(b, &docs); err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		change(doc)
	}
	if b, err = json.Marshal(docs); err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// A change is one event of a /changes stream.
type change struct {
	ID       string          `json:"-"` // the event's id: its token
	Resource string          `json:"resource"`
	DocID    string          `json:"_id"`
	Op       string          `json:"op"`
	Doc      json.RawMessage `json:"doc"` // with include=doc
	received time.Time
}

// An eventStream reads a /changes event stream into a channel, which it
// closes when the stream ends.
type eventStream struct {
	events chan change
	cancel context.CancelFunc
}

// follow opens /changes as Server-Sent Events on base, resuming after
// lastID when it is not empty, else from now.
func follow(t testing.TB, base, auth, lastID string) *eventStream {
	t.Helper()
	return followWith(t, base, "", auth, lastID)
}

// followWith is follow with more parameters (query, "&include=doc").
func followWith(t testing.TB, base, query, auth, lastID string) *eventStream {
	t.Helper()
	res, cancel := openChanges(t, base, "?since=now"+query, auth, lastID)
	s := &eventStream{events: make(chan change, 1024), cancel: cancel}
	go func() { // ends when the stream does, or cancel
		defer close(s.events)
		defer res.Body.Close()
		r := bufio.NewReader(res.Body)
		var ev change
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimRight(line, "\n")
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[len("id: "):]
			case strings.HasPrefix(line, "data: "):
				if json.Unmarshal([]byte(line[len("data: "):]), &ev) != nil {
					ev = change{}
				}
			case line == "" && ev.Op != "":
				ev.received = time.Now()
				s.events <- ev
				ev = change{}
			case line == "":
				ev = change{}
			}
		}
	}()
	return s
}

// until reads events until want says it has all it needs, failing after
// a generous deadline. Each event goes to seen.
func (s *eventStream) until(t testing.TB, what string, seen func(change), done func() bool) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for !done() {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("the stream ended before %s", what)
			}
			seen(ev)
		case <-deadline:
			t.Fatalf("no %s within a minute", what)
		}
	}
}

// openChanges opens /changes on base as an event stream, with the query
// given, from the position lastID (Last-Event-ID) when it is not "";
// the stream must open (200). cancel (called at the test's end too)
// closes it.
func openChanges(t testing.TB, base, query, auth, lastID string) (*http.Response, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/prodapi/v1/changes"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", auth)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK {
		cancel()
		res.Body.Close()
		t.Fatalf("the stream: %s", res.Status)
	}
	t.Cleanup(cancel)
	return res, cancel
}

// startFleet starts n replicas over one sandbox directory and one Redis,
// with the further environment given in pairs.
func startFleet(t testing.TB, n int, dir, redisURL string, kv ...string) []*instance {
	t.Helper()
	fleet := make([]*instance, n)
	for i := range fleet {
		fleet[i] = start(t, append([]string{"PRODAPI_SANDBOX", dir, "REDIS_URL", redisURL}, kv...)...)
	}
	return fleet
}

// Three replicas on one Redis and one sandbox directory, a client
// following /changes on A: A stops mid-stream, the newsroom is edited at
// once, and the client resumes on B with Last-Event-ID. Every edit's
// event arrives, before and after; duplicates may, and are counted.
func TestFleetChangesSurviveAReplica(t *testing.T) {
	rs := realserver.StartRedis(t, 0)
	room := newNewsroomDir(t)
	fleet := startFleet(t, 3, room.dir, rs.URL())
	a, b := fleet[0], fleet[1]
	auth := bearer(t, devSecret, "ARCHIVE_READ", "DESKS_READ")
	items := room.ids(t, "archive")
	before, after := items[:3], items[3:9]

	got := map[string]int{} // items/<id> -> events
	var last string
	events := 0
	seen := func(ev change) {
		events++
		got[ev.Resource+"/"+ev.DocID]++
		last = ev.ID
	}
	has := func(ids []string) func() bool {
		return func() bool {
			for _, id := range ids {
				if got["items/"+id] == 0 {
					return false
				}
			}
			return true
		}
	}
	onA := follow(t, a.base, auth, "")
	for _, id := range before {
		room.edit(t, "archive", id)
		onA.until(t, "the event of "+id+" on A", seen, has([]string{id}))
	}
	if err := a.stop(); err != nil {
		t.Fatalf("stopping A: %v", err)
	}
	for _, id := range after {
		room.edit(t, "archive", id)
	}
	for range onA.events { // what A wrote before it stopped
	}
	onB := follow(t, b.base, auth, last)
	onB.until(t, "every edit's event on B", seen, has(after))

	dups := 0
	for _, id := range items[:9] {
		if got["items/"+id] == 0 {
			t.Errorf("no event for the edit of item %s", id)
		}
		dups += got["items/"+id] - 1
	}
	t.Logf("%d edits, %d events, %d duplicates", len(items[:9]), events, dups)
	for k := range got {
		if !strings.HasPrefix(k, "items/") {
			t.Errorf("an event of %s, which nobody edited", k)
		}
	}
}

// A token that may read desks only, on a feed of item and desk edits,
// sees the desk entries only; a token that may read both sees both.
func TestChangesShowOnlyTheTokensResources(t *testing.T) {
	room := newNewsroomDir(t)
	in := start(t, "PRODAPI_SANDBOX", room.dir)
	desksOnly := bearer(t, devSecret, "DESKS_READ")
	both := bearer(t, devSecret, "DESKS_READ", "ARCHIVE_READ")
	since := func(auth string) string {
		status, _, body := in.get(t, "/prodapi/v1/changes?since=now", auth)
		var page struct {
			Meta struct {
				Since string `json:"since"`
			} `json:"_meta"`
		}
		if status != 200 || json.Unmarshal(body, &page) != nil {
			t.Fatalf("since=now: %d %s", status, body)
		}
		return page.Meta.Since
	}
	fromDesks, fromBoth := since(desksOnly), since(both)

	items, desks := room.ids(t, "archive"), room.ids(t, "desks")
	room.edit(t, "archive", items[0])
	room.edit(t, "desks", desks[0])
	room.edit(t, "archive", items[1])
	room.edit(t, "desks", desks[1])
	room.edit(t, "archive", items[2])

	// read pages from since until want entries came, by resource.
	read := func(auth, since string, want int) map[string]int {
		counts := map[string]int{}
		total := 0
		deadline := time.Now().Add(60 * time.Second)
		for total < want && time.Now().Before(deadline) {
			status, _, body := in.get(t, "/prodapi/v1/changes?wait=5&since="+url.QueryEscape(since), auth)
			var page changesPage
			if status != 200 || json.Unmarshal(body, &page) != nil {
				t.Fatalf("/changes: %d %s", status, body)
			}
			for _, e := range page.Items {
				counts[e.Resource]++
				total++
			}
			since = page.Meta.Since
		}
		return counts
	}
	all := read(both, fromBoth, 5)
	if all["items"] != 3 || all["desks"] != 2 {
		t.Fatalf("a token of both resources read %v, want 3 items and 2 desks", all)
	}
	// The five entries are in the log: a desks token reads the two of
	// its resource, and then nothing more.
	if got := read(desksOnly, fromDesks, 2); got["desks"] != 2 || len(got) != 1 {
		t.Errorf("a desks token read %v, want 2 desks and nothing else", got)
	}
	status, _, body := in.get(t, "/prodapi/v1/changes?since="+url.QueryEscape(fromDesks)+"&max_results=500", desksOnly)
	if status != 200 || strings.Contains(string(body), `"items"`) || strings.Count(string(body), `"resource":"desks"`) != 2 {
		t.Errorf("a desks token's page: %d %s", status, body)
	}
}

// changesPage is a JSON answer of /changes.
type changesPage struct {
	Items []change `json:"_items"`
	Meta  struct {
		Since string `json:"since"`
	} `json:"_meta"`
}

// eventually waits for cond, a minute at most.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within a minute", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// BenchmarkFleetChangeLatency: three replicas on one redis-server and
// one sandbox directory, a client following /changes on the first, its
// entries alone (stream) or each with its document (include=doc); each
// round edits an item and waits for its event. Reported: the median and
// 99th percentile from the file's rename to the event's arrival.
//
//	go test -run '^$' -bench FleetChangeLatency -benchtime 100x ./cmd/prodapi
func BenchmarkFleetChangeLatency(b *testing.B) {
	b.Run("stream", func(b *testing.B) { fleetChangeLatency(b, "") })
	b.Run("include=doc", func(b *testing.B) { fleetChangeLatency(b, "&include=doc") })
}

func fleetChangeLatency(b *testing.B, query string) {
	rs := realserver.StartRedis(b, 0)
	room := newNewsroomDir(b)
	fleet := startFleet(b, 3, room.dir, rs.URL())
	auth := bearer(b, devSecret, "ARCHIVE_READ")
	items := room.ids(b, "archive")
	s := followWith(b, fleet[0].base, query, auth, "")
	var lags []time.Duration
	b.ResetTimer()
	for i := range b.N {
		id := items[i%len(items)]
		edited := room.edit(b, "archive", id)
		var at time.Time
		s.until(b, "the event of "+id, func(ev change) {
			if ev.Resource == "items" && ev.DocID == id {
				at = ev.received
				if query != "" && !strings.Contains(string(ev.Doc), id) {
					b.Fatalf("the event of %s carries no document: %s", id, ev.Doc)
				}
			}
		}, func() bool { return !at.IsZero() })
		lags = append(lags, at.Sub(edited))
	}
	b.StopTimer()
	slices.Sort(lags)
	b.ReportMetric(float64(lags[len(lags)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lags[min(len(lags)-1, len(lags)*99/100)].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lags[len(lags)-1].Microseconds())/1000, "max-ms")
}
