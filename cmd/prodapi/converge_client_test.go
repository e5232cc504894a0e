package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A convClient keeps a copy of the newsroom as the README's "Mirroring a
// newsroom" says, with the event stream as its step 3: it takes the
// log's position (since=now), walks every list by cursor, then follows
// /changes with include=doc, applying each entry in order: delete drops
// the document, flush walks its resource again, any other entry stores
// the document it carries (null: drops it, its delete follows). It
// resumes after a dropped stream or a 503 with Last-Event-ID, on the
// next replica, as a load balancer would send it; a 410 (or a close 410)
// starts it all over, the walks dropping what they no longer find.
//
// Besides the copy, it notes the newest edit number (markerOf) it saw of
// each document, and each deletion, whether an entry or a walk showed
// it: what waitSeen counts.
type convClient struct {
	bases []string // the replicas, tried in turn
	auth  string
	get   *http.Client
	idle  time.Duration // the longest a stream may stay silent

	mu      sync.Mutex
	at      int // the replica in use
	since   string
	copy    map[string]map[string]json.RawMessage // resource → _id → document
	marks   map[string]int                        // resource/_id → newest edit seen, of every document seen
	deleted map[string]bool                       // resource/_id → its deletion seen
	stats   convStats
	recent  []string // the last entries applied, for a failure's message
	applied []string // every entry applied, "resource/_id op", in order
}

// convStats counts what the client did.
type convStats struct {
	syncs, entries, docs, nulls, deletes, flushes int
	gone, unavailable, dropped, reconnects        int
	byReplica                                     map[int]int    // entries applied, by replica
	byDoc                                         map[string]int // entries applied, by resource/_id
	lastErr                                       string
}

// errStreamEnded is a stream that ended without a close event (the
// server shut down): the client reconnects.
var errStreamEnded = errors.New("the stream ended")

// A convStatus is an answer other than 200, or a close event's status.
type convStatus struct {
	code int
	body string
	// retryAfter is the answer's Retry-After (0: none).
	retryAfter time.Duration
}

// newConvStatus is the *convStatus of res, whose body is body.
func newConvStatus(res *http.Response, body []byte) *convStatus {
	s := &convStatus{code: res.StatusCode, body: string(body)}
	if secs, err := strconv.Atoi(res.Header.Get("Retry-After")); err == nil {
		s.retryAfter = time.Duration(secs) * time.Second
	}
	return s
}

func (s *convStatus) Error() string { return fmt.Sprintf("%d %.300s", s.code, s.body) }

func (s convStats) String() string {
	return fmt.Sprintf("%d syncs, %d entries (%d documents, %d null, %d deletes, %d flushes), %d 410s, %d 503s, %d streams ended, %d reconnections, entries by replica %v; last failure: %s",
		s.syncs, s.entries, s.docs, s.nulls, s.deletes, s.flushes, s.gone, s.unavailable, s.dropped, s.reconnects, s.byReplica, s.lastErr)
}

func convCode(err error) int {
	if s, ok := errors.AsType[*convStatus](err); ok {
		return s.code
	}
	return 0
}

