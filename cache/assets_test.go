package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// A mediaStore presigns a new URL on every call, valid for lifetime, or
// streams content for ids starting with "grid".
type mediaStore struct {
	now      func() time.Time
	lifetime time.Duration

	mu    sync.Mutex
	calls int
}

type nopSeeker struct{ *strings.Reader }

func (nopSeeker) Close() error { return nil }

func (s *mediaStore) Asset(_ context.Context, id string) (*sources.Asset, error) {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	switch {
	case id == "missing":
		return nil, fmt.Errorf("objstore: %s: %w", id, sources.ErrNotFound)
	case strings.HasPrefix(id, "grid"):
		return &sources.Asset{Content: nopSeeker{strings.NewReader("bytes")}, Size: 5}, nil
	}
	return &sources.Asset{
		Redirect: fmt.Sprintf("https://s3.example/%s?sig=%d", id, n),
		Expires:  s.now().Add(s.lifetime),
	}, nil
}

func (s *mediaStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func TestAssetRedirectsAreCached(t *testing.T) {
	e := newEnv(t)
	store := &mediaStore{now: e.clock.Now, lifetime: 15 * time.Minute}
	assets := e.c.Assets(store, 10*time.Minute)
	ctx := context.Background()

	first, err := assets.Asset(ctx, "20240115/photo.jpg")
	if err != nil {
		t.Fatal(err)
	}
	e.settle()
	e.advance(5 * time.Minute)
	// From Redis, on another replica too.
	replica := e.newCache()
	defer closeCache(t, replica)
	other := replica.Assets(store, 10*time.Minute)
	for _, a := range []sources.AssetStore{assets, other} {
		got, err := a.Asset(ctx, "20240115/photo.jpg")
		if err != nil {
			t.Fatal(err)
		}
		if got.Redirect != first.Redirect || !got.Expires.Equal(first.Expires) {
			t.Errorf("cached redirect %s until %v, want %s until %v", got.Redirect, got.Expires, first.Redirect, first.Expires)
		}
	}
	if got := store.count(); got != 1 {
		t.Errorf("presigned %d times, want 1", got)
	}
	e.advance(5 * time.Minute)
	if got, _ := assets.Asset(ctx, "20240115/photo.jpg"); got.Redirect == first.Redirect {
		t.Error("redirect served past its TTL")
	}
}

func TestAssetRedirectsNeverOutliveTheirURL(t *testing.T) {
	e := newEnv(t)
	// A URL valid for 60s, a TTL of 10m: kept for 54s (a tenth of the
	// life is left to the client).
	store := &mediaStore{now: e.clock.Now, lifetime: time.Minute}
	assets := e.c.Assets(store, 10*time.Minute)
	ctx := context.Background()
	first, _ := assets.Asset(ctx, "a.jpg")
	e.settle()
	if got, want := e.m.TTL(assetKey("a.jpg")), 54*time.Second; got != want {
		t.Errorf("Redis TTL %s, want %s", got, want)
	}
	e.advance(53 * time.Second)
	if got, _ := assets.Asset(ctx, "a.jpg"); got.Redirect != first.Redirect {
		t.Error("not served from the cache within its life")
	}
	e.advance(time.Second)
	if got, _ := assets.Asset(ctx, "a.jpg"); got.Redirect == first.Redirect {
		t.Error("served a URL about to expire")
	}
}

func TestAssetContentAndErrorsAreNotCached(t *testing.T) {
	e := newEnv(t)
	store := &mediaStore{now: e.clock.Now, lifetime: 15 * time.Minute}
	assets := e.c.Assets(store, 10*time.Minute)
	ctx := context.Background()
	for range 2 {
		a, err := assets.Asset(ctx, "grid-5d553c333031e2855a2e5662.jpg")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(a.Content)
		a.Content.Close()
		if string(b) != "bytes" {
			t.Errorf("content %q", b)
		}
		if _, err := assets.Asset(ctx, "missing"); !errors.Is(err, sources.ErrNotFound) {
			t.Errorf("missing: %v, want ErrNotFound", err)
		}
	}
	e.settle()
	if got := store.count(); got != 4 {
		t.Errorf("store called %d times, want 4", got)
	}
	if keys := e.m.Keys(); len(keys) != 0 {
		t.Errorf("Redis keys %q, want none", keys)
	}
	if got := e.metrics.Counter("prodapi_cache_requests_total", "").Value("assets", OutcomeBypass); got != 2 {
		t.Errorf("content counted as bypass %d times, want 2", got)
	}
}

func TestAssetsWithoutTTL(t *testing.T) {
	e := newEnv(t)
	store := &mediaStore{now: e.clock.Now, lifetime: time.Minute}
	if got := e.c.Assets(store, 0); got != sources.AssetStore(store) {
		t.Error("a zero TTL still wrapped the store")
	}
}
