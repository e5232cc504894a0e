package sandbox_test

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/codec"
	"github.com/prodapi/prodapi/sources/sandbox"
	"github.com/prodapi/prodapi/sources/sourcestest"
)

func TestContract(t *testing.T) {
	sourcestest.Run(t, sourcestest.Dir(), func(t *testing.T, dir string) sources.Store {
		s, err := sandbox.Open(dir, sandbox.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// The fixtures the fakes are seeded with are the documents the sandbox
// serves.
func TestFixturesMatchSandbox(t *testing.T) {
	fx, err := sourcestest.Fixtures(sourcestest.Dir())
	if err != nil {
		t.Fatal(err)
	}
	s, err := sandbox.Open(sourcestest.Dir(), sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for c, docs := range fx {
		got[c] = len(docs)
	}
	want := s.Counts()
	for c, n := range want {
		if n == 0 {
			delete(want, c)
		}
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("Fixtures counts (-got +want):\n%s", diff)
	}
}

func TestSample(t *testing.T) {
	s, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	counts := s.Counts()
	for _, tc := range []struct {
		collection string
		min, max   int
	}{
		{"archive", 40, 1 << 30},
		{"desks", 3, 3},
		{"users", 5, 5},
		{"contacts", 10, 10},
		{"events", 8, 8},
		{"planning", 10, 10},
		{"assignments", 12, 1 << 30},
	} {
		if n := counts[tc.collection]; n < tc.min || n > tc.max {
			t.Errorf("sample %s: %d documents, want %d to %d", tc.collection, n, tc.min, tc.max)
		}
	}
	// Every resource answers its default list.
	ctx := context.Background()
	for _, res := range sources.Resources() {
		q := &sources.Query{Resource: res, Page: 1, MaxResults: 25, Sort: res.DefaultSort}
		if res.Search {
			sort := make([]any, 0, len(res.DefaultSort))
			for _, k := range res.DefaultSort {
				order := "asc"
				if k.Desc {
					order = "desc"
				}
				sort = append(sort, sources.D(k.Field, sources.D("order", order)))
			}
			q.Search = sources.D("query", sources.D("bool", sources.D()), "sort", sort, "size", int64(25), "track_total_hits", int64(10000))
		}
		r, err := s.Find(ctx, q)
		if err != nil {
			t.Errorf("%s: %v", res.Name, err)
			continue
		}
		if want := min(counts[res.Collection], 25); len(r.Docs) != want || r.Total != counts[res.Collection] {
			t.Errorf("%s: %d documents of %d, want %d of %d", res.Name, len(r.Docs), r.Total, want, counts[res.Collection])
		}
		for _, d := range r.Docs {
			id, _ := d.Get("_id")
			sid, _ := sources.IDString(id)
			if _, err := s.Get(ctx, res, sid); err != nil {
				t.Errorf("%s: Get(%s): %v", res.Name, sid, err)
			}
		}
	}
}

// Every rendition and event file of the sample is an asset.
func TestSampleAssets(t *testing.T) {
	s, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	items, _ := sources.ResourceByName("items")
	res, err := s.Find(ctx, &sources.Query{Resource: items, Page: 1, MaxResults: 500,
		Search: sources.D("query", sources.D("term", sources.D("type", sources.D("value", "picture"))), "size", int64(500))})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Docs) == 0 {
		t.Fatal("the sample has no pictures")
	}
	for _, d := range res.Docs {
		r, _ := d.Doc("renditions")
		for name, v := range r.All() {
			rend, _ := v.(*sources.Doc)
			media, ok := rend.String("media")
			if !ok {
				t.Errorf("%v rendition %s has no media", d, name)
				continue
			}
			a, err := s.Asset(ctx, media+".jpg")
			if err != nil {
				t.Errorf("rendition %s: Asset(%s): %v", name, media, err)
				continue
			}
			n, _ := io.Copy(io.Discard, a.Content)
			a.Content.Close()
			if n == 0 || n != a.Size || a.MD5 == "" || a.ContentType == "" || a.Modified.IsZero() {
				t.Errorf("Asset(%s) = %d bytes of %d, md5 %q, type %q, modified %v", media, n, a.Size, a.MD5, a.ContentType, a.Modified)
			}
		}
	}
}

// The upstream-shaped Superdesk dump loads, and answers what the upstream
// test suites assert (its README lists what each depends on).
func TestSuperdeskDump(t *testing.T) {
	dir := filepath.Join("..", "sourcestest", "testdata", "superdesk")
	s, err := sandbox.Open(dir, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"archive": 7, "desks": 2, "users": 2, "contacts": 3, "assignments": 4,
		"planning": 3, "events": 7, "events_history": 2, "events_files": 2, "content_types": 0}
	if diff := cmp.Diff(s.Counts(), want); diff != "" {
		t.Errorf("counts (-got +want):\n%s", diff)
	}
	ctx := context.Background()
	res := func(name string) *sources.Resource { r, _ := sources.ResourceByName(name); return r }
	parse := func(s string) *sources.Doc {
		v, err := codec.DecodeJSON([]byte(s), codec.DecodeOptions{Strict: true})
		if err != nil {
			t.Fatal(err)
		}
		return v.(*sources.Doc)
	}
	for _, tc := range []struct {
		name, resource, where, search string
		want                          []string
	}{
		{"test_filters", "items", "", `{"query": {"bool": {"must": [{"bool": {"filter": [{"terms": {"task.desk": ["7777777775ec40943b60e"]}}]}}]}}, "size": 25}`,
			[]string{"tag:localhost:5000:2019:1dbebe89-e808-43f5-a27c-91545dac896f"}},
		{"test_desks where", "desks", `{"name": "PROD"}`, "", []string{"5d76113ab3af37dea3a2eb9e"}},
		{"test_contacts terms", "contacts", "", `{"query": {"bool": {"must": [{"bool": {"filter": [{"terms": {"first_name": ["brett"]}}]}}]}}, "size": 25}`,
			[]string{"5d5e9d8c38d37783d9431800"}},
		{"test_contacts is_active", "contacts", "", `{"query": {"bool": {"must": [{"bool": {"filter": [{"bool": {"must": [{"term": {"is_active": {"value": false}}}]}}]}}]}}, "size": 25}`,
			[]string{"5d5e9d8c38d37783d94317ff"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &sources.Query{Resource: res(tc.resource), Page: 1, MaxResults: 25, Sort: res(tc.resource).DefaultSort}
			if tc.where != "" {
				q.Where = parse(tc.where)
			}
			if tc.search != "" {
				q.Search = parse(tc.search)
			}
			r, err := s.Find(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range r.Docs {
				id, _ := d.Get("_id")
				sid, _ := sources.IDString(id)
				got = append(got, sid)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("(-got +want):\n%s", diff)
			}
		})
	}
	// Upstream stored 24-hex ids as strings: the string fallback finds them.
	if _, err := s.Get(ctx, res("desks"), "5d76113ab3af37dea3a2eb9e"); err != nil {
		t.Errorf("Get desk by its 24-hex string id: %v", err)
	}
}
