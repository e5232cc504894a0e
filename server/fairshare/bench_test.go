package fairshare

import (
	"context"
	"net/http"
	"testing"
	"time"
)

// BenchmarkAdmit is what the limiter adds to a request of a client within
// its limit, its share in hand: the request charged, the headers set.
//
//	go test -run '^$' -bench Admit -benchmem ./server/fairshare
func BenchmarkAdmit(b *testing.B) {
	l, err := New(Options{Client: Rate{600, time.Second}, MissCost: 10, MaxLoads: 8, Flush: -1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close(context.Background()) })
	h := http.Header{}
	start := time.Now()
	s := l.Client("c", start)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		// 600 a second: a request every 1.67ms of the bucket's time.
		i++
		now := start.Add(time.Duration(i) * 1700 * time.Microsecond)
		if err := l.Admit(h, s, now); err != nil {
			b.Fatal(err)
		}
	}
}
