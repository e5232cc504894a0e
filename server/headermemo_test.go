package server

import (
	"fmt"
	"testing"
	"time"
)

func TestHeaderMemo(t *testing.T) {
	m := newHeaderMemo()
	base := time.Date(2026, 11, 20, 9, 15, 0, 0, time.UTC)
	// More distinct values than slots, dates and ETags mixed, twice over:
	// collisions recompute, never answer another key's value.
	for round := range 2 {
		for i := range 3000 {
			d := base.Add(time.Duration(i) * time.Second)
			if got, want := m.date(d)[0], d.Format("Mon, 02 Jan 2006 15:04:05 GMT"); got != want {
				t.Fatalf("round %d: date(%v) = %s, want %s", round, d, got, want)
			}
			etag := fmt.Sprintf(`"%032x"`, i)
			if got := m.etag(etag, false)[0]; got != etag {
				t.Fatalf("etag(%s) = %s", etag, got)
			}
			if got, want := m.etag(etag, true)[0], etag[:len(etag)-1]+`-gzip"`; got != want {
				t.Fatalf("gzip etag(%s) = %s, want %s", etag, got, want)
			}
		}
	}
}

func TestHeaderMemoNumbersAndStrings(t *testing.T) {
	m := newHeaderMemo()
	// More distinct values than slots, twice over: collisions recompute,
	// never answer another value.
	for round := range 2 {
		for i := range int64(10000) {
			if got, want := m.int(i)[0], fmt.Sprint(i); got != want {
				t.Fatalf("round %d: int(%d) = %s", round, i, got)
			}
			if got, want := m.int(-i)[0], fmt.Sprint(-i); got != want {
				t.Fatalf("round %d: int(%d) = %s", round, -i, got)
			}
			s := fmt.Sprintf("prodapi; hit; ttl=%d", i)
			if got := m.str(s); got[0] != s || len(got) != 1 || cap(got) != 1 {
				t.Fatalf("str(%s) = %q (cap %d)", s, got, cap(got))
			}
		}
	}
}
