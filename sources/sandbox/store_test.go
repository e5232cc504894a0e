package sandbox

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
)

var (
	itemsRes, _ = sources.ResourceByName("items")
	desksRes, _ = sources.ResourceByName("desks")
	usersRes, _ = sources.ResourceByName("users")
)

func testFS() fstest.MapFS {
	return fstest.MapFS{
		"desks.json": {Data: []byte(`[
			{"_id": {"$oid": "5d76113ab3af37dea3a2eb91"}, "name": "Arts", "n": 2, "_updated": {"$date": "2024-03-01T10:00:00Z"}},
			{"_id": "5d76113ab3af37dea3a2eb92", "name": "PROD", "n": 1},
			{"_id": "5d76113ab3af37dea3a2eb93", "name": "string twin"},
			{"_id": {"$oid": "5d76113ab3af37dea3a2eb93"}, "name": "ObjectID twin"},
			{"_id": "desk-sport", "name": "Sport", "n": 3}
		]`)},
		"archive.json": {Data: []byte(`[
			{"_id": "urn:newsml:localhost:5000:2019-08-14T15:02:48.032188:d1be79f4", "headline": "Bridge opens", "_updated": {"$date": "2024-01-02T00:00:00Z"}, "assignment_id": {"$oid": "5d76113ab3af37dea3a2eb99"}},
			{"_id": "tag:localhost:5000:2019:1dbebe89", "headline": "Mayor resigns", "_updated": {"$date": "2024-01-03T00:00:00Z"}, "assignment_id": "5d76113ab3af37dea3a2eb98"}
		]`)},
		"assignments.json": {Data: []byte(`[
			{"_id": {"$oid": "5d76113ab3af37dea3a2eb99"}, "planning_item": "urn:p1", "priority": 2},
			{"_id": {"$oid": "5d76113ab3af37dea3a2eb98"}, "planning_item": "urn:p1", "priority": 1},
			{"_id": {"$oid": "5d76113ab3af37dea3a2eb97"}, "planning_item": "urn:p2", "priority": 3}
		]`)},
		"notes.txt":                           {Data: []byte("ignored")},
		"assets/5d553c333031e2855a2e5662.jpg": {Data: []byte("jpeg bytes"), ModTime: time.Date(2023, 5, 6, 7, 8, 9, 500, time.UTC)},
		"assets/5d553c333031e2855a2e5662.png": {Data: []byte("png bytes")},
		"assets/doc.pdf":                      {Data: []byte("%PDF")},
		"assets/2024/photo.webp":              {Data: []byte("webp")},
		"assets/clip.unknownext":              {Data: []byte("x")},
	}
}

