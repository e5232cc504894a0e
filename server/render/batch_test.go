package render_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/enrich"
	"github.com/prodapi/prodapi/server/query"
	"github.com/prodapi/prodapi/server/render"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// countingStore counts the reads of a store.
type countingStore struct {
	sources.Store
	gets    atomic.Int64
	batches atomic.Int64 // lookups by _id naming a "no-such-" id: the batches of a test's details
}

func (s *countingStore) Get(ctx context.Context, res *sources.Resource, id string) (*sources.Doc, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, res, id)
}

func (s *countingStore) Lookup(ctx context.Context, l sources.Lookup) ([]*sources.Doc, error) {
	if l.Field == "_id" && slices.ContainsFunc(l.Values, func(v any) bool { s, _ := v.(string); return strings.HasPrefix(s, "no-such-") }) {
		s.batches.Add(1)
	}
	return s.Store.Lookup(ctx, l)
}

// getterOnly hides a store's lookups: the renderer reads one document at
// a time.
type getterOnly struct {
	sources.Getter
	sources.Finder
}

// What LoadMany renders is, byte for byte, what Load renders for each
// detail: every resource of the sample newsroom, documents named twice,
// and documents that do not exist (404) among them; with one lookup by
// ids per resource when the store has lookups, and a Get each when not.
func TestLoadManyIsLoad(t *testing.T) {
	sample, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	store := &countingStore{Store: sample}
	rd := render.New(store, enrich.New(store, enrich.Options{MediaPrefix: "http://localhost:5500/prodapi/v1/assets"}).Enrich)
	ctx := context.Background()
	var qs []*sources.Query
	for _, res := range sources.Resources() {
		list, err := query.Parse(res, "", "max_results=4")
		if err != nil {
			t.Fatal(err)
		}
		page, err := sample.Find(ctx, list)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, d := range page.Docs {
			id, _ := d.Get("_id")
			s, _ := sources.IDString(id)
			ids = append(ids, s)
		}
		ids = append(ids, ids[0], "no-such-"+res.Name, "0123456789abcdef01234567")
		for _, id := range ids {
			q, err := query.Parse(res, id, "")
			if err != nil {
				t.Fatal(err)
			}
			qs = append(qs, q)
		}
	}
	store.gets.Store(0)
	reps, err := rd.LoadMany(ctx, qs)
	if err != nil {
		t.Fatal(err)
	}
	if got := store.batches.Load(); got != int64(len(sources.Resources())) {
		t.Errorf("%d lookups of the details' ids, want one per resource (%d)", got, len(sources.Resources()))
	}
	if got := store.gets.Load(); got != 0 {
		t.Errorf("%d gets beside the lookups", got)
	}
	single := render.New(getterOnly{store, store}, enrich.New(store, enrich.Options{MediaPrefix: "http://localhost:5500/prodapi/v1/assets"}).Enrich)
	store.gets.Store(0)
	oneByOne, err := single.LoadMany(ctx, qs)
	if err != nil {
		t.Fatal(err)
	}
	if got := store.gets.Load(); got != int64(len(qs)) {
		t.Errorf("without lookups: %d gets for %d details", got, len(qs))
	}
	found := 0
	for i, q := range qs {
		want, err := rd.Load(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for name, got := range map[string]*sources.Representation{"lookup": reps[i], "get": oneByOne[i]} {
			if diff := cmp.Diff(describe(want), describe(got)); diff != "" {
				t.Errorf("%s %s/%s (-Load +LoadMany):\n%s", name, q.Resource.Name, q.ID, diff)
			}
		}
		if want.Status == 200 {
			found++
		}
	}
	if found < 4*len(sources.Resources()) {
		t.Errorf("only %d documents found", found)
	}
}

func describe(r *sources.Representation) string {
	return fmt.Sprintf("%d %s total=%d modified=%s missing=%v docs=%v\n%s", r.Status, r.ETag, r.Total, r.LastModified, r.Missing, r.Docs, r.Body)
}

// idStore holds two documents under the same hex id, one an ObjectID and
// one a string, as a collection may: Get takes the ObjectID one.
type idStore struct{ docs []*sources.Doc }

func (s idStore) Get(_ context.Context, _ *sources.Resource, id string) (*sources.Doc, error) {
	oid, _ := sources.ParseObjectID(id)
	for _, d := range s.docs {
		if v, _ := d.Get("_id"); v == oid {
			return d.Clone(), nil
		}
	}
	return nil, fmt.Errorf("test: %w", sources.ErrNotFound)
}

func (s idStore) Find(context.Context, *sources.Query) (*sources.Result, error) { return nil, nil }

func (s idStore) Lookup(context.Context, sources.Lookup) ([]*sources.Doc, error) {
	var out []*sources.Doc
	for _, d := range s.docs {
		out = append(out, d.Clone())
	}
	return out, nil
}

func TestLoadManyPrefersObjectIDs(t *testing.T) {
	const hex = "67c42d4c957184d45484e656"
	oid, _ := sources.ParseObjectID(hex)
	store := idStore{docs: []*sources.Doc{sources.D("_id", hex, "name", "string"), sources.D("_id", oid, "name", "ObjectID")}}
	rd := render.New(store, func(_ context.Context, _ *sources.Resource, docs []*sources.Doc, _ bool) ([]*sources.Doc, []string, error) {
		return make([]*sources.Doc, len(docs)), nil, nil
	})
	desks, _ := sources.ResourceByName("desks")
	q, _ := query.Parse(desks, hex, "")
	reps, err := rd.LoadMany(context.Background(), []*sources.Query{q})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := rd.Load(context.Background(), q)
	if string(reps[0].Body) != string(want.Body) {
		t.Errorf("LoadMany %s, Load %s", reps[0].Body, want.Body)
	}
}
