package render

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/testkit"
)

// A walkReader walks n documents by cursor, max_results a page, and
// records every Find by where it starts. Finds past the first page wait
// while gate is set.
type walkReader struct {
	n    int
	mu   sync.Mutex
	from map[int]int // start → Finds
	gate chan struct{}
	fail bool // Finds past the first page fail
	busy int  // Finds waiting at the gate
	// early: Finds tell Cursor.Early the next position first (wrong:
	// a wrong one), then wait for the next page's Find to begin; late
	// counts those that waited in vain.
	early, wrong bool
	late         int
	sealed       atomic.Int64 // cursors sealed by queries of query
}

// query is walkQuery whose seals w counts.
func (w *walkReader) query(where, cursor string) *sources.Query {
	q := walkQuery(where, cursor)
	seal := q.Cursor.Seal
	q.Cursor.Seal = func(p sources.Position) (string, error) {
		w.sealed.Add(1)
		return seal(p)
	}
	return q
}

func (w *walkReader) Get(context.Context, *sources.Resource, string) (*sources.Doc, error) {
	return nil, sources.ErrNotFound
}

func (w *walkReader) Find(ctx context.Context, q *sources.Query) (*sources.Result, error) {
	start := 0
	if a := q.Cursor.After; a != nil {
		start = int(a.Values[0].(int64)) + 1
	}
	w.mu.Lock()
	w.from[start]++
	gate, fail := w.gate, w.fail
	if start > 0 && gate != nil {
		w.busy++
	}
	w.mu.Unlock()
	if start > 0 && gate != nil {
		<-gate
	}
	if start > 0 && fail {
		return nil, errors.New("walkReader: failing")
	}
	r := &sources.Result{Docs: []*sources.Doc{}, Total: w.n}
	for i := start; i < min(start+q.MaxResults, w.n); i++ {
		r.Docs = append(r.Docs, sources.D("_id", fmt.Sprintf("d%02d", i)))
	}
	if end := start + q.MaxResults; end < w.n {
		r.Next = &sources.Position{Values: []any{int64(end - 1)}}
		if w.early && q.Cursor.Early != nil {
			guess := *r.Next
			if w.wrong {
				guess.Values = []any{int64(end)}
			}
			q.Cursor.Early(guess)
			if !w.wrong {
				w.awaitFind(end)
			}
		}
	}
	return r, nil
}

// awaitFind waits for a Find from start to begin, 10 s at most.
func (w *walkReader) awaitFind(start int) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if w.finds(start) > 0 {
			return
		}
	}
	w.mu.Lock()
	w.late++
	w.mu.Unlock()
}

func (w *walkReader) finds(start int) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.from[start]
}

// walkQuery is the query of a walk's page as the request parser makes it
// from its link: cursor "" on the first page, else "P<last index>".
func walkQuery(where, cursor string) *sources.Query {
	seal := func(p sources.Position) (string, error) { return "P" + strconv.FormatInt(p.Values[0].(int64), 10), nil }
	c := &sources.Cursor{Seal: seal}
	if cursor != "" {
		i, _ := strconv.ParseInt(strings.TrimPrefix(cursor, "P"), 10, 64)
		c.After = &sources.Position{Values: []any{i}}
	}
	params := []sources.Param{{Name: "where", Value: where}, {Name: "cursor", Value: cursor}}
	return &sources.Query{Resource: res("desks"), Page: 1, MaxResults: 2, Params: params, Cursor: c}
}

// nextCursor is the cursor of a page's next link; "" on the last page.
func nextCursor(t *testing.T, body []byte) string {
	t.Helper()
	_, after, ok := strings.Cut(string(body), `"next":{"title":"next page","href":"desks?max_results=2&where=w&cursor=`)
	if !ok {
		return ""
	}
	return after[:strings.IndexByte(after, '"')]
}

