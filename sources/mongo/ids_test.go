package mongo_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
)

// idDocs are desks with ids of both kinds and one of a type no URL
// names.
func idDocs() []*sources.Doc {
	var docs []*sources.Doc
	for _, id := range []string{"d3", "d1", "67c42d4c957184d45484e656", "d2", "67c42d4c957184d45484e655"} {
		if oid, ok := sources.ParseObjectID(id); ok {
			docs = append(docs, sources.D("_id", oid, "name", id))
			continue
		}
		docs = append(docs, sources.D("_id", id, "name", id))
	}
	return append(docs, sources.D("_id", int64(7), "name", "a number"))
}

// testIDs walks the desks of idDocs in pages of every size: each id
// once, strings then ObjectIDs, each in order; Present tells which ids
// are there.
func testIDs(t *testing.T, s *mongosrc.Store) {
	t.Helper()
	ctx := context.Background()
	want := []string{"d1", "d2", "d3", "67c42d4c957184d45484e655", "67c42d4c957184d45484e656"}
	for limit := 1; limit <= 6; limit++ {
		t.Run(fmt.Sprintf("pages of %d", limit), func(t *testing.T) {
			var got []string
			var cursor []byte
			for pages := 0; ; pages++ {
				if pages > 20 {
					t.Fatal("the walk does not end")
				}
				ids, next, err := s.IDs(ctx, "desks", cursor, limit)
				if err != nil {
					t.Fatal(err)
				}
				if len(ids) > limit {
					t.Errorf("a page of %d, limit %d", len(ids), limit)
				}
				got = append(got, ids...)
				if next == nil {
					break
				}
				cursor = next
			}
			if diff := cmp.Diff(got, want); diff != "" {
				t.Errorf("walked (-got +want):\n%s", diff)
			}
		})
	}
	if ids, next, err := s.IDs(ctx, "users", nil, 10); err != nil || len(ids) != 0 || next == nil {
		t.Errorf("an empty collection's first page: %v %q %v, want nothing and the next type", ids, next, err)
	}
	got, err := s.Present(ctx, "desks", []string{"d1", "gone", "67c42d4c957184d45484e655", "67c42d4c957184d45484e999"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"d1", "67c42d4c957184d45484e655"}; !slices.Equal(got, want) {
		t.Errorf("Present: %v, want %v", got, want)
	}
	if n, err := s.EstimatedCount(ctx, "desks"); err != nil || n != int64(len(idDocs())) {
		t.Errorf("EstimatedCount: %d %v, want %d", n, err, len(idDocs()))
	}
}

func TestIDs(t *testing.T) {
	e := newEnv(t, map[string][]*sources.Doc{"desks": idDocs()}, mongosrc.Options{})
	testIDs(t, e.store)
	if n := e.queries.Value(mongosrc.Backend, "desks", "ids"); n == 0 {
		t.Error("walks not counted as op ids")
	}
	if _, _, err := e.store.IDs(context.Background(), "desks", []byte{9}, 10); err == nil {
		t.Error("a cursor of no phase was taken")
	}
}

func TestFerretDBIDs(t *testing.T) {
	client, _ := ferretDB(t)
	db := scratchDatabase(t, client, "prodapi_ids")
	seed(t, db, map[string][]*sources.Doc{"desks": idDocs()})
	testIDs(t, mongosrc.New(db, mongosrc.Options{}))
}
