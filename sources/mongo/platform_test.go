package mongo_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
)

// BuildInfo reports the server's version; a server older than the driver
// speaks is refused, as unavailable.
func TestBuildInfo(t *testing.T) {
	e := newEnv(t, nil, mongosrc.Options{})
	got, err := e.store.BuildInfo(t.Context())
	if err != nil || got != (mongosrc.Server{Version: "7.0.0"}) {
		t.Errorf("BuildInfo = %+v, %v; want 7.0.0", got, err)
	}

	old := mongotest.Start(t, nil)
	old.SetVersion("4.2.24", 8)
	_, err = connect(t, old, mongosrc.Options{Timeout: 500e6}).store.BuildInfo(t.Context())
	if !errors.Is(err, sources.ErrUnavailable) {
		t.Errorf("BuildInfo of MongoDB 4.2: %v, want ErrUnavailable", err)
	}
}

func TestTested(t *testing.T) {
	for v, want := range map[string]bool{"4.4.29": true, "5.0.0": true, "6.0.14": true, "7.0.12": true,
		"4.2.24": false, "8.0.4": false, "": false, "x.y": false} {
		if got := mongosrc.Tested(v); got != want {
			t.Errorf("Tested(%q) = %v, want %v", v, got, want)
		}
	}
}

// ChangeStreams opens a stream and closes it: no on a standalone server,
// yes on a replica set, and no cursor is left open.
func TestChangeStreams(t *testing.T) {
	e := newEnv(t, nil, mongosrc.Options{})
	if err := e.store.ChangeStreams(t.Context()); !errors.Is(err, mongosrc.ErrNoChangeStreams) {
		t.Errorf("a standalone server: %v, want ErrNoChangeStreams", err)
	}
	// FerretDB v1 cannot parse the database-wide aggregate at all.
	e.srv.Fail(mongotest.Fault{Commands: []string{"aggregate"}, Times: 1, Code: 9, CodeName: "FailedToParse",
		Message: "Invalid command format: the 'aggregate' field must specify a collection name or 1"})
	if err := e.store.ChangeStreams(t.Context()); !errors.Is(err, mongosrc.ErrNoChangeStreams) {
		t.Errorf("FerretDB's answer: %v, want ErrNoChangeStreams", err)
	}
	e.srv.EnableChangeStreams()
	if err := e.store.ChangeStreams(t.Context()); err != nil {
		t.Errorf("a replica set: %v", err)
	}
	if n := e.srv.OpenCursors(); n != 0 {
		t.Errorf("%d cursors left open", n)
	}
	e.srv.Stop()
	if err := e.store.ChangeStreams(t.Context()); !errors.Is(err, sources.ErrUnavailable) {
		t.Errorf("a server down: %v, want ErrUnavailable", err)
	}
}

// Indexes lists a collection's indexes with their keys in order; a
// collection that does not exist has none.
func TestIndexes(t *testing.T) {
	e := newEnv(t, map[string][]*sources.Doc{"desks": {sources.D("_id", "d")}}, mongosrc.Options{})
	e.srv.AddIndex("desks", mongotest.Index{Name: "name_1", Key: sources.D("name", int32(1))})
	e.srv.AddIndex("desks", mongotest.Index{Name: "updated", Key: sources.D("_updated", float64(-1), "_id", int64(1))})
	e.srv.AddIndex("desks", mongotest.Index{Name: "geo", Key: sources.D("loc", "2dsphere")})
	e.srv.AddIndex("desks", mongotest.Index{Name: "part", Key: sources.D("x", int32(1)), Partial: sources.D("x", sources.D("$exists", true))})
	got, exists, err := e.store.Indexes(t.Context(), "desks")
	want := []mongosrc.Index{
		{Name: "_id_", Keys: []mongosrc.IndexKey{{Field: "_id", Order: 1}}},
		{Name: "name_1", Keys: []mongosrc.IndexKey{{Field: "name", Order: 1}}},
		{Name: "updated", Keys: []mongosrc.IndexKey{{Field: "_updated", Order: -1}, {Field: "_id", Order: 1}}},
		{Name: "geo", Keys: []mongosrc.IndexKey{{Field: "loc", Kind: "2dsphere"}}},
		{Name: "part", Keys: []mongosrc.IndexKey{{Field: "x", Order: 1}}, Partial: true},
	}
	if diff := cmp.Diff(want, got); err != nil || !exists || diff != "" {
		t.Errorf("Indexes(desks): exists %v, err %v (-want +got):\n%s", exists, err, diff)
	}
	if got, exists, err := e.store.Indexes(t.Context(), "nothing"); err != nil || exists || len(got) != 0 {
		t.Errorf("Indexes(nothing) = %v, %v, %v; want none, not existing", got, exists, err)
	}
}

