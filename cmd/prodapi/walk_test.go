package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// walkItems is the size of the newsroom TestCursorWalkUnderWrites walks,
// and a twenty-fifth of it is rewritten during the walk: 2500 and 100 in
// make test, PRODAPI_TEST_WALK_ITEMS=25000 for the full run (25000 items,
// 1000 rewritten; about a minute here).
func walkItems(t *testing.T) int {
	t.Helper()
	n := 2500
	if v := os.Getenv("PRODAPI_TEST_WALK_ITEMS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 100 {
			t.Fatalf("PRODAPI_TEST_WALK_ITEMS=%q: want a number of items, at least 100", v)
		}
	}
	return n
}

// A cursor walk of a sandbox newsroom returns every item that did not
// change during it exactly once, while items are rewritten between its
// pages (their _updated bumped past every other, their headline changed),
// those already walked and those still ahead alike: one walk by the
// default sort (_updated descending: a rewritten item jumps behind the
// walk, so it comes at most once), one ascending (it jumps ahead, so it
// may come again, at most twice). _updated has ties, ten items a second,
// which the guid breaks.
func TestCursorWalkUnderWrites(t *testing.T) {
	n := walkItems(t)
	dir := t.TempDir()
	if err := os.CopyFS(dir, sandbox.SampleFS()); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	items := make([]*sources.Doc, n)
	for i := range items {
		id := fmt.Sprintf("urn:walk:%06d", i)
		items[i] = sources.D("_id", id, "guid", id, "type", "text", "state", "published", "headline", "item "+strconv.Itoa(i),
			"_updated", base.Add(time.Duration(i/10)*time.Second))
	}
	writeArchive := func() {
		t.Helper()
		path := filepath.Join(dir, "archive.json")
		if err := os.WriteFile(path+".tmp", codec.AppendJSON(nil, extendedJSON(items)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	writeArchive()
	in := start(t, "PRODAPI_SANDBOX", dir, "PRODAPI_AUTH_ENABLED", "false")

	size := min(500, n/40)
	walkers := []*walker{
		{name: "by default", next: fmt.Sprintf("/prodapi/v1/items?max_results=%d&cursor=", size), seen: map[string]int{}},
		{name: "by _updated ascending", next: fmt.Sprintf("/prodapi/v1/items?max_results=%d&sort=_updated&cursor=", size), seen: map[string]int{}},
	}
	rewritten := map[string]bool{}
	// Batches of rewrites spread over the walk, the last well before its end.
	const batches = 10
	stride := max(1, n/size/(batches+2))
	rng := rand.New(rand.NewPCG(1, 2))
	bumped := base.Add(time.Duration(n) * time.Second)
	started := time.Now()
	served := 0
	for step := 0; ; step++ {
		done := true
		for _, w := range walkers {
			if w.next != "" {
				served += w.step(t, in)
				done = false
			}
		}
		if done {
			break
		}
		if step%stride == stride-1 && step/stride < batches {
			// A batch of rewrites, then wait until the service shows one.
			var last string
			for range n / 25 / batches {
				i := rng.IntN(n)
				for rewritten[idOf(items[i])] {
					i = rng.IntN(n)
				}
				bumped = bumped.Add(time.Second)
				last = idOf(items[i])
				rewritten[last] = true
				items[i].Set("_updated", bumped)
				items[i].Set("headline", "rewritten "+last)
			}
			writeArchive()
			waitFor(t, in, "/prodapi/v1/items/"+url.PathEscape(last), "rewritten "+last)
		}
	}
	elapsed := time.Since(started)
	if len(rewritten) != n/25/batches*batches {
		t.Fatalf("%d items rewritten, want %d: the walk ended before the rewrites did", len(rewritten), n/25/batches*batches)
	}
	for _, w := range walkers {
		limit := 1
		if strings.Contains(w.name, "ascending") {
			limit = 2
		}
		missing, twice := 0, 0
		for _, d := range items {
			id := idOf(d)
			switch c := w.seen[id]; {
			case rewritten[id] && c > limit:
				t.Errorf("%s: rewritten %s came %d times", w.name, id, c)
			case !rewritten[id] && c == 0:
				missing++
			case !rewritten[id] && c > 1:
				twice++
			}
		}
		if missing > 0 || twice > 0 {
			t.Errorf("%s: of %d items left alone, %d were skipped and %d came more than once", w.name, n-len(rewritten), missing, twice)
		}
		t.Logf("%s: %d pages", w.name, w.pages)
	}
	t.Logf("%d items, %d rewritten in %d batches, two walks: %d documents served in %v (%.0f/s, reloads included)",
		n, len(rewritten), batches, served, elapsed.Round(time.Millisecond), float64(served)/elapsed.Seconds())
}

// A walker follows one walk's next links.
type walker struct {
	name  string
	next  string // the next page's target; "" when the walk is over
	auth  string // the Authorization header, if any
	seen  map[string]int
	pages int
}

// step reads one page and returns the number of items it held.
func (w *walker) step(t *testing.T, in *instance) int {
	t.Helper()
	status, _, body := in.get(t, w.next, w.auth)
	if status != 200 {
		t.Fatalf("%s: %s: %d %.300s", w.name, w.next, status, body)
	}
	ids, next, err := walkPage(body)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		w.seen[id]++
	}
	w.pages++
	w.next = next
	return len(ids)
}

// walkPage reads a cursor page: the ids of its items, and the target of
// its next link ("" on the last page).
func walkPage(body []byte) (ids []string, next string, err error) {
	var page struct {
		Items []struct {
			ID string `json:"_id"`
		} `json:"_items"`
		Links struct {
			Next *struct{ Href string } `json:"next"`
		} `json:"_links"`
	}
	if err := json.Unmarshal(body, &page); err != nil {
		return nil, "", fmt.Errorf("a cursor page: %w: %.300s", err, body)
	}
	ids = make([]string, len(page.Items))
	for i, it := range page.Items {
		ids[i] = it.ID
	}
	if page.Links.Next != nil {
		next = "/prodapi/v1/" + page.Links.Next.Href
	}
	return ids, next, nil
}

// waitFor polls target until its body holds want.
func waitFor(t *testing.T, in *instance, target, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, _, body := in.get(t, target, "")
		if strings.Contains(string(body), want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed %q: %.300s", target, want, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// extendedJSON writes the dates of docs as MongoDB Extended JSON, as a
// sandbox's files hold them.
func extendedJSON(docs []*sources.Doc) []any {
	out := make([]any, len(docs))
	for i, d := range docs {
		c := d.Clone()
		for k, v := range d.All() {
			if ts, ok := v.(time.Time); ok {
				c.Set(k, sources.D("$date", ts.UTC().Format(time.RFC3339Nano)))
			}
		}
		out[i] = c
	}
	return out
}

func idOf(d *sources.Doc) string {
	id, _ := d.String("_id")
	return id
}

// Cursors work across replicas that share a secret: the token secret, or
// PRODAPI_CURSOR_SECRET where auth is off. Without either, each process
// seals with a key of its own and says so at start.
func TestCursorsAcrossReplicas(t *testing.T) {
	nextOf := func(in *instance, auth string) string {
		t.Helper()
		w := &walker{name: "first page", next: "/prodapi/v1/items?max_results=2&cursor=", auth: auth, seen: map[string]int{}}
		w.step(t, in)
		if w.next == "" {
			t.Fatal("the first page has no next link")
		}
		return w.next
	}
	auth := bearer(t, devSecret, "ARCHIVE_READ")
	a, b := start(t), start(t)
	if status, _, body := b.get(t, nextOf(a, auth), auth); status != 200 {
		t.Errorf("a replica with the same token secret: %d %.300s", status, body)
	}
	own := strings.Repeat("cursor secret ", 3)
	c := start(t, "PRODAPI_AUTH_ENABLED", "false", "AUTH_SERVER_SHARED_SECRET", "", "PRODAPI_CURSOR_SECRET", own)
	d := start(t, "PRODAPI_AUTH_ENABLED", "false", "AUTH_SERVER_SHARED_SECRET", "", "PRODAPI_CURSOR_SECRET", own)
	if status, _, body := d.get(t, nextOf(c, ""), ""); status != 200 {
		t.Errorf("a replica with the same PRODAPI_CURSOR_SECRET: %d %.300s", status, body)
	}
	const warning = "list cursors are sealed with a key of this process's own"
	e := start(t, "PRODAPI_AUTH_ENABLED", "false", "AUTH_SERVER_SHARED_SECRET", "")
	f := start(t, "PRODAPI_AUTH_ENABLED", "false", "AUTH_SERVER_SHARED_SECRET", "")
	if status, _, body := f.get(t, nextOf(e, ""), ""); status != 400 || !strings.Contains(string(body), `"cursor: `) {
		t.Errorf("a replica with no shared secret: %d %.300s, want a 400 naming cursor", status, body)
	}
	// Log lines reach stderr from a batching writer, a moment after they
	// are logged: wait for each process's "listening" line, logged after
	// the warning would be.
	for _, in := range []*instance{a, c, e} {
		waitUntil(t, "the listening line", func() bool { return strings.Contains(in.stderr.String(), `"msg":"listening"`) })
	}
	if !strings.Contains(e.stderr.String(), warning) {
		t.Errorf("a process with no shared secret does not warn of a key of its own: %q", e.stderr)
	}
	if strings.Contains(a.stderr.String(), warning) || strings.Contains(c.stderr.String(), warning) {
		t.Errorf("a process with a shared secret warns of a key of its own: %q %q", a.stderr, c.stderr)
	}
}