func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Load(testFS(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestGet(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	for _, tc := range []struct {
		name     string
		res      *sources.Resource
		id, want string // want: the name or headline
	}{
		{"ObjectID by hex", desksRes, "5d76113ab3af37dea3a2eb91", "Arts"},
		{"ObjectID by upper-case hex", desksRes, "5D76113AB3AF37DEA3A2EB91", "Arts"},
		{"string hex id", desksRes, "5d76113ab3af37dea3a2eb92", "PROD"},
		{"ObjectID before string", desksRes, "5d76113ab3af37dea3a2eb93", "ObjectID twin"},
		{"plain string id", desksRes, "desk-sport", "Sport"},
		{"URN", itemsRes, "urn:newsml:localhost:5000:2019-08-14T15:02:48.032188:d1be79f4", "Bridge opens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := s.Get(ctx, tc.res, tc.id)
			if err != nil {
				t.Fatal(err)
			}
			got, _ := d.String("name")
			if tc.res == itemsRes {
				got, _ = d.String("headline")
			}
			if got != tc.want {
				t.Errorf("Get(%s) = %q, want %q", tc.id, got, tc.want)
			}
		})
	}
	for _, id := range []string{"5d76113ab3af37dea3a2eb00", "nope", "", "desk-sport "} {
		if _, err := s.Get(ctx, desksRes, id); !errors.Is(err, sources.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound", id, err)
		}
	}
	if _, err := s.Get(ctx, usersRes, "5d76113ab3af37dea3a2eb91"); !errors.Is(err, sources.ErrNotFound) {
		t.Errorf("Get in an empty collection: %v, want ErrNotFound", err)
	}
	// Documents returned are copies.
	d, _ := s.Get(ctx, desksRes, "desk-sport")
	d.Set("name", "changed")
	d2, _ := s.Get(ctx, desksRes, "desk-sport")
	if name, _ := d2.String("name"); name != "Sport" {
		t.Errorf("stored document changed: name %q", name)
	}
}

func TestFind(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	for _, tc := range []struct {
		name  string
		q     sources.Query
		want  []string
		total int
	}{
		{"all by name", sources.Query{Resource: desksRes, Page: 1, MaxResults: 25, Sort: desksRes.DefaultSort},
			[]string{"5d76113ab3af37dea3a2eb91", "5d76113ab3af37dea3a2eb93", "5d76113ab3af37dea3a2eb92", "desk-sport", "5d76113ab3af37dea3a2eb93"}, 5},
		{"where", sources.Query{Resource: desksRes, Page: 1, MaxResults: 25, Where: sources.D("n", sources.D("$gte", int64(2)))},
			[]string{"desk-sport", "5d76113ab3af37dea3a2eb91"}, 2}, // by _id: strings before ObjectIDs
		{"sort desc, page 2", sources.Query{Resource: desksRes, Page: 2, MaxResults: 2, Sort: []sources.SortKey{{Field: "n", Desc: true}}},
			[]string{"5d76113ab3af37dea3a2eb92", "5d76113ab3af37dea3a2eb93"}, 5},
		{"page past the end", sources.Query{Resource: desksRes, Page: 9, MaxResults: 2}, []string{}, 5},
		{"hex where matches ObjectID and string", sources.Query{Resource: desksRes, Page: 1, MaxResults: 25,
			Where: sources.D("_id", "5d76113ab3af37dea3a2eb93"), Sort: []sources.SortKey{{Field: "name"}}},
			[]string{"5d76113ab3af37dea3a2eb93", "5d76113ab3af37dea3a2eb93"}, 2},
		{"search list", sources.Query{Resource: itemsRes, Page: 1, MaxResults: 25,
			Search: jdoc(t, `{"query": {"bool": {}}, "sort": [{"_updated": {"order": "desc"}}], "size": 25, "track_total_hits": 10000}`)},
			[]string{"tag:localhost:5000:2019:1dbebe89", "urn:newsml:localhost:5000:2019-08-14T15:02:48.032188:d1be79f4"}, 2},
		{"search _resource", sources.Query{Resource: itemsRes, Page: 1, MaxResults: 25,
			Search: jdoc(t, `{"query": {"bool": {"filter": [{"terms": {"_resource": ["archive"]}}]}}, "size": 1, "sort": [{"_updated": {"order": "asc"}}]}`)},
			[]string{"urn:newsml:localhost:5000:2019-08-14T15:02:48.032188:d1be79f4"}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.Find(ctx, &tc.q)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(hitIDs(res.Docs), tc.want); diff != "" {
				t.Errorf("ids (-got +want):\n%s", diff)
			}
			if res.Total != tc.total {
				t.Errorf("Total = %d, want %d", res.Total, tc.total)
			}
		})
	}
	if _, err := s.Find(ctx, &sources.Query{Resource: itemsRes, Page: 1, MaxResults: 25}); !errors.Is(err, sources.ErrInvalid) {
		t.Errorf("search list without a body: %v, want ErrInvalid", err)
	}
	if _, err := s.Find(ctx, &sources.Query{Resource: desksRes, Page: 1, MaxResults: 25, Where: sources.D("$where", "1")}); !errors.Is(err, sources.ErrInvalid) {
		t.Errorf("bad where: %v, want ErrInvalid", err)
	}
}

