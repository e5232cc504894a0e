package objstore

import (
	"context"
	"testing"

	"github.com/prodapi/prodapi/test/testkit"
)

func BenchmarkObjectKey(b *testing.B) {
	for _, id := range []string{"5d553c333031e2855a2e5662.jpg", "20240115120112/a {photo} #1.jpg"} {
		b.Run(id, func(b *testing.B) {
			for b.Loop() {
				if _, _, ok := ObjectKey("sd", id); !ok {
					b.Fatal("no key")
				}
			}
		})
	}
}

// BenchmarkAsset is one Asset call against the in-process fake: a
// HeadObject round trip on loopback plus the local presigning.
func BenchmarkAsset(b *testing.B) {
	clock := testkit.NewClock(t0)
	fake := newFakeS3(b, clock)
	fake.put(b, "5d553c333031e2855a2e5662", "image/jpeg", uploaded, []byte("jpeg"), nil)
	s, _ := newTestStore(b, fake.srv.URL, Options{Now: clock.Now})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Asset(ctx, "5d553c333031e2855a2e5662.jpg"); err != nil {
			b.Fatal(err)
		}
	}
}
