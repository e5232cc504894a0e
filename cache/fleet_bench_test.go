package cache

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/realserver"
)

// BenchmarkFleetColdKey: three replicas on one real redis-server, 200
// concurrent requests each, released together on one cold key, a load
// taking 20ms. loads/op is the backend loads per key for the whole fleet
// (target 1).
func BenchmarkFleetColdKey(b *testing.B) {
	srv := realserver.StartRedis(b, 0)
	be := newBackend()
	be.setHook(func(context.Context, *sources.Query) (*sources.Representation, error) {
		time.Sleep(20 * time.Millisecond) // the backend's latency
		return nil, nil
	})
	var replicas []*Cache
	for range 3 {
		rdb, err := redistier.NewClient(srv.URL())
		if err != nil {
			b.Fatal(err)
		}
		defer rdb.Close()
		c := New(redistier.New(rdb, redistier.Options{Timeout: time.Second}), be, Options{})
		defer closeCache(b, c)
		replicas = append(replicas, c)
	}
	b.ResetTimer()
	for i := range b.N {
		q := detail(b, "items", fmt.Sprintf("cold-%d", i))
		start := make(chan struct{})
		var wg sync.WaitGroup
		for _, c := range replicas {
			for range 200 {
				wg.Go(func() {
					<-start
					if _, err := c.Load(context.Background(), q); err != nil {
						b.Error(err)
					}
				})
			}
		}
		close(start)
		wg.Wait()
	}
	b.StopTimer()
	b.ReportMetric(float64(be.total())/float64(b.N), "loads/op")
}
