package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
	"github.com/prodapi/prodapi/sources/sandbox"
)

// The wire fake speaks no insert or drop, so the driver calls of
// seedMongo (Drop, InsertMany, CreateOne) are left to the integration run.
// What they write is tested here: the BSON seedMongo inserts, stored raw
// in the fake and read back through the Mongo adapter, is the sandbox's
// newsroom, documents and GridFS files alike.
func TestMongoDocumentsReadBackAsTheSandbox(t *testing.T) {
	t.Parallel()
	room, err := loadNewsroom(t.Context(), sandbox.SampleFS())
	if err != nil {
		t.Fatal(err)
	}
	srv := mongotest.Start(t, nil)
	for c, docs := range room.colls {
		raws := make([][]byte, len(docs))
		for i, d := range docs {
			if raws[i], err = appendBSON(nil, d); err != nil {
				t.Fatalf("%s: %v", c, err)
			}
		}
		if err := srv.InsertRaw(c, raws...); err != nil {
			t.Fatal(err)
		}
	}
	var files, chunks []any
	for _, a := range room.assets {
		f, cs := gridFSFile(a)
		files = append(files, f)
		chunks = append(chunks, cs...)
	}
	insertRaw(t, srv, filesColl, files)
	insertRaw(t, srv, chunksColl, chunks)
	store := connect(t, srv)

	for c, docs := range room.colls {
		for _, want := range docs {
			idv, _ := want.Get("_id")
			found, err := store.Lookup(t.Context(), sources.Lookup{Collection: c, Field: "_id", Values: []any{idv}})
			if err != nil || len(found) != 1 {
				t.Fatalf("%s %v: %d documents, %v", c, idv, len(found), err)
			}
			// MongoDB keeps milliseconds; the sample has whole seconds.
			if diff := cmp.Diff(found[0], want, cmp.AllowUnexported(sources.Doc{})); diff != "" {
				t.Errorf("%s %v (-mongo +sandbox):\n%s", c, idv, diff)
			}
		}
	}

	sb, err := sandbox.Sample(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range room.assets {
		// As the API asks: the media id with its extension.
		got, err := store.Asset(t.Context(), a.name)
		if err != nil {
			t.Fatalf("%s: %v", a.name, err)
		}
		want, err := sb.Asset(t.Context(), a.name)
		if err != nil {
			t.Fatal(err)
		}
		gotData, err := io.ReadAll(got.Content)
		got.Content.Close()
		if err != nil {
			t.Fatal(err)
		}
		wantData, _ := io.ReadAll(want.Content)
		want.Content.Close()
		if diff := cmp.Diff([]any{got.Size, got.ContentType, got.MD5, got.Modified, got.Filename, gotData},
			[]any{want.Size, want.ContentType, want.MD5, want.Modified, want.Filename, wantData}); diff != "" {
			t.Errorf("%s (-gridfs +sandbox):\n%s", a.name, diff)
		}
	}
}

func insertRaw(t *testing.T, srv *mongotest.Server, coll string, docs []any) {
	t.Helper()
	raws := make([][]byte, len(docs))
	for i, d := range docs {
		b, err := bson.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		raws[i] = b
	}
	if err := srv.InsertRaw(coll, raws...); err != nil {
		t.Fatal(err)
	}
}

func connect(t *testing.T, srv *mongotest.Server) *mongosrc.Store {
	t.Helper()
	client, err := mongo.Connect(mongosrc.ClientOptions(srv.URI(), 4, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		client.Disconnect(ctx)
	})
	return mongosrc.New(client.Database(mongosrc.DatabaseName(srv.URI())), mongosrc.Options{})
}

func TestBSONValue(t *testing.T) {
	t.Parallel()
	oid, _ := sources.ParseObjectID("67c42d4c957184d45484e656")
	when := time.Date(2026, 11, 20, 9, 15, 0, 123456789, time.UTC)
	in := sources.D("_id", oid, "small", int64(7), "negative", int64(-2147483648), "big", int64(1)<<40,
		"float", 2.0, "when", when, "none", nil, "yes", true,
		"list", []any{"a", int64(1), sources.D("b", int64(2))})
	got, err := bsonValue(in)
	if err != nil {
		t.Fatal(err)
	}
	want := bson.D{{Key: "_id", Value: bson.ObjectID(oid)}, {Key: "small", Value: int32(7)}, {Key: "negative", Value: int32(-2147483648)},
		{Key: "big", Value: int64(1) << 40}, {Key: "float", Value: 2.0}, {Key: "when", Value: bson.DateTime(when.UnixMilli())},
		{Key: "none", Value: nil}, {Key: "yes", Value: true},
		{Key: "list", Value: bson.A{"a", int32(1), bson.D{{Key: "b", Value: int32(2)}}}}}
	if diff := cmp.Diff(got, any(want)); diff != "" {
		t.Errorf("bsonValue (-got +want):\n%s", diff)
	}
	if _, err := bsonValue(sources.D("x", []any{struct{}{}})); err == nil {
		t.Error("an unsupported value converted")
	}
}

// GridFS ids follow prodapi's lookup: the media id less its last
// extension, an ObjectId when that is 24 hex digits.
func TestGridFSID(t *testing.T) {
	t.Parallel()
	oid := func(s string) any { id, _ := sources.ParseObjectID(s); return bson.ObjectID(id) }
	for _, tc := range []struct {
		name string
		want any
	}{
		{"6aec5d00957184d45484e981.jpg", oid("6aec5d00957184d45484e981")},
		{"6AEC5D00957184D45484E981.JPG", oid("6aec5d00957184d45484e981")},
		{"6aec5d00957184d45484e981", oid("6aec5d00957184d45484e981")},
		{"6aec5d00957184d45484e98.jpg", "6aec5d00957184d45484e98"},
		{"photo.final.jpg", "photo.final"},
		{"2026/route-map.pdf", "2026/route-map"},
		{"2026.d/route-map", "2026.d/route-map"},
		{".jpg", ".jpg"},
		{"..jpg", "..jpg"},
	} {
		if got := gridFSID(tc.name); !cmp.Equal(got, tc.want) {
			t.Errorf("gridFSID(%q) = %#v, want %#v", tc.name, got, tc.want)
		}
	}
}

// Files are cut into 255 KiB chunks with stable ids: seeding twice
// writes the same documents.
func TestGridFSFile(t *testing.T) {
	t.Parallel()
	data := bytes.Repeat([]byte("0123456789"), 60_000) // 600,000 bytes: 3 chunks
	a := asset{name: "6aec5d00957184d45484e981.png", data: data, contentType: "image/png", md5: "x",
		modified: time.Date(2026, 12, 5, 18, 0, 0, 0, time.UTC)}
	file, chunks := gridFSFile(a)
	again, chunksAgain := gridFSFile(a)
	if !cmp.Equal(file, again) || !cmp.Equal(chunks, chunksAgain) {
		t.Error("gridFSFile is not deterministic")
	}
	id := gridFSID(a.name)
	wantFile := bson.D{{Key: "_id", Value: id}, {Key: "filename", Value: a.name}, {Key: "contentType", Value: "image/png"},
		{Key: "md5", Value: "x"}, {Key: "chunkSize", Value: int32(gridFSChunk)}, {Key: "length", Value: int64(len(data))},
		{Key: "uploadDate", Value: bson.NewDateTimeFromTime(a.modified)}}
	if diff := cmp.Diff(file, wantFile); diff != "" {
		t.Errorf("file (-got +want):\n%s", diff)
	}
	if len(chunks) != 3 {
		t.Fatalf("%d chunks, want 3", len(chunks))
	}
	var joined []byte
	seen := map[bson.ObjectID]bool{}
	for n, c := range chunks {
		d := c.(bson.D)
		got := fmt.Sprint(d[1].Value, d[2].Value)
		if want := fmt.Sprint(id, int32(n)); got != want {
			t.Errorf("chunk %d: files_id, n = %s, want %s", n, got, want)
		}
		seen[d[0].Value.(bson.ObjectID)] = true
		joined = append(joined, d[3].Value.(bson.Binary).Data...)
	}
	if !bytes.Equal(joined, data) || len(seen) != 3 {
		t.Errorf("chunks hold %d bytes under %d ids, want %d under 3", len(joined), len(seen), len(data))
	}
	if f, c := gridFSFile(asset{name: "empty.txt"}); len(c) != 0 || f[5].Value != int64(0) {
		t.Errorf("an empty file: %v, %d chunks", f, len(c))
	}
}
