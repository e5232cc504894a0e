package main

import (
	"context"
	"errors"
	"log/slog"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/config"
	"github.com/prodapi/prodapi/server"
	"github.com/prodapi/prodapi/server/fairshare"
	"github.com/prodapi/prodapi/server/metrics"
)

// openLimits builds the fair-share limiter of cfg (nil when every limit
// and cap is off), sharing its counts through the Redis tier when there
// is Redis.
func openLimits(cfg config.Limits, tier *redistier.Tier, registry *metrics.Metrics, logger *slog.Logger) (*fairshare.Limiter, error) {
	if cfg.Rate.Events == 0 && len(cfg.Clients) == 0 && cfg.Address.Events == 0 && cfg.MaxLoads == 0 {
		return nil, nil
	}
	opts := fairshare.Options{
		Client:   fairshare.Rate(cfg.Rate),
		Clients:  map[string]fairshare.Rate{},
		Address:  fairshare.Rate(cfg.Address),
		MissCost: cfg.MissCost,
		MaxLoads: cfg.MaxLoads,
		Metrics:  registry,
		Logger:   logger,
	}
	for name, r := range cfg.Clients {
		opts.Clients[name] = fairshare.Rate(r)
	}
	if tier.Enabled() {
		opts.Fleet = fleetRates{tier}
	}
	return fairshare.New(opts)
}

// fleetRates is the fleet's count of the limiter: the Redis tier's GCRA
// buckets.
type fleetRates struct{ tier *redistier.Tier }

func (f fleetRates) Charge(ctx context.Context, key string, r fairshare.Rate, n int, atMost bool) (fairshare.Charged, bool) {
	c, ok := f.tier.Charge(ctx, key, redistier.Rate(r), n, atMost)
	return fairshare.Charged(c), ok
}

// limitsCheck is /readyz's check of the limiter: failing while the
// fleet's count cannot be reached, when each replica limits alone.
func limitsCheck(l *fairshare.Limiter) server.Check {
	return server.Check{Name: "rate_limits", Probe: func(context.Context) error {
		if l.Alone() {
			return errLimitsAlone
		}
		return nil
	}, Note: func() string {
		if l.Alone() {
			return noteLimitsAlone
		}
		return ""
	}}
}

var errLimitsAlone = errors.New("the fleet's rate-limit counts in Redis cannot be reached")

// noteLimitsAlone is /readyz's note while the limiter counts alone.
const noteLimitsAlone = "Redis cannot be reached: rate limits are counted on each replica alone, so each client may make its limit's worth of requests on every replica"
