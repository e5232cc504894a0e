package mongo_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/sourcestest"
	"github.com/prodapi/prodapi/test/realserver"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// servers are the real servers this package's tests share: FerretDB.
var servers realserver.Set

func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }

// ferretDB returns a client of the package's FerretDB (started on first
// use), and its version, for the differences the test expects.
func ferretDB(t testing.TB) (*mongodriver.Client, string) {
	t.Helper()
	f := servers.FerretDB(t)
	client, err := mongodriver.Connect(mongosrc.ClientOptions(f.URI, 4, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		client.Disconnect(ctx)
	})
	return client, f.Version
}

// TestFerretDBContract runs the contract suite against FerretDB, skipping
// exactly the cases its known differences from MongoDB break.
func TestFerretDBContract(t *testing.T) {
	client, version := ferretDB(t)
	testContract(t, scratchDatabase(t, client, "prodapi_contract"), sourcestest.Options{Skip: contractSkips(t, version)}, geoIndexes(t, version))
}

// TestFerretDBSample seeds FerretDB with the sample newsroom (documents as
// the sandbox reads them, media files into GridFS) and reads it all back.
func TestFerretDBSample(t *testing.T) {
	client, version := ferretDB(t)
	db := scratchDatabase(t, client, "prodapi_sample")
	fixtures, err := sourcestest.Fixtures(sampleDir)
	if err != nil {
		t.Fatal(err)
	}
	seed(t, db, fixtures)
	files, err := os.ReadDir(filepath.Join(sampleDir, "assets"))
	if err != nil {
		t.Fatal(err)
	}
	bucket := db.GridFSBucket()
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(sampleDir, "assets", f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		id := mongosrc.FileID(f.Name())
		if oid, ok := id.(sources.ObjectID); ok {
			id = bson.ObjectID(oid)
		}
		ct := map[string]string{".jpg": "image/jpeg", ".png": "image/png"}[filepath.Ext(f.Name())]
		if err := bucket.UploadFromStreamWithID(t.Context(), id, f.Name(), bytes.NewReader(data),
			options.GridFSUpload().SetMetadata(bson.D{{Key: "contentType", Value: ct}})); err != nil {
			t.Fatal(err)
		}
	}
	checkSample(t, mongosrc.New(db, mongosrc.Options{}), sampleExpect(t, version))
}

// FerretDB's refusals of queries the translator lets through (the
// server's validation refuses some of them first) are the client's:
// ErrInvalid, with FerretDB's words kept for the log.
func TestFerretDBRefusals(t *testing.T) {
	client, _ := ferretDB(t)
	db := scratchDatabase(t, client, "prodapi_refusals")
	seed(t, db, userSeed(t))
	store := mongosrc.New(db, mongosrc.Options{})
	for _, tc := range []struct{ where, detail string }{
		{`{"username": {"$mod": [0, 1]}}`, "BadValue"},
		{`{"loc": {"$near": [14, 50], "$maxDistance": 2}}`, "BadValue"},
		{`{"username": {"$type": 99}}`, "BadValue"},
		{`{"username": {"$bitsAllSet": -1}}`, "FailedToParse"},
	} {
		_, err := store.Find(t.Context(), listQuery(t, "users", tc.where, nil, 1, 25))
		if !errors.Is(err, sources.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.where, err)
			continue
		}
		if d, ok := err.(detail); !ok || !strings.Contains(d.Detail(), tc.detail) {
			t.Errorf("%s: detail does not mention %s: %v", tc.where, tc.detail, err)
		}
	}
}