// A query is served by an index that starts with its equality fields and
// goes on with its sort, either way round; the index to create is that.
func TestNeedServedBy(t *testing.T) {
	history, _ := sources.ResourceByName("events_history")
	desks, _ := sources.ResourceByName("desks")
	key := func(f string, o int) mongosrc.IndexKey { return mongosrc.IndexKey{Field: f, Order: o} }
	ix := func(keys ...mongosrc.IndexKey) []mongosrc.Index { return []mongosrc.Index{{Name: "ix", Keys: keys}} }
	list := mongosrc.ListNeed(history)
	byOperation := mongosrc.ListNeed(history, "operation")
	lookup := mongosrc.LookupNeed(sources.Lookup{Collection: "planning", Field: "event_item",
		Sort: []sources.SortKey{{Field: "_updated", Desc: true}}})
	for _, tc := range []struct {
		name    string
		need    mongosrc.Need
		indexes []mongosrc.Index
		want    bool
	}{
		{"the sort with its tie-break", list, ix(key("_updated", -1), key("_id", 1)), true},
		{"the sort reversed", list, ix(key("_updated", 1), key("_id", -1)), true},
		{"a longer index", list, ix(key("_updated", -1), key("_id", 1), key("x", 1)), true},
		{"the sort without its tie-break", list, ix(key("_updated", -1)), false},
		{"directions mixed", list, ix(key("_updated", -1), key("_id", -1)), false},
		{"_id alone", list, ix(key("_id", 1)), false},
		{"equality then sort", byOperation, ix(key("operation", 1), key("_updated", -1), key("_id", 1)), true},
		{"equality, the sort reversed", byOperation, ix(key("operation", -1), key("_updated", 1), key("_id", -1)), true},
		{"the sort without the equality", byOperation, ix(key("_updated", -1), key("_id", 1)), false},
		{"the equality without the sort", byOperation, ix(key("operation", 1)), false},
		{"a lookup: its field leads", lookup, ix(key("event_item", 1)), true},
		{"a lookup: hashed", lookup, []mongosrc.Index{{Keys: []mongosrc.IndexKey{{Field: "event_item", Kind: "hashed"}}}}, true},
		{"a lookup: a text index", lookup, []mongosrc.Index{{Keys: []mongosrc.IndexKey{{Field: "event_item", Kind: "text"}}}}, false},
		{"a lookup: its field second", lookup, ix(key("_updated", 1), key("event_item", 1)), false},
		{"a partial index", lookup, []mongosrc.Index{{Keys: []mongosrc.IndexKey{key("event_item", 1)}, Partial: true}}, false},
		{"desks by name", mongosrc.ListNeed(desks), ix(key("name", 1), key("_id", 1)), true},
	} {
		if _, got := tc.need.ServedBy(tc.indexes); got != tc.want {
			t.Errorf("%s: %v served by %v: %v, want %v", tc.name, tc.need, tc.indexes, got, tc.want)
		}
	}
	for need, want := range map[string]string{
		list.CreateIndex():        `db.getCollection("events_history").createIndex({"_updated": -1, "_id": 1})`,
		byOperation.CreateIndex(): `db.getCollection("events_history").createIndex({"operation": 1, "_updated": -1, "_id": 1})`,
		lookup.CreateIndex():      `db.getCollection("planning").createIndex({"event_item": 1})`,
	} {
		if need != want {
			t.Errorf("CreateIndex = %s, want %s", need, want)
		}
	}
	if got, want := byOperation.String(), "events_history by operation sorted on _updated desc, _id"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}
