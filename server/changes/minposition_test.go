package changes_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/cache"
	"github.com/prodapi/prodapi/server/changes"
	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/sources"
)

// versions is a document database whose documents the test rewrites:
// each answers with its version, and each load is counted.
type versions struct {
	mu    sync.Mutex
	v     map[string]int
	loads int
}

func (d *versions) set(id string, v int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.v[id] = v
}

func (d *versions) count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.loads
}

func (d *versions) Load(_ context.Context, q *sources.Query) (*sources.Representation, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.loads++
	body := fmt.Appendf(nil, `{"_id":%q,"v":%d}`, q.ID+"list", d.v["list"])
	if q.IsDetail() {
		body = fmt.Appendf(nil, `{"_id":%q,"v":%d}`, q.ID, d.v[q.ID])
	}
	return &sources.Representation{Status: 200, Body: body, Total: -1}, nil
}

// newVersionsServer serves versions through a cache, in process, on the
// test's clock.
func newVersionsServer(t *testing.T, edit ...func(*changes.Options)) (*changesServer, *versions, *cache.Cache) {
	t.Helper()
	db := &versions{v: map[string]int{"d1": 1, "list": 1}}
	c := cache.New(nil, db, cache.Options{Now: func() time.Time { return testNow }})
	t.Cleanup(func() { c.Close(context.Background()) })
	return newLoadedServer(t, c, edit...), db, c
}

// A read with min_position reflects every change up to that position:
// it waits for this replica to apply the log up to it (its cache to
// invalidate what changed), up to MinPositionWait, then answers 503 with
// Retry-After; once applied, the new version, never the cached one.
// min_position is not part of the cache key, and HEAD waits the same.
func TestMinPosition(t *testing.T) {
	cs, db, c := newVersionsServer(t)
	desks := token(t, sources.ScopeDesks)
	get := func(method, target string) chan response {
		ch := make(chan response, 1)
		go func() { // ends when the request is answered
			ch <- cs.do(t, method, "/prodapi/v1/"+target, "Authorization", desks)
		}()
		return ch
	}
	if res := <-get("GET", "desks/d1"); res.body != `{"_id":"d1","v":1}` {
		t.Fatalf("before: %d %s", res.status, res.body)
	}

	// The database changes; the log has the entry, which this replica
	// has not applied yet: its cache still holds version 1.
	db.set("d1", 2)
	cs.log.Hold()
	pos := cs.pos(cs.log.Append("desks", "d1", sources.OpUpdate, changeAt))
	if res := <-get("GET", "desks/d1"); res.body != `{"_id":"d1","v":1}` {
		t.Errorf("without min_position: %s, want the cached version 1", res.body)
	}
	want503 := string(httperr.Body(503, changes.MsgNotApplied))
	for _, method := range []string{"GET", "HEAD"} {
		ch := get(method, "desks/d1?min_position="+pos)
		cs.log.AwaitWaiter(t)
		cs.timers.fire(t, 2*time.Second) // PRODAPI_MIN_POSITION_WAIT
		res := <-ch
		if res.status != 503 || res.header.Get("Retry-After") != "1" || (method == "GET" && res.body != want503) {
			t.Errorf("%s, not applied in time: %d %v %s, want 503 %s", method, res.status, res.header, res.body, want503)
		}
	}

	// Applied while the request waits: the invalidation, then the log's
	// applied position, as the log's Applier does.
	ch := get("GET", "desks/d1?min_position="+pos)
	cs.log.AwaitWaiter(t)
	if err := c.Changed(context.Background(), "desks", "d1"); err != nil {
		t.Fatal(err)
	}
	cs.log.Apply(1)
	if res := <-ch; res.status != 200 || res.body != `{"_id":"d1","v":2}` {
		t.Errorf("applied: %d %s, want version 2", res.status, res.body)
	}
	// Stored for everyone, under the key without min_position: neither a
	// request without it nor one with another position loads again.
	loads := db.count()
	for _, target := range []string{"desks/d1", "desks/d1?min_position=" + cs.pos("1-0"), "desks/d1/?min_position=" + pos + "&page=1"} {
		if res := <-get("GET", target); res.status != 200 || !strings.Contains(res.body, `"v":2`) {
			t.Errorf("%s: %d %s", target, res.status, res.body)
		}
	}
	if n := db.count() - loads; n != 0 {
		t.Errorf("%d loads for requests min_position is not part of the key of", n)
	}
	// A list too.
	if res := <-get("GET", "desks?min_position="+pos); res.status != 200 {
		t.Errorf("a list: %d %s", res.status, res.body)
	}
}

