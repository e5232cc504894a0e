package cache

import (
	"context"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// maxAssetSlack is the most of a presigned URL's remaining life that a
// cached redirect leaves unused, so that a client always has time to
// follow it; for short-lived URLs it is a tenth of their life.
const maxAssetSlack = 30 * time.Second

// Assets wraps store so that redirects (Asset.Redirect) are cached per
// media id for ttl, and never past the URL's Expires less a margin.
// Content (GridFS streams) is never cached, nor are errors. Lookups are
// not coalesced: a stream cannot be shared, and presigning is cheap. With
// ttl zero or less, store is returned as it is.
func (c *Cache) Assets(store sources.AssetStore, ttl time.Duration) sources.AssetStore {
	if ttl <= 0 {
		return store
	}
	return &assets{c: c, store: store, ttl: ttl}
}

type assets struct {
	c     *Cache
	store sources.AssetStore
	ttl   time.Duration
}

const assetResource = "assets"

func (a *assets) Asset(ctx context.Context, mediaID string) (*sources.Asset, error) {
	c := a.c
	key := assetKey(mediaID)
	now := c.now()
	if r := c.local.get(key, now); r != nil && now.Before(r.localUntil) && r.e.status == statusRedirect {
		c.metrics.requests.Inc(assetResource, OutcomeHit)
		c.metrics.hits.Inc(assetResource, tierLocal)
		return redirectOf(r.e), nil
	}
	// The client hanging up must not count as a Redis failure.
	if e, _ := c.redisGet(context.WithoutCancel(ctx), key); e != nil && e.status == statusRedirect {
		if now = c.now(); e.isFresh(now) {
			c.local.put(key, e, now)
			c.metrics.requests.Inc(assetResource, OutcomeHit)
			c.metrics.hits.Inc(assetResource, tierRedis)
			return redirectOf(e), nil
		}
	}
	asset, err := a.store.Asset(ctx, mediaID)
	if err != nil {
		c.metrics.requests.Inc(assetResource, OutcomeError)
		return nil, err
	}
	if asset.Redirect == "" {
		c.metrics.requests.Inc(assetResource, OutcomeBypass)
		return asset, nil
	}
	c.metrics.requests.Inc(assetResource, OutcomeMiss)
	now = c.now()
	left := asset.Expires.Sub(now)
	fresh := min(a.ttl, left-min(maxAssetSlack, left/10))
	if fresh > 0 {
		e := &entry{
			status:       statusRedirect,
			body:         []byte(asset.Redirect),
			lastModified: asset.Expires,
			storedAt:     now,
			fresh:        fresh,
		}
		c.local.put(key, e, now)
		if c.redis != nil {
			c.redis.Set(ctx, key, encode(key, e), fresh)
		}
	}
	return asset, nil
}

// statusRedirect marks an asset redirect entry: its body is the URL and
// its lastModified the URL's expiry.
const statusRedirect = 302

func redirectOf(e *entry) *sources.Asset {
	return &sources.Asset{Redirect: string(e.body), Expires: e.lastModified}
}
