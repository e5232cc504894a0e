package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/test/realserver"
)

// A scaled newsroom goes into a real FerretDB (a MongoDB-wire server,
// test/realserver) in many small inserts, and every collection reads
// back through the Mongo adapter as it was made.
func TestSeedMongoReal(t *testing.T) {
	var servers realserver.Set
	defer servers.Close()
	ferret := servers.FerretDB(t)
	uri := strings.TrimSuffix(ferret.URI, "/") + "/seed_scaled"
	var log syncBuffer
	args := []string{"-targets", "mongo", "-wait", "1m", "-scale", "150", "-seed", "3", "-batch-docs", "16", "-progress", "0"}
	if err := run(t.Context(), args, envOf("MONGO_URI", uri), &log); err != nil {
		t.Fatalf("seed: %v\n%s", err, log.String())
	}
	if n := strings.Count(log.String(), `"msg":"mongo: inserting","database":"seed_scaled","collection":"archive"`); n < 150/16 {
		t.Errorf("%d progress lines for archive, want one an insert:\n%s", n, log.String())
	}

	s, err := newScaler(sampleRoom(t), 150, 3)
	if err != nil {
		t.Fatal(err)
	}
	want := collect(s.corpus())
	client, err := mongo.Connect(mongosrc.ClientOptions(uri, 4, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		client.Disconnect(ctx)
	}()
	store := mongosrc.New(client.Database("seed_scaled"), mongosrc.Options{})
	for c, docs := range want {
		ids := make([]any, len(docs))
		for i, d := range docs {
			ids[i], _ = d.Get("_id")
		}
		found, err := store.Lookup(t.Context(), sources.Lookup{Collection: c, Field: "_id", Values: ids})
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		// FerretDB moves a nested _id to the front of its sub-document
		// (sources/mongo's FerretDB differences): compare with sorted keys.
		got, w := canonical(found), canonical(docs)
		slices.Sort(got)
		slices.Sort(w)
		if diff := cmp.Diff(got, w); diff != "" {
			t.Errorf("%s read back from FerretDB (-got +want):\n%s", c, diff)
		}
	}
}
