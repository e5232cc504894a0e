package main

import (
	"context"
	"errors"
	"iter"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
)

// docsOfSize yields documents whose encoding by encName is as long as
// each size.
func docsOfSize(sizes ...int) iter.Seq[*sources.Doc] {
	return func(yield func(*sources.Doc) bool) {
		for _, n := range sizes {
			if !yield(sources.D("name", strings.Repeat("x", n))) {
				return
			}
		}
	}
}

func encName(dst []byte, d *sources.Doc) ([]byte, error) {
	s, _ := d.String("name")
	if s == "" {
		return dst, errors.New("no name")
	}
	return append(dst, s...), nil
}

// Batches hold at most so many documents and bytes, but for a document
// larger than the limit, which goes alone; documents keep their order.
func TestBatches(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		sizes []int
		lim   limits
		want  [][]int // sizes per batch
	}{
		{"by count", []int{1, 2, 3, 4, 5, 6, 7}, limits{docs: 3, bytes: 100}, [][]int{{1, 2, 3}, {4, 5, 6}, {7}}},
		{"by size", []int{4, 4, 4, 4, 4}, limits{docs: 100, bytes: 10}, [][]int{{4, 4}, {4, 4}, {4}}},
		{"exactly full", []int{5, 5, 5}, limits{docs: 100, bytes: 10}, [][]int{{5, 5}, {5}}},
		{"one too large", []int{3, 30, 3, 3}, limits{docs: 100, bytes: 10}, [][]int{{3}, {30}, {3, 3}}},
		{"large first", []int{30, 3}, limits{docs: 100, bytes: 10}, [][]int{{30}, {3}}},
		{"none", nil, limits{docs: 1, bytes: 1}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var got [][]int
			err := batches(t.Context(), docsOfSize(tc.sizes...), tc.lim, 1, encName, func(_ context.Context, b batch) error {
				var sizes []int
				for i := range b.len() {
					item := b.item(i)
					if strings.Trim(string(item), "x") != "" {
						t.Errorf("item %q", item)
					}
					sizes = append(sizes, len(item))
				}
				got = append(got, sizes)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, tc.want); diff != "" {
				t.Errorf("batches (-got +want):\n%s", diff)
			}
		})
	}
}

// A failed send stops the encoding (the stream is not read to its end)
// and is the result; so is an encoding error.
func TestBatchesFail(t *testing.T) {
	t.Parallel()
	read := 0
	docs := func(yield func(*sources.Doc) bool) {
		for {
			read++
			if !yield(sources.D("name", "xx")) {
				return
			}
		}
	}
	boom := errors.New("boom")
	var sent atomic.Int32
	err := batches(t.Context(), docs, limits{docs: 10, bytes: 1000}, 3, encName, func(context.Context, batch) error {
		if sent.Add(1) == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || read > 80 {
		t.Errorf("batches = %v after reading %d documents, want boom after about 30 (and the batches in flight)", err, read)
	}
	err = batches(t.Context(), docsOfSize(1, 0, 1), limits{docs: 10, bytes: 1000}, 3, encName, func(context.Context, batch) error { return nil })
	if err == nil || err.Error() != "no name" {
		t.Errorf("an encoding error: %v", err)
	}
}

// With inFlight n, n batches are sent at once, never more, and every
// document goes exactly once.
func TestBatchesInFlight(t *testing.T) {
	t.Parallel()
	const inFlight = 3
	var (
		mu       sync.Mutex
		now, top int
		sent     []string
	)
	full := make(chan struct{}) // closed once inFlight sends overlap
	var fill sync.Once
	sizes := make([]int, 40)
	for i := range sizes {
		sizes[i] = i + 1
	}
	err := batches(t.Context(), docsOfSize(sizes...), limits{docs: 4, bytes: 1 << 20}, inFlight, encName,
		func(ctx context.Context, b batch) error {
			mu.Lock()
			now++
			top = max(top, now)
			if now == inFlight {
				fill.Do(func() { close(full) })
			}
			for i := range b.len() {
				sent = append(sent, string(b.item(i)))
			}
			mu.Unlock()
			defer func() {
				mu.Lock()
				now--
				mu.Unlock()
			}()
			// The first sends wait for one another: they overlap or the
			// test fails, rather than hang, when they do not.
			select {
			case <-full:
				return nil
			case <-time.After(time.Minute):
				return errors.New("no three sends at once")
			}
		})
	if err != nil {
		t.Fatal(err)
	}
	if top != inFlight {
		t.Errorf("at most %d sends at once, want %d", top, inFlight)
	}
	var want []string
	for d := range docsOfSize(sizes...) {
		s, _ := d.String("name")
		want = append(want, s)
	}
	slices.Sort(sent)
	slices.Sort(want)
	if diff := cmp.Diff(sent, want); diff != "" {
		t.Errorf("documents sent (-got +want):\n%s", diff)
	}
}

func TestBatchParts(t *testing.T) {
	t.Parallel()
	var b batch
	for _, s := range []string{"a", "bb", "ccc", "dddd"} {
		b.buf = append(b.buf, s...)
		b.ends = append(b.ends, len(b.buf))
	}
	items := func(b batch) (out []string) {
		for i := range b.len() {
			out = append(out, string(b.item(i)))
		}
		return out
	}
	if diff := cmp.Diff(items(b.sub(1, 3)), []string{"bb", "ccc"}); diff != "" {
		t.Errorf("sub (-got +want):\n%s", diff)
	}
	if diff := cmp.Diff(items(b.pick([]int{3, 0})), []string{"dddd", "a"}); diff != "" {
		t.Errorf("pick (-got +want):\n%s", diff)
	}
	if got := string(b.sub(2, 4).buf); got != "cccdddd" {
		t.Errorf("sub's body %q", got)
	}
}

// Progress is logged at most once per interval while the stage runs,
// then once at its end with its rate.
func TestProgress(t *testing.T) {
	t.Parallel()
	var log syncBuffer
	now := time.Date(2026, 11, 20, 9, 0, 0, 0, time.UTC)
	p := newProgress(jsonLogger(&log), 5*time.Second, func() time.Time { return now }, "loading", 100, "index", "x")
	for range 9 {
		now = now.Add(2 * time.Second)
		p.add(10)
	}
	now = now.Add(2 * time.Second)
	p.add(10)
	p.end("loaded")
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	var got []string
	for _, l := range lines {
		_, rest, _ := strings.Cut(l, `"level":"INFO",`)
		got = append(got, rest)
	}
	want := []string{
		`"msg":"loading","index":"x","documents":30,"of":100,"docs_per_s":5}`,
		`"msg":"loading","index":"x","documents":60,"of":100,"docs_per_s":5}`,
		`"msg":"loading","index":"x","documents":90,"of":100,"docs_per_s":5}`,
		`"msg":"loaded","index":"x","documents":100,"duration":"20s","docs_per_s":5}`,
	}
	if diff := cmp.Diff(got, want); diff != "" {
		t.Errorf("log (-got +want):\n%s", diff)
	}
}