func TestLookup(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	oid99, _ := sources.ParseObjectID("5d76113ab3af37dea3a2eb99")
	for _, tc := range []struct {
		name string
		l    sources.Lookup
		want []string
	}{
		{"mongo ids, mixed values", sources.Lookup{Collection: "assignments", Field: "_id",
			Values: []any{oid99, "5d76113ab3af37dea3a2eb98", "nope"}, Sort: []sources.SortKey{{Field: "priority"}}},
			[]string{"5d76113ab3af37dea3a2eb98", "5d76113ab3af37dea3a2eb99"}},
		{"mongo field, limit", sources.Lookup{Collection: "assignments", Field: "planning_item",
			Values: []any{"urn:p1", "urn:p2"}, Sort: []sources.SortKey{{Field: "priority", Desc: true}}, Limit: 2},
			[]string{"5d76113ab3af37dea3a2eb97", "5d76113ab3af37dea3a2eb99"}},
		{"mongo hex matches ObjectID and string fields", sources.Lookup{Collection: "archive", Field: "assignment_id",
			Values: []any{"5d76113ab3af37dea3a2eb99", oidFromHex("5d76113ab3af37dea3a2eb98")}},
			[]string{"urn:newsml:localhost:5000:2019-08-14T15:02:48.032188:d1be79f4", "tag:localhost:5000:2019:1dbebe89"}},
		{"search", sources.Lookup{Collection: "assignments", Field: "planning_item", Search: true,
			Values: []any{"urn:p1"}, Sort: []sources.SortKey{{Field: "priority"}}},
			[]string{"5d76113ab3af37dea3a2eb98", "5d76113ab3af37dea3a2eb99"}},
		{"search exact, not tokens", sources.Lookup{Collection: "assignments", Field: "planning_item", Search: true,
			Values: []any{"p1"}}, []string{}},
		{"search mixed ids, limit", sources.Lookup{Collection: "assignments", Field: "_id", Search: true,
			Values: []any{oid99, "5d76113ab3af37dea3a2eb97"}, Sort: []sources.SortKey{{Field: "priority", Desc: true}}, Limit: 1},
			[]string{"5d76113ab3af37dea3a2eb97"}},
		{"empty collection", sources.Lookup{Collection: "content_types", Field: "_id", Values: []any{"x"}}, []string{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			docs, err := s.Lookup(ctx, tc.l)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(hitIDs(docs), tc.want); diff != "" {
				t.Errorf("ids (-got +want):\n%s", diff)
			}
		})
	}
}

func oidFromHex(s string) sources.ObjectID {
	id, _ := sources.ParseObjectID(s)
	return id
}

func TestQueriesCounted(t *testing.T) {
	ctx := context.Background()
	m := metrics.NewMetrics()
	q := m.SourceQueries()
	s := openTest(t, Options{Queries: q})
	s.Get(ctx, itemsRes, "x")
	s.Get(ctx, desksRes, "desk-sport")
	s.Find(ctx, &sources.Query{Resource: desksRes, Page: 1, MaxResults: 25})
	s.Find(ctx, &sources.Query{Resource: itemsRes, Page: 1, MaxResults: 25, Search: sources.D()})
	s.Lookup(ctx, sources.Lookup{Collection: "assignments", Field: "_id", Values: []any{"x"}})
	s.Lookup(ctx, sources.Lookup{Collection: "archive", Field: "_id", Values: []any{"x"}, Search: true})
	s.Lookup(ctx, sources.Lookup{Collection: "content_types", Field: "_id", Values: []any{"x"}})
	s.Asset(ctx, "nope")
	for _, tc := range []struct {
		labels []string
		want   uint64
	}{
		{[]string{"sandbox", "items", "get"}, 1},
		{[]string{"sandbox", "desks", "get"}, 1},
		{[]string{"sandbox", "desks", "find"}, 1},
		{[]string{"sandbox", "items", "search"}, 2},
		{[]string{"sandbox", "assignments", "lookup"}, 1},
		{[]string{"sandbox", "content_types", "lookup"}, 1},
		{[]string{"sandbox", "assets", "asset"}, 1},
		{[]string{"sandbox", "", ""}, 8},
	} {
		if got := q.Sum(tc.labels...); got != tc.want {
			t.Errorf("queries %v = %d, want %d", tc.labels, got, tc.want)
		}
	}
	// Not found is an answer: no query above failed.
	for _, kind := range metrics.ErrorKinds {
		if got := q.Errors("sandbox", "items", kind) + q.Errors("sandbox", "assets", kind); got != 0 {
			t.Errorf("%d %s errors counted, want none", got, kind)
		}
	}

	// A where the evaluator refuses is a failure of kind invalid, counted
	// on the series declared at 0 when the store opened.
	var b strings.Builder
	if err := m.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if want := `prodapi_source_errors_total{backend="sandbox",kind="invalid",resource="desks"} 0`; !strings.Contains(b.String(), want) {
		t.Errorf("exposition lacks %q", want)
	}
	_, err := s.Find(ctx, &sources.Query{Resource: desksRes, Page: 1, MaxResults: 25, Where: sources.D("name", sources.D("$nosuch", 1))})
	if !errors.Is(err, sources.ErrInvalid) {
		t.Fatalf("Find with an unknown operator: %v, want ErrInvalid", err)
	}
	if got := q.Errors("sandbox", "desks", metrics.KindInvalid); got != 1 {
		t.Errorf("invalid errors of desks = %d, want 1", got)
	}
}

