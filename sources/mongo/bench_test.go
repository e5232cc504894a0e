package mongo_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"
)

// benchStore is a store over a fake, for benchmarks: the numbers include
// the driver and the loopback round trip, and the fake's own evaluation.
func benchStore(b *testing.B, srv *mongotest.Server) *mongosrc.Store {
	client, err := mongodriver.Connect(mongosrc.ClientOptions(srv.URI(), 8, 0))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		client.Disconnect(ctx)
	})
	return mongosrc.New(client.Database(mongotest.Database), mongosrc.Options{})
}

func BenchmarkGet(b *testing.B) {
	srv := mongotest.Start(b, deskSeed(b))
	store := benchStore(b, srv)
	for b.Loop() {
		if _, err := store.Get(b.Context(), res("desks"), deskOID); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFind(b *testing.B) {
	var users []*sources.Doc
	for i := range 200 {
		id := mustOID(b, userOneID)
		id[10], id[11] = byte(i>>8), byte(i)
		users = append(users, sources.D("_id", id, "username", string(rune('a'+i%26))+string(rune('a'+i/26)),
			"desk", mustOID(b, deskOID), "_updated", time.Unix(int64(i), 0).UTC()))
	}
	srv := mongotest.Start(b, map[string][]*sources.Doc{"users": users})
	store := benchStore(b, srv)
	q := listQuery(b, "users", `{"desk": "`+deskOID+`"}`, nil, 2, 25)
	for b.Loop() {
		r, err := store.Find(b.Context(), q)
		if err != nil || len(r.Docs) != 25 {
			b.Fatal(len(r.Docs), err)
		}
	}
}

// BenchmarkAssetRead streams a 4 MiB file in 255 KiB chunks.
func BenchmarkAssetRead(b *testing.B) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 256*1024)
	srv := mongotest.Start(b, nil)
	if err := srv.PutFile(mongotest.File{ID: mustOID(b, deskOID), Data: data, UploadDate: uploaded}); err != nil {
		b.Fatal(err)
	}
	store := benchStore(b, srv)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		a, err := store.Asset(b.Context(), deskOID)
		if err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, a.Content); err != nil || n != int64(len(data)) {
			b.Fatal(n, err)
		}
		a.Content.Close()
	}
}
