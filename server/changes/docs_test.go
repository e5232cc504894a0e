package changes_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/cache"
	"github.com/prodapi/prodapi/enrich"
	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/server/changes"
	"github.com/prodapi/prodapi/server/changes/changestest"
	"github.com/prodapi/prodapi/server/httperr"
	"github.com/prodapi/prodapi/server/render"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// Documents of the sample newsroom.
const (
	sampleItem  = "urn:newsml:riverton.example:2026-11-19T18:05:20.436314:a3a0921f-4393-462e-b5ba-04ffb1315805"
	sampleItem2 = "urn:newsml:riverton.example:2026-11-20T11:05:15.663457:15b7f6ae-93c3-4046-947e-556a24b5a833"
	sampleDesk  = "67c42d4c957184d45484e656"
	samplePlan  = "urn:newsml:riverton.example:2026-11-12T10:00:57.705948:2d9cf439-699f-462a-942a-4dafff35f810"
)

// newNewsroomServer serves the change log with the sample newsroom
// behind it, through the cache and the renderer, as prodapi serves it.
func newNewsroomServer(t *testing.T, edit ...func(*changes.Options)) *changesServer {
	t.Helper()
	store, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := enrich.New(store, enrich.Options{MediaPrefix: "http://localhost:5500/prodapi/v1/assets"})
	c := cache.New(nil, render.New(store, e.Enrich), cache.Options{Now: func() time.Time { return testNow }})
	t.Cleanup(func() { c.Close(context.Background()) })
	return newLoadedServer(t, c, edit...)
}

// rawPage is a /changes answer with each entry's fields as they were
// written.
type rawPage struct {
	Items []map[string]json.RawMessage         `json:"_items"`
	Meta  struct{ Since string }               `json:"_meta"`
	Links struct{ Next struct{ Href string } } `json:"_links"`
}

func (cs *changesServer) rawPage(t *testing.T, target, auth string) (response, *rawPage) {
	t.Helper()
	res := cs.do(t, "GET", "/prodapi/v1/changes"+target, "Authorization", auth)
	if res.status != http.StatusOK {
		return res, nil
	}
	var p rawPage
	if err := json.Unmarshal([]byte(res.body), &p); err != nil {
		t.Fatalf("GET %s: %v", target, err)
	}
	return res, &p
}

// detail is the body of GET <resource>/<id>, for auth.
func (cs *changesServer) detail(t *testing.T, resource, id, auth string) string {
	t.Helper()
	res := cs.do(t, "GET", "/prodapi/v1/"+resource+"/"+url.PathEscape(id), "Authorization", auth)
	if res.status != http.StatusOK {
		t.Fatalf("GET %s/%s: %d %s", resource, id, res.status, res.body)
	}
	return res.body
}

// checkDocs holds the docs of entries to the details the same token
// reads: byte for byte, null for a 404, none for a delete or a flush.
func checkDocs(t *testing.T, cs *changesServer, auth string, entries []map[string]json.RawMessage) {
	t.Helper()
	for _, e := range entries {
		var res, id, op string
		json.Unmarshal(e["resource"], &res)
		json.Unmarshal(e["_id"], &id)
		json.Unmarshal(e["op"], &op)
		doc, has := e["doc"]
		switch {
		case op == sources.OpDelete || op == sources.OpFlush:
			if has {
				t.Errorf("%s %s/%s carries a doc: %.80s", op, res, id, doc)
			}
		case strings.HasPrefix(id, "no-such"):
			if string(doc) != "null" {
				t.Errorf("%s %s/%s, a 404: doc %.80s, want null", op, res, id, doc)
			}
		case !has:
			t.Errorf("%s %s/%s carries no doc", op, res, id)
		default:
			if want := cs.detail(t, res, id, auth); string(doc) != want {
				t.Errorf("%s %s/%s: doc\n%.300s\nwant its detail\n%.300s", op, res, id, doc, want)
			}
		}
	}
}

