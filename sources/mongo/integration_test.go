package mongo_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/mongo/internal/bsondoc"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
	"github.com/prodapi/prodapi/sources/sandbox"
	"github.com/prodapi/prodapi/sources/sourcestest"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// requireIntegration skips unless a real MongoDB is there to test against.
func requireIntegration(t *testing.T) *mongodriver.Client {
	t.Helper()
	if os.Getenv("PRODAPI_INTEGRATION") == "" {
		t.Skip("set PRODAPI_INTEGRATION=1 (make integration) to run against the MongoDB of compose.yaml " +
			"at " + integrationURI + ", seeded with sources/sandbox/sample")
	}
	client, err := mongodriver.Connect(mongosrc.ClientOptions(integrationURI, 4, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		client.Disconnect(ctx)
	})
	return client
}

// integrationURI is where compose.yaml publishes its MongoDB (a
// single-node replica set whose member is known by its service name,
// hence the direct connection).
const integrationURI = "mongodb://localhost:27017/superdesk?directConnection=true"

// TestIntegrationContract runs the contract suite against a real MongoDB:
// a scratch database seeded with the contract fixture, dropped afterwards.
func TestIntegrationContract(t *testing.T) {
	client := requireIntegration(t)
	testContract(t, scratchDatabase(t, client, "prodapi_contract"), sourcestest.Options{}, true)
}

// scratchDatabase returns a database of its own for t, dropped afterwards.
func scratchDatabase(t testing.TB, client *mongodriver.Client, prefix string) *mongodriver.Database {
	t.Helper()
	db := client.Database(fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := db.Drop(ctx); err != nil {
			t.Errorf("dropping %s: %v", db.Name(), err)
		}
	})
	return db
}

// seed inserts the documents of seed into db, by collection.
func seed(t *testing.T, db *mongodriver.Database, seed map[string][]*sources.Doc) {
	t.Helper()
	for coll, docs := range seed {
		raws := make([]any, len(docs))
		for i, d := range docs {
			raw, err := bsondoc.FromDoc(d)
			if err != nil {
				t.Fatal(err)
			}
			raws[i] = bson.Raw(raw)
		}
		if _, err := db.Collection(coll).InsertMany(t.Context(), raws); err != nil {
			t.Fatalf("seeding %s: %v", coll, err)
		}
	}
}