// min_position refusals, after the token and the parameters: 400 for
// what is not a position, 410 for one that does not open or that the log
// cannot continue (ahead of it: a lost tail), 503 while the log cannot
// be read.
func TestMinPositionRefused(t *testing.T) {
	cs, _, _ := newVersionsServer(t)
	desks := token(t, sources.ScopeDesks)
	cs.log.Append("desks", "d1", sources.OpUpdate, changeAt)
	other := changes.New(cs.log, changes.Options{Secret: []byte("another secret, at least 32 bytes long")})
	gone := string(httperr.Body(410, "min_position"+changes.MsgChangesGone[len("since"):]))
	for _, tc := range []struct {
		name, target, auth string
		status             int
		body               string
	}{
		{"no token", "desks/d1?min_position=x", "", 401, ""},
		{"another scope", "items/i1?min_position=x", desks, 403, ""},
		{"a bad parameter first", "desks?min_position=x&projection=1", desks, 400, ""},
		{"not a position", "desks/d1?min_position=abc", desks, 400, string(httperr.Body(400, "min_position: "+changes.MsgBadToken))},
		{"empty", "desks/d1?min_position=", desks, 400, ""},
		{"malformed escape", "desks/d1?min_position=%zz", desks, 400, ""},
		{"another secret's", "desks/d1?min_position=" + changes.Seal(other, "1-0"), desks, 410, gone},
		{"a bare token", "desks/d1?min_position=1-0", desks, 410, gone},
		{"ahead of the log", "desks/d1?min_position=" + cs.pos("9-0"), desks, 410, gone},
	} {
		res := cs.do(t, "GET", "/prodapi/v1/"+tc.target, "Authorization", tc.auth)
		if res.status != tc.status || (tc.body != "" && res.body != tc.body) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, res.status, res.body, tc.status, tc.body)
		}
	}
	cs.log.Fail(errors.New("redis: down"))
	res := cs.do(t, "GET", "/prodapi/v1/desks/d1?min_position="+cs.pos("1-0"), "Authorization", desks)
	if res.status != 503 || res.header.Get("Retry-After") == "" || res.body != string(httperr.Body(503, changes.MsgChangesUnavailable)) {
		t.Errorf("the log down: %d %v %s", res.status, res.header, res.body)
	}
}

// A search list (items) with min_position also waits until SearchLag has
// passed since the position was handed out, the time the index takes to
// show a change, and is never answered from a list stored before then;
// a detail of the same resource does not wait for the index.
func TestMinPositionSearchLag(t *testing.T) {
	cs, db, _ := newVersionsServer(t, func(o *changes.Options) { o.MinPositionWait = 5 * time.Second })
	// (MinPositionWait, set apart from SearchLag, bounds the wait for the
	// log alone: the fake clock fires the timer of 2 s, the lag's.)
	archive := token(t, sources.ScopeArchive)
	get := func(target string) chan response {
		ch := make(chan response, 1)
		go func() { // ends when the request is answered
			ch <- cs.do(t, "GET", "/prodapi/v1/"+target, "Authorization", archive)
		}()
		return ch
	}
	if res := <-get("items"); res.status != 200 {
		t.Fatalf("items: %d %s", res.status, res.body)
	}
	pos := cs.pos(cs.log.Append("items", "i1", sources.OpUpdate, changeAt))
	db.set("list", 2)

	loads := db.count()
	ch := get("items?min_position=" + pos)
	cs.timers.fire(t, 2*time.Second) // SearchLag after the position was handed out
	if res := <-ch; res.status != 200 || !strings.Contains(res.body, `"v":2`) {
		t.Errorf("after the search lag: %d %s, want the list loaded again", res.status, res.body)
	}
	if n := db.count() - loads; n != 1 {
		t.Errorf("%d loads, want 1: the cached list was stored before the lag ended", n)
	}
	// A detail reads the database: no lag.
	if res := <-get("items/i1?min_position=" + pos); res.status != 200 {
		t.Errorf("a detail: %d %s", res.status, res.body)
	}
}

// While the server drains, min_position waits no more: a position this
// replica has applied answers, one it has not is a 503 at once.
func TestMinPositionWhileDraining(t *testing.T) {
	cs, _, _ := newVersionsServer(t)
	desks := token(t, sources.ScopeDesks)
	applied := cs.pos(cs.log.Append("desks", "d1", sources.OpUpdate, changeAt))
	cs.log.Hold()
	pending := cs.pos(cs.log.Append("desks", "d1", sources.OpUpdate, changeAt))
	cs.srv.EndStreams()
	if res := cs.do(t, "GET", "/prodapi/v1/desks/d1?min_position="+applied, "Authorization", desks); res.status != 200 {
		t.Errorf("applied: %d %s", res.status, res.body)
	}
	if res := cs.do(t, "GET", "/prodapi/v1/desks/d1?min_position="+pending, "Authorization", desks); res.status != 503 {
		t.Errorf("not applied: %d %s", res.status, res.body)
	}
}