// waitCtx tells the test when the store starts waiting on it.
type waitCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func (c *waitCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

func TestLatency(t *testing.T) {
	s := openTest(t, Options{Latency: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	wc := &waitCtx{Context: ctx, waiting: make(chan struct{})}
	errs := make(chan error, 1)
	go func() { // ends when the context is cancelled
		_, err := s.Get(wc, desksRes, "desk-sport")
		errs <- err
	}()
	<-wc.waiting
	cancel()
	if err := <-errs; !errors.Is(err, context.Canceled) {
		t.Errorf("Get with a cancelled wait: %v, want context.Canceled", err)
	}

	done, stop := context.WithCancel(context.Background())
	stop()
	for name, f := range map[string]func() error{
		"get":    func() error { _, err := s.Get(done, desksRes, "desk-sport"); return err },
		"find":   func() error { _, err := s.Find(done, &sources.Query{Resource: desksRes}); return err },
		"lookup": func() error { _, err := s.Lookup(done, sources.Lookup{Collection: "desks", Field: "_id"}); return err },
		"asset":  func() error { _, err := s.Asset(done, "doc.pdf"); return err },
	} {
		if err := f(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a done context: %v, want context.Canceled", name, err)
		}
	}

	quick := openTest(t, Options{Latency: time.Nanosecond})
	if _, err := quick.Get(context.Background(), desksRes, "desk-sport"); err != nil {
		t.Errorf("Get with latency: %v", err)
	}
}

func TestAsset(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	sum := func(s string) string { h := md5.Sum([]byte(s)); return hex.EncodeToString(h[:]) }
	newest := time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC) // the newest _updated
	for _, tc := range []struct {
		id, body, ctype, filename string
		modified                  time.Time
	}{
		{"5d553c333031e2855a2e5662.jpg", "jpeg bytes", "image/jpeg", "5d553c333031e2855a2e5662.jpg", time.Date(2023, 5, 6, 7, 8, 9, 0, time.UTC)},
		{"5d553c333031e2855a2e5662.png", "png bytes", "image/png", "5d553c333031e2855a2e5662.png", newest},
		{"5d553c333031e2855a2e5662.gif", "jpeg bytes", "image/jpeg", "5d553c333031e2855a2e5662.jpg", time.Date(2023, 5, 6, 7, 8, 9, 0, time.UTC)},
		{"5d553c333031e2855a2e5662", "jpeg bytes", "image/jpeg", "5d553c333031e2855a2e5662.jpg", time.Date(2023, 5, 6, 7, 8, 9, 0, time.UTC)},
		{"doc.pdf", "%PDF", "application/pdf", "doc.pdf", newest},
		{"2024/photo.jpg", "webp", "image/webp", "photo.webp", newest},
		{"clip.unknownext", "x", "application/octet-stream", "clip.unknownext", newest},
	} {
		t.Run(tc.id, func(t *testing.T) {
			a, err := s.Asset(ctx, tc.id)
			if err != nil {
				t.Fatal(err)
			}
			defer a.Content.Close()
			body, err := io.ReadAll(a.Content)
			if err != nil {
				t.Fatal(err)
			}
			got := struct {
				Body, Type, MD5, Filename string
				Size                      int64
				Modified                  time.Time
			}{string(body), a.ContentType, a.MD5, a.Filename, a.Size, a.Modified}
			want := struct {
				Body, Type, MD5, Filename string
				Size                      int64
				Modified                  time.Time
			}{tc.body, tc.ctype, sum(tc.body), tc.filename, int64(len(tc.body)), tc.modified}
			if diff := cmp.Diff(got, want); diff != "" {
				t.Errorf("Asset(%q) (-got +want):\n%s", tc.id, diff)
			}
			if _, err := a.Content.Seek(1, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			rest, _ := io.ReadAll(a.Content)
			if string(rest) != tc.body[1:] {
				t.Errorf("after Seek(1): %q, want %q", rest, tc.body[1:])
			}
		})
	}
	for _, id := range []string{"nope.jpg", "", "/doc.pdf", "../doc.pdf", "2024/../doc.pdf", `2024\photo.webp`, "./doc.pdf", "2024//photo.webp", "doc.pdf\x00"} {
		if _, err := s.Asset(ctx, id); !errors.Is(err, sources.ErrNotFound) {
			t.Errorf("Asset(%q) error = %v, want ErrNotFound", id, err)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data, want string
	}{
		{"malformed", `[{"_id": "a"}, {"_id": }]`, "desks.json"},
		{"not an array", `{"_id": "a"}`, "want a JSON array"},
		{"not a document", `[{"_id": "a"}, 5]`, "element 1"},
		{"no _id", `[{"_id": "a"}, {"name": "x"}]`, "document 1 has no _id"},
		{"bad _id type", `[{"_id": 5}]`, "_id must be a string or an ObjectID"},
		{"duplicate", `[{"_id": {"$oid": "5d76113ab3af37dea3a2eb91"}}, {"_id": {"$oid": "5d76113ab3af37dea3a2eb91"}}]`, "duplicate _id"},
		{"bad $oid", `[{"_id": {"$oid": "xyz"}}]`, "desks.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(fstest.MapFS{"desks.json": {Data: []byte(tc.data)}}, Options{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load error = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
	_, err := Load(fstest.MapFS{"desks.json": {Data: []byte(`[{"_id": "a"}, {"_id": }]`)}}, Options{})
	var se *codec.SyntaxError
	if !errors.As(err, &se) || se.Offset != 23 {
		t.Errorf("Load error = %v, want a SyntaxError at offset 23", err)
	}
}

func TestLoadCounts(t *testing.T) {
	s := openTest(t, Options{})
	want := map[string]int{"archive": 2, "desks": 5, "assignments": 3, "users": 0, "contacts": 0, "planning": 0,
		"events": 0, "events_files": 0, "events_history": 0, "content_types": 0}
	if diff := cmp.Diff(s.Counts(), want); diff != "" {
		t.Errorf("Counts (-got +want):\n%s", diff)
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "users.json"), []byte(`[{"_id": "u1", "username": "admin"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "assets"), 0o755); err != nil {
		t.Fatal(err)
	}
	mod := time.Date(2022, 2, 2, 2, 2, 2, 0, time.UTC)
	file := filepath.Join(dir, "assets", "a.png")
	if err := os.WriteFile(file, []byte("png"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(file, mod, mod); err != nil {
		t.Fatal(err)
	}
	s, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Counts()["users"]; got != 1 {
		t.Errorf("users = %d, want 1", got)
	}
	a, err := s.Asset(context.Background(), "a.jpg")
	if err != nil {
		t.Fatal(err)
	}
	if !a.Modified.Equal(mod) {
		t.Errorf("Modified = %v, want the file's %v", a.Modified, mod)
	}
	if _, err := Open(filepath.Join(dir, "missing"), Options{}); err == nil {
		t.Error("Open of a missing directory: no error")
	}
	if _, err := Open(filepath.Join(dir, "users.json"), Options{}); err == nil {
		t.Error("Open of a file: no error")
	}
	if _, err := Open("sample", Options{}); err != nil {
		t.Errorf(`Open("sample"): %v`, err)
	}
}

func TestNowOption(t *testing.T) {
	now := time.Date(2024, 1, 2, 12, 0, 0, 0, time.UTC)
	s := openTest(t, Options{Now: func() time.Time { return now }})
	res, err := s.Find(context.Background(), &sources.Query{Resource: itemsRes, Page: 1, MaxResults: 25,
		Search: jdoc(t, `{"query": {"range": {"_updated": {"gte": "now-1d/d"}}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(hitIDs(res.Docs), []string{"tag:localhost:5000:2019:1dbebe89", "urn:newsml:localhost:5000:2019-08-14T15:02:48.032188:d1be79f4"}); diff != "" {
		t.Errorf("(-got +want):\n%s", diff)
	}
	now = now.Add(48 * time.Hour)
	res, err = s.Find(context.Background(), &sources.Query{Resource: itemsRes, Page: 1, MaxResults: 25,
		Search: jdoc(t, `{"query": {"range": {"_updated": {"gte": "now-1d/d"}}}}`)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(hitIDs(res.Docs), []string{"tag:localhost:5000:2019:1dbebe89"}); diff != "" {
		t.Errorf("two days later (-got +want):\n%s", diff)
	}
}

// The Store's analysis cache is shared by concurrent searches.
func TestConcurrentSearch(t *testing.T) {
	s, err := Sample(Options{})
	if err != nil {
		t.Fatal(err)
	}
	body := jdoc(t, `{"query": {"query_string": {"query": "river OR bridge OR marathon"}}, "sort": [{"_updated": {"order": "desc"}}], "size": 5}`)
	want, err := s.Find(context.Background(), &sources.Query{Resource: itemsRes, Page: 1, MaxResults: 5, Search: body})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 4 {
		wg.Add(1)
		go func() { // ends after its searches
			defer wg.Done()
			for range 5 {
				got, err := s.Find(context.Background(), &sources.Query{Resource: itemsRes, Page: 1, MaxResults: 5, Search: body})
				if err == nil && !cmp.Equal(hitIDs(got.Docs), hitIDs(want.Docs)) {
					err = errors.New("results differ")
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
