package mongo_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
)

// pollDocs are desks written over three seconds, two in one second, one
// without _updated, one without _etag, ids of both kinds.
func pollDocs(t0 time.Time) []*sources.Doc {
	oid, _ := sources.ParseObjectID("67c42d4c957184d45484e656")
	return []*sources.Doc{
		sources.D("_id", "d3", "_updated", t0.Add(2*time.Second), "_etag", "e3"),
		sources.D("_id", "d1", "_updated", t0, "_etag", "e1"),
		sources.D("_id", "d2b", "_updated", t0.Add(time.Second), "_etag", "e2b"),
		sources.D("_id", oid, "_updated", t0.Add(time.Second)),
		sources.D("_id", "never", "name", "no _updated"),
	}
}

// testPoll is what Poll and Latest answer over pollDocs in desks.
func testPoll(t *testing.T, s *mongosrc.Store, t0 time.Time) {
	t.Helper()
	ctx := context.Background()
	stamps := func(since time.Time, limit int) []string {
		t.Helper()
		got, err := s.Poll(ctx, "desks", since, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, st := range got {
			out = append(out, st.ID+"@"+st.Updated.Sub(t0).String()+"/"+st.Version)
		}
		return out
	}
	// At one _updated, by _id: strings before ObjectIds, as MongoDB
	// orders types.
	all := []string{"d1@0s/e1", "d2b@1s/e2b", "67c42d4c957184d45484e656@1s/", "d3@2s/e3"}
	if got := stamps(t0, 10); !slices.Equal(got, all) {
		t.Errorf("from t0: %v, want %v", got, all)
	}
	if got := stamps(t0.Add(time.Second), 10); !slices.Equal(got, all[1:]) {
		t.Errorf("at or after t0+1s: %v, want %v", got, all[1:])
	}
	if got := stamps(t0, 2); !slices.Equal(got, all[:2]) {
		t.Errorf("limit 2: %v, want %v", got, all[:2])
	}
	if got := stamps(t0.Add(time.Hour), 10); len(got) != 0 {
		t.Errorf("after the newest: %v", got)
	}
	latest, err := s.Latest(ctx, "desks")
	if err != nil || !latest.Equal(t0.Add(2*time.Second)) {
		t.Errorf("Latest: %v %v, want t0+2s", latest, err)
	}
	if latest, err := s.Latest(ctx, "users"); err != nil || !latest.IsZero() {
		t.Errorf("Latest of an empty collection: %v %v, want zero", latest, err)
	}
}

func TestPoll(t *testing.T) {
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	e := newEnv(t, map[string][]*sources.Doc{"desks": pollDocs(t0)}, mongosrc.Options{})
	testPoll(t, e.store, t0)
	if n := e.queries.Value(mongosrc.Backend, "desks", "poll"); n == 0 {
		t.Error("polls not counted as op poll")
	}
}

// FerretDB has no change streams: a watch says so, and the feed polls.
func TestFerretDBWatchHasNoChangeStreams(t *testing.T) {
	client, _ := ferretDB(t)
	db := scratchDatabase(t, client, "prodapi_watch")
	err := mongosrc.New(db, mongosrc.Options{}).Watch(context.Background(), []string{"desks"}, nil,
		func(sources.Change, []byte) error { return nil })
	if !errors.Is(err, mongosrc.ErrNoChangeStreams) {
		t.Errorf("a watch on FerretDB: %v, want ErrNoChangeStreams", err)
	}
}

func TestFerretDBPoll(t *testing.T) {
	client, _ := ferretDB(t)
	db := scratchDatabase(t, client, "prodapi_poll")
	t0 := time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)
	seed(t, db, map[string][]*sources.Doc{"desks": pollDocs(t0)})
	testPoll(t, mongosrc.New(db, mongosrc.Options{}), t0)
}