// testContract runs the contract suite against db, seeded with the
// contract fixture (and its geospatial indexes, with geoIndexes), and
// reads GridFS files back from it.
func testContract(t *testing.T, db *mongodriver.Database, opts sourcestest.Options, geoIndexes bool) {
	sourcestest.RunOptions(t, sourcestest.Dir(), func(t *testing.T, dir string) sources.Store {
		fixtures, err := sourcestest.Fixtures(dir)
		if err != nil {
			t.Fatal(err)
		}
		seed(t, db, fixtures)
		for coll, fields := range sourcestest.GeoIndexes() {
			if !geoIndexes {
				break
			}
			for field, kind := range fields {
				model := mongodriver.IndexModel{Keys: bson.D{{Key: field, Value: kind}}}
				if _, err := db.Collection(coll).Indexes().CreateOne(t.Context(), model); err != nil {
					t.Fatalf("indexing %s.%s: %v", coll, field, err)
				}
			}
		}
		search, err := sandbox.Open(dir, sandbox.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return sources.Split{Docs: mongosrc.New(db, mongosrc.Options{}), Search: search}
	}, opts)

	// GridFS as today's drivers write it: no md5, content type in
	// metadata, small chunks so that ranges cross chunk boundaries.
	t.Run("GridFS", func(t *testing.T) {
		data := bytes.Repeat([]byte("0123456789abcdef"), 100) // 1600 bytes
		id := bson.NewObjectID()
		bucket := db.GridFSBucket(options.GridFSBucket().SetChunkSizeBytes(100))
		err := bucket.UploadFromStreamWithID(t.Context(), id, "pattern.bin", bytes.NewReader(data),
			options.GridFSUpload().SetMetadata(bson.D{{Key: "contentType", Value: "application/octet-stream"}}))
		if err != nil {
			t.Fatal(err)
		}
		store := mongosrc.New(db, mongosrc.Options{})
		a, err := store.Asset(t.Context(), id.Hex()+".bin")
		if err != nil {
			t.Fatal(err)
		}
		defer a.Content.Close()
		if a.Size != 1600 || a.ContentType != "application/octet-stream" || a.Filename != "pattern.bin" || len(a.MD5) != 32 {
			t.Errorf("asset = %+v", a)
		}
		for _, off := range []int64{0, 95, 1550, 700} {
			if _, err := a.Content.Seek(off, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			got := make([]byte, 40)
			if _, err := io.ReadFull(a.Content, got); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data[off:off+40]) {
				t.Errorf("bytes at %d = %q, want %q", off, got, data[off:off+40])
			}
		}
		if _, err := store.Asset(t.Context(), bson.NewObjectID().Hex()); !errors.Is(err, sources.ErrNotFound) {
			t.Errorf("a missing file: %v, want ErrNotFound", err)
		}
	})
}

// TestIntegrationSample checks the database compose.yaml seeds against the
// sample newsroom it was seeded from: every document reads back equal,
// lists come in order, and media files in GridFS match assets/.
func TestIntegrationSample(t *testing.T) {
	client := requireIntegration(t)
	checkSample(t, mongosrc.New(client.Database(mongosrc.DatabaseName(integrationURI)), mongosrc.Options{}), nil)
}

// TestSampleThroughFake runs the same checks with the fake seeded from the
// sample: every sample document survives BSON and the driver unchanged.
func TestSampleThroughFake(t *testing.T) {
	t.Parallel()
	seed, err := sourcestest.Fixtures(sampleDir)
	if err != nil {
		t.Fatal(err)
	}
	srv := mongotest.Start(t, seed)
	files, err := os.ReadDir(filepath.Join(sampleDir, "assets"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(sampleDir, "assets", f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		stem := strings.TrimSuffix(f.Name(), filepath.Ext(f.Name()))
		var id any = stem
		if oid, ok := sources.ParseObjectID(stem); ok {
			id = oid
		}
		ct := map[string]string{".jpg": "image/jpeg", ".png": "image/png"}[filepath.Ext(f.Name())]
		if err := srv.PutFile(mongotest.File{ID: id, Filename: f.Name(), ContentType: ct, Data: data, ChunkSize: 1000, UploadDate: uploaded}); err != nil {
			t.Fatal(err)
		}
	}
	checkSample(t, connect(t, srv, mongosrc.Options{}).store, nil)
}

var sampleDir = filepath.Join("..", "sandbox", "sample")

// checkSample reads every sample document back from store and checks it
// equals the sample's, as expect (nil: unchanged) makes it, and checks a
// list and the media files.
func checkSample(t *testing.T, store *mongosrc.Store, expect func(*sources.Doc) *sources.Doc) {
	dir := sampleDir
	seed, err := sourcestest.Fixtures(dir)
	if err != nil {
		t.Fatal(err)
	}
	for coll, docs := range seed {
		t.Run(coll, func(t *testing.T) {
			for _, want := range docs {
				idv, _ := want.Get("_id")
				id, ok := sources.IDString(idv)
				if !ok {
					t.Fatalf("%s: _id %v", coll, idv)
				}
				var got *sources.Doc
				if r, ok := sources.ResourceByCollection(coll); ok {
					got, err = store.Get(t.Context(), r, id)
				} else {
					var found []*sources.Doc
					found, err = store.Lookup(t.Context(), sources.Lookup{Collection: coll, Field: "_id", Values: []any{idv}})
					if err == nil && len(found) != 1 {
						err = fmt.Errorf("%d documents", len(found))
					}
					if err == nil {
						got = found[0]
					}
				}
				if err != nil {
					t.Errorf("%s %s: %v (is the database seeded from %s?)", coll, id, err, dir)
					continue
				}
				if expect != nil {
					want = expect(want)
				}
				if diff := gocmp.Diff(got, want, docCmp); diff != "" {
					t.Errorf("%s %s (-mongo +sample):\n%s", coll, id, diff)
				}
			}
		})
	}
	t.Run("desks list", func(t *testing.T) {
		q := &sources.Query{Resource: res("desks"), Page: 1, MaxResults: 25, Sort: res("desks").DefaultSort}
		got, err := store.Find(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, d := range seed["desks"] {
			n, _ := d.String("name")
			want = append(want, n)
		}
		slices.Sort(want)
		var gotNames []string
		for _, d := range got.Docs {
			n, _ := d.String("name")
			gotNames = append(gotNames, n)
		}
		if diff := gocmp.Diff(gotNames, want); diff != "" || got.Total != len(want) {
			t.Errorf("desks (-got +want), total %d:\n%s", got.Total, diff)
		}
	})
	t.Run("assets", func(t *testing.T) {
		files, err := os.ReadDir(filepath.Join(dir, "assets"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			want, err := os.ReadFile(filepath.Join(dir, "assets", f.Name()))
			if err != nil {
				t.Fatal(err)
			}
			a, err := store.Asset(t.Context(), f.Name())
			if errors.Is(err, sources.ErrNotFound) {
				t.Skipf("%s is not in GridFS: compose.yaml does not load sample assets into it", f.Name())
			}
			if err != nil {
				t.Fatalf("%s: %v", f.Name(), err)
			}
			got, err := io.ReadAll(a.Content)
			a.Content.Close()
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("%s: %d bytes, %v; want the %d bytes of the file", f.Name(), len(got), err, len(want))
			}
			if ext := strings.ToLower(filepath.Ext(f.Name())); ext == ".jpg" && a.ContentType != "" && a.ContentType != "image/jpeg" {
				t.Errorf("%s: content type %q", f.Name(), a.ContentType)
			}
		}
	})
}