// With include=doc, each insert, update and replace entry carries its
// document exactly as the token's GET of its _links.self answers now:
// null for one that answers 404; a delete or a flush carries none. On
// streams, each event's data does.
func TestChangesIncludeDoc(t *testing.T) {
	cs := newNewsroomServer(t)
	all := token(t, sources.AllScopes...)
	cs.log.Append("items", sampleItem, sources.OpInsert, changeAt)
	cs.log.Append("desks", sampleDesk, sources.OpUpdate, changeAt)
	cs.log.Append("items", sampleItem2, sources.OpDelete, changeAt)
	cs.log.Append("planning", "", sources.OpFlush, changeAt)
	cs.log.Append("items", "no-such-item", sources.OpUpdate, changeAt)
	cs.log.Append("planning", samplePlan, sources.OpReplace, changeAt)
	cs.log.Append("items", sampleItem, sources.OpUpdate, changeAt)

	res, p := cs.rawPage(t, "?include=doc", all)
	if p == nil || len(p.Items) != 7 {
		t.Fatalf("include=doc: %d %.300s", res.status, res.body)
	}
	checkDocs(t, cs, all, p.Items)
	if got := cs.plain(p.Links.Next.Href); got != "changes?include=doc&since=7-0" {
		t.Errorf("next %q", got)
	}
	if head := cs.do(t, "HEAD", "/prodapi/v1/changes?include=doc", "Authorization", all); head.header.Get("Content-Length") != strconv.Itoa(len(res.body)) {
		t.Errorf("HEAD Content-Length %s, GET body %d bytes", head.header.Get("Content-Length"), len(res.body))
	}
	// Without include=doc, no entry has one.
	if _, p := cs.rawPage(t, "", all); p == nil || p.Items[0]["doc"] != nil {
		t.Errorf("without include=doc: %v", p)
	}

	// A token reads the documents of the resources it may read, as its
	// details.
	desks := token(t, sources.ScopeDesks)
	if _, p := cs.rawPage(t, "?include=doc", desks); p == nil || len(p.Items) != 1 {
		t.Fatalf("desks only: %v", p)
	} else {
		checkDocs(t, cs, desks, p.Items)
	}

	// Pretty indents the page, documents included.
	if _, p := cs.rawPage(t, "?include=doc&pretty&max_results=1", all); p == nil || p.Items[0]["doc"] == nil {
		t.Errorf("pretty: %v", p)
	}

	_, r := cs.openStream(t, "?include=doc", all)
	var events []map[string]json.RawMessage
	for range 7 {
		ev := mustEvent(t, r)
		var e map[string]json.RawMessage
		if err := json.Unmarshal([]byte(ev.data), &e); err != nil {
			t.Fatalf("event %+v: %v", ev, err)
		}
		events = append(events, e)
	}
	checkDocs(t, cs, all, events)
	if diff := cmp.Diff(p.Items, events); diff != "" {
		t.Errorf("the stream's entries and the page's differ (-page +stream):\n%s", diff)
	}
}

// Documents are at least as new as the entries: the page waits for this
// replica to have applied the entries it carries (Log.WaitApplied), up
// to MinPositionWait, then answers 503.
func TestChangesIncludeDocWaitsForTheEntries(t *testing.T) {
	cs := newNewsroomServer(t)
	all := token(t, sources.AllScopes...)
	cs.log.Hold()
	cs.log.Append("desks", sampleDesk, sources.OpUpdate, changeAt)
	answer := func() chan response {
		ch := make(chan response, 1)
		go func() { // ends when the request is answered
			ch <- cs.do(t, "GET", "/prodapi/v1/changes?include=doc", "Authorization", all)
		}()
		return ch
	}
	ch := answer()
	cs.log.AwaitWaiter(t)
	cs.timers.fire(t, 2*time.Second)
	res := <-ch
	if want := string(httperr.Body(503, changes.MsgDocsNotApplied)); res.status != 503 || res.body != want || res.header.Get("Retry-After") == "" {
		t.Errorf("not applied in time: %d %v %s, want 503 %s", res.status, res.header, res.body, want)
	}
	ch = answer()
	cs.log.AwaitWaiter(t)
	cs.log.Apply(1)
	if res := <-ch; res.status != 200 || !strings.Contains(res.body, `"doc":{`) {
		t.Errorf("applied: %d %.200s", res.status, res.body)
	}
}

