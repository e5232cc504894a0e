package redistier

import (
	"context"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/prodapi/prodapi/test/realserver"
)

// BenchmarkGet: concurrent reads of 4 KiB values on 64 keys from a real
// redis-server on loopback, as a server's Redis hits make them, through
// go-redis's auto-pipeliner (what New picks) and through plain GETs, on
// RESP3 (go-redis's default, a push-notification check on every reply)
// and RESP2 (what NewClient picks):
//
//	go test -run '^$' -bench Get -benchmem ./cache/redistier
//
// cpu-ns/op is this process's CPU per read, redis-cpu-ns/op the server's:
// both hold steady on a busy machine where ns/op does not.
func BenchmarkGet(b *testing.B) {
	for _, proto := range []string{"resp3", "resp2"} {
		for _, pipe := range []bool{true, false} {
			name := proto + "/plain-get"
			if pipe {
				name = proto + "/auto-pipeline"
			}
			b.Run(name, func(b *testing.B) {
				srv := realserver.StartRedis(b, 0)
				url := srv.URL()
				if proto == "resp3" {
					url += "?protocol=3"
				}
				rdb, err := NewClient(url)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { rdb.Close() })
				tr := New(rdb, Options{})
				b.Cleanup(func() { tr.Close(context.Background()) })
				if !pipe {
					tr.pipe = nil
				}
				ctx := context.Background()
				val := make([]byte, 4<<10)
				for i := range 64 {
					tr.Set(ctx, "k"+strconv.Itoa(i), val, time.Hour)
				}
				tr.Settle()
				var worker, misses atomic.Int64
				b.ReportAllocs()
				b.SetParallelism(16)
				cpu0, rcpu0 := processCPU(b), serverCPU(b, srv)
				b.RunParallel(func(pb *testing.PB) {
					i := int(worker.Add(1)) * 7
					for pb.Next() {
						i++
						// A read that misses the 50 ms timeout on a busy
						// machine is counted, not a failure.
						if v, ok := tr.Get(ctx, "k"+strconv.Itoa(i%64)); !ok || len(v) != len(val) {
							misses.Add(1)
						}
					}
				})
				b.ReportMetric(float64(misses.Load())/float64(b.N), "misses/op")
				b.ReportMetric(float64(processCPU(b)-cpu0)/float64(b.N), "cpu-ns/op")
				b.ReportMetric(float64(serverCPU(b, srv)-rcpu0)/float64(b.N), "redis-cpu-ns/op")
			})
		}
	}
}

// processCPU is this process's user and system CPU time so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func serverCPU(b *testing.B, srv *realserver.Redis) time.Duration {
	d, err := srv.CPU(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return d
}