// loadPage loads q, page n of the walk of "w" at cursor, from rd, and
// checks that its body is what plain, which reads nothing ahead, gives.
func loadPage(t *testing.T, rd, plain *Renderer, q *sources.Query, cursor string, n int) *sources.Representation {
	t.Helper()
	rep, err := rd.Load(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	want, err := plain.Load(context.Background(), walkQuery("w", cursor))
	if err != nil {
		t.Fatal(err)
	}
	if string(rep.Body) != string(want.Body) {
		t.Fatalf("page %d:\n got %s\nwant %s", n, rep.Body, want.Body)
	}
	return rep
}

// held says, once the page starting at start has been rendered ahead and
// its walk moved on, how many pages the renderer holds.
func held(t *testing.T, rd *Renderer, cursor string) int {
	t.Helper()
	key := pageKey(walkQuery("w", cursor))
	testkit.Eventually(t, "the page after "+cursor+" rendered ahead", func() bool {
		rd.ahead.mu.Lock()
		defer rd.ahead.mu.Unlock()
		p := rd.ahead.pages[key]
		return p != nil && closed(p.done)
	})
	rd.ahead.mu.Lock()
	defer rd.ahead.mu.Unlock()
	return len(rd.ahead.pages)
}

// A walk read two pages ahead: after each page, the two that follow are
// read before the client asks, never more, and each page is read once;
// the pages are those a renderer without read-ahead gives.
func TestReadAheadWalk(t *testing.T) {
	const n = 11 // six pages of two
	w := &walkReader{n: n, from: map[int]int{}}
	rd := NewWithOptions(w, noEnrich, Options{ReadAhead: 2})
	plain := New(&walkReader{n: n, from: map[int]int{}}, noEnrich)
	cursor, pages := "", 0
	for {
		rep := loadPage(t, rd, plain, walkQuery("w", cursor), cursor, pages+1)
		if rep.Early != (pages > 0) {
			t.Errorf("page %d: Early %v, want %v (read ahead past the first)", pages+1, rep.Early, pages > 0)
		}
		pages++
		next := nextCursor(t, rep.Body)
		if next == "" {
			break
		}
		// The page after next is read ahead too, unless the walk ends.
		if pages+2 <= 6 {
			ahead := "P" + strconv.Itoa(2*(pages+1)-1)
			if got := held(t, rd, ahead); got != 2 {
				t.Errorf("after page %d: %d pages held, want 2", pages, got)
			}
		}
		cursor = next
	}
	if pages != 6 {
		t.Errorf("%d pages, want 6", pages)
	}
	for start := 0; start < n; start += 2 {
		if got := w.finds(start); got != 1 {
			t.Errorf("the page from %d read %d times, want once", start, got)
		}
	}
	checkBytes(t, rd)
	rd.ahead.mu.Lock()
	defer rd.ahead.mu.Unlock()
	if len(rd.ahead.pages) != 0 {
		t.Errorf("%d pages held after the walk's end", len(rd.ahead.pages))
	}
}

// checkBytes checks the count of the bytes held: the bodies of the pages
// held rendered.
func checkBytes(t *testing.T, rd *Renderer) {
	t.Helper()
	rd.ahead.mu.Lock()
	defer rd.ahead.mu.Unlock()
	want := 0
	for _, p := range rd.ahead.pages {
		if closed(p.done) && p.err == nil {
			want += len(p.rep.Body)
		}
	}
	if rd.ahead.bytes != want {
		t.Errorf("%d bytes held, want %d", rd.ahead.bytes, want)
	}
}

// A store that tells the next position early has the next page begun
// before it returns this one, and the cursor of each next link is sealed
// once; a wrong guess costs a page read for nothing, never a wrong page.
func TestReadAheadBeginsEarly(t *testing.T) {
	for _, wrong := range []bool{false, true} {
		t.Run(fmt.Sprint("wrong=", wrong), func(t *testing.T) {
			const n = 11
			w := &walkReader{n: n, from: map[int]int{}, early: true, wrong: wrong}
			rd := NewWithOptions(w, noEnrich, Options{ReadAhead: 2})
			plain := New(&walkReader{n: n, from: map[int]int{}}, noEnrich)
			cursor, pages := "", 0
			for {
				rep := loadPage(t, rd, plain, w.query("w", cursor), cursor, pages+1)
				pages++
				if cursor = nextCursor(t, rep.Body); cursor == "" {
					break
				}
			}
			if pages != 6 {
				t.Errorf("%d pages, want 6", pages)
			}
			if wrong { // the first page's guess always has room
				testkit.Eventually(t, "the first page's wrong guess read", func() bool { return w.finds(3) > 0 })
			}
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.late != 0 {
				t.Errorf("%d pages returned before the next one began", w.late)
			}
			if got := w.sealed.Load(); !wrong && got != 5 {
				t.Errorf("%d cursors sealed, want 5: one a next link", got)
			}
			for start := 0; start < n; start += 2 {
				// Wrong guesses hold the walk's room ahead for pages
				// nobody asks for: a page may then be read twice.
				if got := w.from[start]; got != 1 && !wrong || got == 0 {
					t.Errorf("the page from %d read %d times, want once", start, got)
				}
			}
		})
	}
}

// A page read ahead is not served older than aheadMaxAge, nor to a
// request for a position of the change log, nor when its reading failed:
// the page is read again.
func TestReadAheadReadsAgain(t *testing.T) {
	var invalidations atomic.Uint64
	for _, tc := range []struct {
		name  string
		setup func(*testkit.Clock, *walkReader)
		q     func(*sources.Query)
	}{
		{"too old", func(c *testkit.Clock, _ *walkReader) { c.Advance(aheadMaxAge + time.Millisecond) }, nil},
		{"invalidated", func(*testkit.Clock, *walkReader) { invalidations.Add(1) }, nil},
		{"min_position", nil, func(q *sources.Query) { q.Fresh = &sources.Freshness{} }},
		{"failed", nil, nil},
		{"over the bytes' bound", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := testkit.NewClock(time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC))
			w := &walkReader{n: 11, from: map[int]int{}, fail: tc.name == "failed"}
			rd := NewWithOptions(w, noEnrich, Options{ReadAhead: 1, Now: clock.Now, Invalidations: invalidations.Load})
			if tc.name == "over the bytes' bound" {
				rd.ahead.maxBytes = 100 // a page is more
			}
			rep, err := rd.Load(context.Background(), walkQuery("w", ""))
			if err != nil {
				t.Fatal(err)
			}
			held(t, rd, "P1")
			if tc.setup != nil {
				tc.setup(clock, w)
			}
			w.mu.Lock()
			w.fail = false
			w.mu.Unlock()
			q := walkQuery("w", nextCursor(t, rep.Body))
			if tc.q != nil {
				tc.q(q)
			}
			if rep, err := rd.Load(context.Background(), q); err != nil || rep.Early {
				t.Fatalf("Load: early %v, %v; want read again", rep != nil && rep.Early, err)
			}
			if got := w.finds(2); got != 2 {
				t.Errorf("the second page read %d times, want twice", got)
			}
			checkBytes(t, rd)
		})
	}
}

// However many walks begin, at most ReadAhead×aheadPerWalk pages are
// read ahead at once.
func TestReadAheadBound(t *testing.T) {
	w := &walkReader{n: 11, from: map[int]int{}, gate: make(chan struct{})}
	rd := NewWithOptions(w, noEnrich, Options{ReadAhead: 1})
	for i := range 3 * aheadPerWalk {
		if _, err := rd.Load(context.Background(), walkQuery(fmt.Sprint(i), "")); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, "the pages read ahead waiting", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.busy == aheadPerWalk
	})
	rd.ahead.mu.Lock()
	if got := len(rd.ahead.pages); got != aheadPerWalk {
		t.Errorf("%d pages held, want %d", got, aheadPerWalk)
	}
	rd.ahead.mu.Unlock()
	close(w.gate)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.busy != aheadPerWalk {
		t.Errorf("%d reads ahead, want %d", w.busy, aheadPerWalk)
	}
}