// A document that fails to load fails the page, in the detail's terms:
// a copy must not keep what it did not get.
func TestChangesIncludeDocFails(t *testing.T) {
	failing := server.LoaderFunc(func(context.Context, *sources.Query) (*sources.Representation, error) {
		return nil, fmt.Errorf("test: %w", sources.ErrTimeout)
	})
	incomplete := server.LoaderFunc(func(context.Context, *sources.Query) (*sources.Representation, error) {
		return &sources.Representation{Status: 200, Body: []byte(`{"_id":"x"}`), Missing: []string{"planning"}}, nil
	})
	for _, tc := range []struct {
		name   string
		load   server.Loader
		status int
	}{{"timeout", failing, 504}, {"incomplete", incomplete, 503}} {
		t.Run(tc.name, func(t *testing.T) {
			cs := newLoadedServer(t, tc.load)
			all := token(t, sources.AllScopes...)
			cs.log.Append("desks", sampleDesk, sources.OpUpdate, changeAt)
			if res, _ := cs.get(t, "?include=doc", all); res.status != tc.status || res.header.Get("Retry-After") == "" {
				t.Errorf("%d %v %s, want %d", res.status, res.header, res.body, tc.status)
			}
			// Without documents, the page is served.
			if res, _ := cs.get(t, "", all); res.status != 200 {
				t.Errorf("without include=doc: %d", res.status)
			}
			// A stream ends with a close event in the same terms.
			_, r := cs.openStream(t, "?include=doc&since=now", all)
			cs.log.AwaitWaiter(t)
			cs.log.Append("desks", sampleDesk, sources.OpUpdate, changeAt)
			if ev := mustEvent(t, r); ev.event != "close" || !strings.Contains(ev.data, strconv.Itoa(tc.status)) {
				t.Errorf("stream: %+v", ev)
			}
		})
	}
}

// bigDocs answers every detail with a document of size bytes (big, for
// the one named "big": 5 MiB).
func bigDocs(size int) server.Loader {
	return server.LoaderFunc(func(_ context.Context, q *sources.Query) (*sources.Representation, error) {
		n := size
		if q.ID == "big" {
			n = 5 << 20
		}
		body := fmt.Appendf(nil, `{"_id":%q,"pad":"%s"}`, q.ID, strings.Repeat("x", n))
		return &sources.Representation{Status: 200, Body: body, Total: -1}, nil
	})
}

// A page holds at most 4 MiB of JSON, documents included: fewer entries
// when they are big, and next resumes after the last it holds, never
// past an entry it did not send; one entry always goes, whatever its
// size. A stream sends them all.
func TestChangesPageBound(t *testing.T) {
	cs := newLoadedServer(t, bigDocs(1<<20))
	all := token(t, sources.AllScopes...)
	for i := range 7 {
		cs.log.Append("desks", "d"+strconv.Itoa(i), sources.OpUpdate, changeAt)
	}
	cs.log.Append("desks", "big", sources.OpUpdate, changeAt)
	cs.log.Append("desks", "after", sources.OpUpdate, changeAt)
	var pages [][]string
	next, sent := "?include=doc", 0
	for range 10 {
		res, p := cs.get(t, next, all)
		if p == nil {
			t.Fatalf("%d %.200s", res.status, res.body)
		}
		if len(p.Items) == 0 {
			break
		}
		if len(res.body) > changes.MaxPageBytes && len(p.Items) > 1 {
			t.Errorf("a page of %d bytes and %d entries", len(res.body), len(p.Items))
		}
		sent += len(p.Items)
		if tok := cs.tok(p.Meta.Since); tok != changestest.Token(sent) {
			t.Errorf("since %s after %v, want the last entry sent, %s", tok, ids(p), changestest.Token(sent))
		}
		pages = append(pages, ids(p))
		next = strings.TrimPrefix(p.Links["next"].Href, "changes")
	}
	want := [][]string{
		{"desks/d0", "desks/d1", "desks/d2"},
		{"desks/d3", "desks/d4", "desks/d5"},
		{"desks/d6"},
		{"desks/big"},
		{"desks/after"},
	}
	if diff := cmp.Diff(want, pages); diff != "" {
		t.Errorf("pages (-want +got):\n%s", diff)
	}

	_, r := cs.openStream(t, "?include=doc", all)
	var streamed []string
	for range 9 {
		ev := mustEvent(t, r)
		var e struct {
			ID string `json:"_id"`
		}
		json.Unmarshal([]byte(ev.data), &e)
		streamed = append(streamed, e.ID)
	}
	if diff := cmp.Diff([]string{"d0", "d1", "d2", "d3", "d4", "d5", "d6", "big", "after"}, streamed); diff != "" {
		t.Errorf("streamed (-want +got):\n%s", diff)
	}
}
