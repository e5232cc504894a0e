package sandbox

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
)

// editedNewsroom is the archive and users of round r of
// TestListsFollowEdits, as the JSON texts of their documents: each round
// rewrites some items' sort fields, deletes some, adds others, moves the
// file's order around and rewrites some users.
func editedNewsroom(r int) (items, users []string) {
	const n = 240
	states := []string{"published", "corrected", "spiked"}
	for i := range n {
		if r > 0 && i%13 == r {
			continue // deleted in this round
		}
		day, head := 1+i%9, fmt.Sprintf("story %d", i%31)
		if i%5 == r%5 {
			day, head = 1+(i+r)%9, fmt.Sprintf("story %d, edited in round %d", i%31, r)
		}
		urgency := ""
		if (i+r)%4 != 0 {
			urgency = fmt.Sprintf(`, "urgency": %d`, (i+r)%6)
		}
		items = append(items, fmt.Sprintf(`{"_id": "item-%03d", "guid": "g-%03d", "_updated": {"$date": "2026-02-%02dT10:00:00Z"}, "state": %q, "headline": %q, "type": "text"%s}`,
			i, (i*37)%n, day, states[(i+r)%3], head, urgency))
	}
	for i := range 10 * r {
		items = append(items, fmt.Sprintf(`{"_id": "new-%d-%02d", "guid": "n-%d-%02d", "_updated": {"$date": "2026-02-0%dT10:00:00Z"}, "state": "published", "headline": "story %d"}`,
			r, i, r, i, 1+i%9, i))
	}
	if r%2 == 1 { // the file's order reversed
		for i, j := 0, len(items)-1; i < j; i, j = i+1, j-1 {
			items[i], items[j] = items[j], items[i]
		}
	}
	for i := range 60 {
		users = append(users, fmt.Sprintf(`{"_id": "u-%02d", "username": "user%02d", "n": %d}`, i, (i*7+r)%60, (i+r)%5))
	}
	return items, users
}

// Lists, searches and walks of a watched directory answer, after each
// reload, as a sort of every document of the files as they are now:
// orders kept for the collection before an edit are not used after it,
// and a walk's position taken before an edit goes on after it from the
// same place in the new order.
func TestListsFollowEdits(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, docs []string) []*sources.Doc {
		t.Helper()
		text := "[" + strings.Join(docs, ",\n") + "]"
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		out := make([]*sources.Doc, len(docs))
		for i, d := range docs {
			out[i] = jdoc(t, d)
		}
		return out
	}
	items, users := editedNewsroom(0)
	itemDocs, userDocs := write("archive.json", items), write("users.json", users)
	l, err := OpenLive(dir, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })

	searches := []string{
		`{"query": {"bool": {}}, "sort": [{"_updated": {"order": "desc"}}], "size": 9, "track_total_hits": 10000}`,
		`{"query": {"term": {"state": "published"}}, "sort": [{"headline.keyword": "asc"}], "size": 8, "track_total_hits": true}`,
		`{"query": {"query_string": {"query": "edited"}}, "sort": [{"urgency": {"order": "desc", "missing": "_first"}}, {"_updated": "asc"}], "size": 5}`,
		`{"query": {"range": {"urgency": {"gte": 2}}}, "sort": [{"_updated": "asc"}], "size": 11, "from": 3, "track_total_hits": 50}`,
	}
	wheres := []string{`{}`, `{"n": {"$in": [1, 3]}}`}
	userSorts := [][]sources.SortKey{{{Field: "username", Desc: true}}, {{Field: "n"}, {Field: "_id", Desc: true}}}
	// Where each walk was after its third page, in the previous round.
	positions := map[string]*sources.Position{}
	for r := range 4 {
		if r > 0 {
			items, users = editedNewsroom(r)
			itemDocs, userDocs = write("archive.json", items), write("users.json", users)
			if _, err := l.Reload(); err != nil {
				t.Fatal(err)
			}
		}
		for _, body := range searches {
			what := fmt.Sprintf("round %d: %s", r, body)
			q := &sources.Query{Resource: itemsRes, Search: jdoc(t, body)}
			compareResults(t, l, q, referenceSearch(t, itemDocs, q), what)
			q.Cursor = &sources.Cursor{After: positions[body]}
			if q.Cursor.After != nil { // on from before the edit
				compareResults(t, l, q, referenceSearch(t, itemDocs, q), what+" after "+fmt.Sprint(q.Cursor.After.Values))
			}
			q.Cursor = &sources.Cursor{}
			for page := 1; ; page++ {
				want := compareResults(t, l, q, referenceSearch(t, itemDocs, q), fmt.Sprintf("%s walk page %d", what, page))
				if page == 3 {
					positions[body] = want.Next
				}
				if want.Next == nil {
					break
				}
				q.Cursor = &sources.Cursor{After: want.Next}
			}
		}
		for _, where := range wheres {
			for _, srt := range userSorts {
				key := fmt.Sprintf("users where %s sort %v", where, srt)
				what := fmt.Sprintf("round %d: %s", r, key)
				q := &sources.Query{Resource: usersRes, Where: jdoc(t, where), Sort: srt, Page: 2, MaxResults: 7}
				want, err := referenceFind(userDocs, q)
				if err != nil {
					t.Fatal(err)
				}
				compareResults(t, l, q, want, what)
				q.Page, q.Cursor = 1, &sources.Cursor{After: positions[key]}
				for page := 1; ; page++ {
					want, err := referenceFind(userDocs, q)
					if err != nil {
						t.Fatal(err)
					}
					compareResults(t, l, q, want, fmt.Sprintf("%s walk page %d after %v", what, page, q.Cursor.After))
					if page == 3 {
						positions[key] = want.Next
					}
					if want.Next == nil {
						break
					}
					q.Cursor = &sources.Cursor{After: want.Next}
				}
			}
		}
	}
}

// referenceSearch answers a search list or a walk's page as a sort of
// every document: scan, on decoded documents, of the body (for a walk,
// of the body with the tiebreaker and the position added, as walk sends
// it).
func referenceSearch(t *testing.T, docs []*sources.Doc, q *sources.Query) *sources.Result {
	t.Helper()
	env := &searchEnv{now: time.Now(), an: newAnalyzer(), resource: q.Resource.Collection}
	body := q.Search
	if q.Cursor != nil {
		var after []any
		if q.Cursor.After != nil {
			after = q.Cursor.After.Values
		}
		body = sources.WalkBody(body, cmp.Or(q.Resource.Tiebreaker, "_id"), after)
	}
	req, err := env.compileBody(body)
	if err != nil {
		t.Fatal(err)
	}
	res, values, err := env.scan(docSlice(docs), req)
	if err != nil {
		t.Fatal(err)
	}
	if size := sources.WalkSize(q.Search); q.Cursor != nil && len(res.Docs) > size {
		res.Docs = res.Docs[:size]
		res.Next = &sources.Position{Values: values[size-1]}
	}
	return res
}

// compareResults compares l's answer to q with want, and returns want.
func compareResults(t *testing.T, l *Live, q *sources.Query, want *sources.Result, what string) *sources.Result {
	t.Helper()
	got, err := l.Find(t.Context(), q)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if diff := gocmp.Diff(resultOf(got), resultOf(want)); diff != "" {
		t.Fatalf("%s (-got +want):\n%s", what, diff)
	}
	return want
}