// startConvClient starts a client of the replicas at bases (their
// http://host:port) with the Authorization header auth, until the test
// ends.
func startConvClient(t *testing.T, bases []string, auth string) *convClient {
	t.Helper()
	c := &convClient{bases: bases, auth: auth, get: &http.Client{Timeout: 2 * time.Minute}, idle: time.Minute,
		copy: map[string]map[string]json.RawMessage{}, marks: map[string]int{}, deleted: map[string]bool{},
		stats: convStats{byReplica: map[int]int{}, byDoc: map[string]int{}}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // ends with ctx, at the test's end
		defer close(done)
		c.run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// run mirrors until ctx ends: a sync when it has no position, then the
// stream from its position; a 410 drops the position, anything else
// moves to the next replica and tries again from the same position.
func (c *convClient) run(ctx context.Context) {
	for ctx.Err() == nil {
		c.mu.Lock()
		since, at := c.since, c.at
		c.mu.Unlock()
		var err error
		if since == "" {
			err = c.sync(ctx, at)
		} else {
			err = c.stream(ctx, at, since)
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil { // synced: follow from the position
			continue
		}
		// A client's pause before it tries again, on the next replica: a
		// 503's Retry-After (a second for a close event's), else a
		// moment.
		pause := 100 * time.Millisecond
		c.mu.Lock()
		c.stats.lastErr = err.Error()
		switch code := convCode(err); {
		case code == http.StatusGone:
			c.stats.gone++
			c.since = ""
		case code == http.StatusServiceUnavailable:
			c.stats.unavailable++
			pause = time.Second
			if s, _ := errors.AsType[*convStatus](err); s.retryAfter > 0 {
				pause = s.retryAfter
			}
		case errors.Is(err, errStreamEnded):
			c.stats.dropped++
		}
		c.stats.reconnects++
		c.at = (c.at + 1) % len(c.bases)
		c.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

// sync is the README's steps 1 and 2 on replica at: the log's position,
// then every list the token may read, each replacing what the copy held
// of its resource.
func (c *convClient) sync(ctx context.Context, at int) error {
	base := c.bases[at]
	var now struct {
		Meta struct {
			Since string `json:"since"`
		} `json:"_meta"`
	}
	if err := c.getJSON(ctx, base+"/prodapi/v1/changes?since=now", &now); err != nil {
		return err
	}
	var home struct {
		Links struct {
			Child []struct {
				Href string `json:"href"`
			} `json:"child"`
		} `json:"_links"`
	}
	if err := c.getJSON(ctx, base+"/prodapi/v1/", &home); err != nil {
		return err
	}
	for _, child := range home.Links.Child {
		if err := c.walk(ctx, base, child.Href); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.since = now.Meta.Since
	c.stats.syncs++
	return nil
}

// walk reads every document of resource by cursor and makes them the
// copy's, dropping what the walk no longer found.
func (c *convClient) walk(ctx context.Context, base, resource string) error {
	docs, err := walkList(ctx, c.get, base, resource, c.auth, "")
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	// Every document of the resource the client knew of and the walk no
	// longer finds is deleted: one in the copy, and one an entry's null
	// doc dropped from it (whose delete entry a lost tail may have taken
	// with it, the 410 that followed bringing this walk).
	for key := range c.marks {
		if id, ok := strings.CutPrefix(key, resource+"/"); ok {
			if _, found := docs[id]; !found {
				c.deleted[key] = true
			}
		}
	}
	for id, doc := range docs {
		c.note(resource, id, doc)
	}
	c.copy[resource] = docs
	return nil
}

// note records the edit a document shows (-1: none; the document is
// known). c.mu is held.
func (c *convClient) note(resource, id string, doc json.RawMessage) {
	key := resource + "/" + id
	if m, known := c.marks[key]; !known || markerOf(resource, doc) > m {
		c.marks[key] = markerOf(resource, doc)
	}
}

// walkList reads every document of a list by cursor, with min_position
// on each page when it is not "".
func walkList(ctx context.Context, client *http.Client, base, resource, auth, minPosition string) (map[string]json.RawMessage, error) {
	docs := map[string]json.RawMessage{}
	next := resource + "?max_results=500&cursor="
	for next != "" {
		target := base + "/prodapi/v1/" + next
		if minPosition != "" {
			target += "&min_position=" + url.QueryEscape(minPosition)
		}
		var page struct {
			Items []json.RawMessage `json:"_items"`
			Links struct {
				Next *struct{ Href string } `json:"next"`
			} `json:"_links"`
		}
		if err := getJSON(ctx, client, target, auth, &page); err != nil {
			return nil, fmt.Errorf("walking %s: %w", resource, err)
		}
		for _, doc := range page.Items {
			var d struct {
				ID string `json:"_id"`
			}
			if err := json.Unmarshal(doc, &d); err != nil {
				return nil, err
			}
			docs[d.ID] = doc
		}
		next = ""
		if page.Links.Next != nil {
			next = page.Links.Next.Href
		}
	}
	return docs, nil
}

func (c *convClient) getJSON(ctx context.Context, target string, v any) error {
	return getJSON(ctx, c.get, target, c.auth, v)
}

// getJSON reads target into v; an answer other than 200 is a
// *convStatus.
func getJSON(ctx context.Context, client *http.Client, target, auth string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", auth)
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK {
		return newConvStatus(res, body)
	}
	return json.Unmarshal(body, v)
}

// A convEntry is an entry of /changes with include=doc.
type convEntry struct {
	Resource string          `json:"resource"`
	ID       string          `json:"_id"`
	Op       string          `json:"op"`
	Doc      json.RawMessage `json:"doc"`
}

// stream is the README's step 3, pushed: the event stream of replica at
// from since (Last-Event-ID), each entry applied, the position moved
// past it once it is. It returns why it ended: a close event's status,
// errStreamEnded, or a failure.
func (c *convClient) stream(ctx context.Context, at int, since string) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	silent := errors.New("the stream was silent for too long")
	watchdog := time.AfterFunc(c.idle, func() { cancel(silent) })
	defer watchdog.Stop()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.bases[at]+"/prodapi/v1/changes?include=doc&max_results=500", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", c.auth)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", since)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(res.Body)
		return newConvStatus(res, body)
	}
	r := bufio.NewReader(res.Body)
	var id, event, data string
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			if cause := context.Cause(ctx); cause != nil && ctx.Err() != nil {
				return cause
			}
			if errors.Is(err, io.EOF) {
				return errStreamEnded
			}
			return err
		}
		watchdog.Reset(c.idle)
		line = strings.TrimSuffix(line, "\n")
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch {
		case line == "" && event == "close":
			var env struct {
				Error struct {
					Code int `json:"code"`
				} `json:"_error"`
			}
			json.Unmarshal([]byte(data), &env)
			return &convStatus{code: env.Error.Code, body: data}
		case line == "" && event == "change":
			var e convEntry
			if err := json.Unmarshal([]byte(data), &e); err != nil {
				return fmt.Errorf("an event that is not an entry: %w: %s", err, data)
			}
			if err := c.apply(ctx, at, e, id); err != nil {
				return err
			}
			id, event, data = "", "", ""
		case line == "":
			id, event, data = "", "", ""
		case field == "id":
			id = value
		case field == "event":
			event = value
		case field == "data":
			data += value
		}
	}
}

// apply applies one entry, read from replica at, and moves the position
// to pos, the entry's.
func (c *convClient) apply(ctx context.Context, at int, e convEntry, pos string) error {
	if e.Op == "flush" {
		if err := c.walk(ctx, c.bases[at], e.Resource); err != nil {
			return err
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	key := e.Resource + "/" + e.ID
	switch e.Op {
	case "flush":
		c.stats.flushes++
	case "delete":
		delete(c.copy[e.Resource], e.ID)
		c.deleted[key] = true
		c.stats.deletes++
	default:
		if len(e.Doc) == 0 {
			return fmt.Errorf("an entry %s %s without doc", e.Op, key)
		}
		if string(e.Doc) == "null" { // deleted since: its delete follows
			delete(c.copy[e.Resource], e.ID)
			c.stats.nulls++
			break
		}
		if c.copy[e.Resource] == nil {
			c.copy[e.Resource] = map[string]json.RawMessage{}
		}
		c.copy[e.Resource][e.ID] = e.Doc
		c.note(e.Resource, e.ID, e.Doc)
		c.stats.docs++
	}
	c.since = pos
	c.stats.entries++
	c.stats.byReplica[at]++
	c.stats.byDoc[key]++
	c.applied = append(c.applied, e.Resource+"/"+e.ID+" "+e.Op)
	c.recent = append(c.recent, fmt.Sprintf("%s %s (replica %d, edit %d)", e.Op, key, at, markerOf(e.Resource, e.Doc)))
	if len(c.recent) > 20 {
		c.recent = c.recent[1:]
	}
	return nil
}

// snapshot returns the copy, its position and the counts, as they are.
func (c *convClient) snapshot() (copied map[string]map[string]json.RawMessage, since string, stats convStats) {
	c.mu.Lock()
	defer c.mu.Unlock()
	copied = map[string]map[string]json.RawMessage{}
	for res, docs := range c.copy {
		copied[res] = maps.Clone(docs)
	}
	stats = c.stats
	stats.byReplica = maps.Clone(c.stats.byReplica)
	stats.byDoc = maps.Clone(c.stats.byDoc)
	return copied, c.since, stats
}

// unseen returns the edits the client has not seen: an insert or update
// whose number (or a later one) no document of the copy's history
// showed, unless the document was deleted since; a delete no entry or
// walk showed. A document inserted and deleted again before any replica
// read the directory never existed for the feed: its edits are seen
// once the client never saw it and its deletion is made.
func (c *convClient) unseen(edits []convEdit) []convEdit {
	gone := map[string]bool{} // deleted by one of edits
	for _, e := range edits {
		if e.op == "delete" {
			gone[e.resource+"/"+e.id] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []convEdit
	for _, e := range edits {
		key := e.resource + "/" + e.id
		_, known := c.marks[key]
		if c.deleted[key] || (e.op != "delete" && c.marks[key] >= e.n) || (gone[key] && !known) {
			continue
		}
		out = append(out, e)
	}
	return out
}

// waitSeen waits until the client has seen every edit, failing t after
// a generous deadline with what it lacks.
func (c *convClient) waitSeen(t *testing.T, edits []convEdit) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		missing := c.unseen(edits)
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.mu.Lock()
			defer c.mu.Unlock()
			var where []string
			for _, e := range missing[:min(10, len(missing))] {
				_, held := c.copy[e.resource][e.id]
				where = append(where, fmt.Sprintf("%s: in the copy %v, newest edit seen %d, entries %d", e, held, c.marks[e.resource+"/"+e.id], c.stats.byDoc[e.resource+"/"+e.id]))
			}
			t.Fatalf("the client has not seen %d of %d edits within 5 minutes:\n%s\nits counts: %v\nits last entries: %q",
				len(missing), len(edits), strings.Join(where, "\n"), c.stats, c.recent)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// appliedOrder returns every entry the client applied, in order.
func (c *convClient) appliedOrder() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.applied)
}

// following reports whether the client has synced and applied n
// entries.
func (c *convClient) following(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats.syncs > 0 && c.since != "" && c.stats.entries >= n
}

// streaming returns the replica the client reads, once it has applied
// an entry read from it (ok is false until then).
func (c *convClient) streaming() (at int, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.at, c.stats.byReplica[c.at] > 0
}
