package main

import (
	"bytes"
	"compress/gzip"
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

	mongodriver "go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/prodapi/prodapi/cache"
	"github.com/prodapi/prodapi/cache/feed"
	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/server/render"
	"github.com/prodapi/prodapi/sources"
	mongosrc "github.com/prodapi/prodapi/sources/mongo"
	"github.com/prodapi/prodapi/sources/mongo/mongotest"
	"github.com/prodapi/prodapi/sources/sandbox"
	"github.com/prodapi/prodapi/test/realserver"
)

var noLinks = render.EnrichFunc(func(context.Context, *sources.Resource, []*sources.Doc, bool) ([]*sources.Doc, []string, error) {
	return nil, nil, nil
})

func plainBody(b *testing.B, rep *sources.Representation) []byte {
	if rep.Body != nil {
		return rep.Body
	}
	zr, err := gzip.NewReader(bytes.NewReader(rep.Gzip))
	if err != nil {
		b.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// freshReplicas are three replicas on one real redis-server, with an
// hour's TTL, replica i reading through store(i); shared are their Redis
// tiers.
func freshReplicas(b *testing.B, redisURL string, store func(i int) render.Reader) (replicas []*cache.Cache, shared []*redistier.Tier) {
	for i := range 3 {
		rdb, err := redistier.NewClient(redisURL)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { rdb.Close() })
		tier := redistier.New(rdb, redistier.Options{Timeout: time.Second})
		b.Cleanup(func() { tier.Close(context.Background()) })
		c := cache.New(tier, render.New(store(i), noLinks), cache.Options{
			TTL: func(string, bool) time.Duration { return time.Hour },
		})
		b.Cleanup(func() { c.Close(context.Background()) })
		replicas, shared = append(replicas, c), append(shared, tier)
	}
	return replicas, shared
}

// timeToFresh checks that every replica serves q with first in it, then
// times b.N writes: write(i) changes the document so that it carries the
// text it returns, and says when the change was made; the time runs
// until every replica serves that text. It reports p50, p99 and max.
func timeToFresh(b *testing.B, ctx context.Context, replicas []*cache.Cache, q *sources.Query, first string, write func(i int) (want string, at time.Time)) {
	serves := func(c *cache.Cache, want string) bool {
		rep, err := c.Load(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		return bytes.Contains(plainBody(b, rep), []byte(want))
	}
	for _, c := range replicas {
		if !serves(c, first) {
			b.Fatalf("%s does not carry %q", q.Resource.Name, first)
		}
	}
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		want, start := write(i)
		fresh := make([]bool, len(replicas))
		for n := 0; n < len(replicas); {
			for j, c := range replicas {
				if !fresh[j] && serves(c, want) {
					fresh[j] = true
					n++
				}
			}
			if time.Since(start) > 30*time.Second {
				b.Fatalf("write %d: not every replica fresh after 30s", i)
			}
			time.Sleep(time.Millisecond)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	pct := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "p50-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
}

// BenchmarkWriteToFresh measures, per write (a sandbox collection file
// replaced), the time until all three replicas sharing one real
// redis-server serve the new version of the item, with an hour's TTL:
// the watcher applies the change on replica 0, which invalidates Redis
// and publishes; replicas 1 and 2 hear it on the channel. Run with
// -benchtime 100x for the 100 writes of BENCHMARKS.md.
func BenchmarkWriteToFresh(b *testing.B) {
	srv := realserver.StartRedis(b, 0)
	dir := b.TempDir()
	if err := os.CopyFS(dir, sandbox.SampleFS()); err != nil {
		b.Fatal(err)
	}
	const id = "urn:newsml:riverton.example:2026-11-19T19:38:52.765190:1880979e-fc9b-454c-bd98-31d4076de7f8"
	const headline = "Councillors vote on the 2027 budget"
	original, err := os.ReadFile(filepath.Join(dir, "archive.json"))
	if err != nil {
		b.Fatal(err)
	}
	live, err := sandbox.OpenLive(dir, sandbox.Options{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer live.Close()
	replicas, _ := freshReplicas(b, srv.URL(), func(int) render.Reader { return live })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go live.Run(ctx, func(ctx context.Context, cs []sources.Change) { _ = replicas[0].Apply(ctx, cs) })

	items, _ := sources.ResourceByName("items")
	q := &sources.Query{Resource: items, ID: id, Page: 1, MaxResults: 25}
	timeToFresh(b, ctx, replicas, q, headline, func(i int) (string, time.Time) {
		want := fmt.Sprintf("%s (v%d)", headline, i)
		content := strings.Replace(string(original), headline, want, 1)
		tmp := filepath.Join(dir, ".archive.json.tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := os.Rename(tmp, filepath.Join(dir, "archive.json")); err != nil {
			b.Fatal(err)
		}
		return want, start
	})
}

// BenchmarkChangeToFresh is BenchmarkWriteToFresh on the platform's
// path: a document replaced in the MongoDB wire fake (a replica set), the
// change stream read through the real driver by the fleet's watcher
// (package feed, its lease in Redis) on replica 0, until all three
// replicas serve the new version of a desk whose TTL is an hour.
func BenchmarkChangeToFresh(b *testing.B) {
	srv := realserver.StartRedis(b, 0)
	mongo := mongotest.Start(b, map[string][]*sources.Doc{"desks": {sources.D("_id", "d1", "name", "Sport")}})
	mongo.EnableChangeStreams()
	var stores []*mongosrc.Store
	for range 3 {
		client, err := mongodriver.Connect(mongosrc.ClientOptions(mongo.URI(), 4, 0))
		if err != nil {
			b.Fatal(err)
		}
		defer client.Disconnect(context.Background())
		stores = append(stores, mongosrc.New(client.Database(mongosrc.DatabaseName(mongo.URI())), mongosrc.Options{}))
	}
	replicas, shared := freshReplicas(b, srv.URL(), func(i int) render.Reader { return stores[i] })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := feed.New(stores[0], shared[0], replicas[0], feed.Options{
		Unsupported: func(err error) bool { return errors.Is(err, mongosrc.ErrNoChangeStreams) },
		HistoryLost: func(err error) bool { return errors.Is(err, mongosrc.ErrHistoryLost) },
	})
	go f.Run(ctx)
	if err := mongo.WaitCommand(ctx, "getMore"); err != nil {
		b.Fatal(err)
	}
	desks, _ := sources.ResourceByName("desks")
	q := &sources.Query{Resource: desks, ID: "d1", Page: 1, MaxResults: 25}
	timeToFresh(b, ctx, replicas, q, "Sport", func(i int) (string, time.Time) {
		want := fmt.Sprintf("Sport v%d", i)
		start := time.Now()
		if err := mongo.Replace("desks", sources.D("_id", "d1", "name", want)); err != nil {
			b.Fatal(err)
		}
		return want, start
	})
}
