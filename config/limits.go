package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Limits configure the fair share: the rate limits per client and per
// address, what a backend load costs, and the cap on each client's loads
// in flight. The README's "Limits and fair share" explains them.
type Limits struct {
	// Rate is the limit of each client without one of its own
	// (PRODAPI_RATE_LIMIT); zero: off.
	Rate Rate
	// Clients are limits of their own, by client
	// (PRODAPI_RATE_LIMIT_CLIENTS, client-a=50/s,client-b=off); a zero
	// Rate: that client is not limited.
	Clients map[string]Rate
	// Address is the limit per client address of the requests
	// authentication refuses (PRODAPI_RATE_LIMIT_ADDR); zero: off.
	Address Rate
	// MissCost is what a request that starts a backend load costs on top
	// of its 1 (PRODAPI_RATE_MISS_COST).
	MissCost int
	// MaxLoads caps the backend loads each client has in flight on a
	// replica (PRODAPI_CLIENT_MAX_LOADS); 0: no cap.
	MaxLoads int
}

// A Rate is a limit: Events per Per (a second, a minute or an hour), and
// as many at once. The zero Rate is off.
type Rate struct {
	Events int
	Per    time.Duration
}

// String is the rate as a setting writes it: 600/s, 100/h, off.
func (r Rate) String() string {
	if r.Events <= 0 {
		return "off"
	}
	unit := map[time.Duration]string{time.Second: "s", time.Minute: "m", time.Hour: "h"}[r.Per]
	return strconv.Itoa(r.Events) + "/" + unit
}

// Defaults of the limits. A mirror walking every list by cursor at
// 10,000 documents a second, in pages of 500, asks for 20 pages a second,
// each one a backend load costing 1 + defaultMissCost = 11: 220 a second.
// 600 a second leaves it nearly three times that (its /changes polls,
// retries, a second walk at once), while a client that does nothing but
// bust the cache gets 54 loads a second. A request refused by
// authentication is cheap, but nobody sends 50 a second in good faith.
var (
	defaultRateLimit     = Rate{Events: 600, Per: time.Second}
	defaultRateLimitAddr = Rate{Events: 50, Per: time.Second}
)

const (
	defaultMissCost       = 10
	defaultClientMaxLoads = 8
)

func (p *parser) limits() Limits {
	l := Limits{
		Rate:     p.rate("PRODAPI_RATE_LIMIT", defaultRateLimit),
		Clients:  p.rates("PRODAPI_RATE_LIMIT_CLIENTS"),
		Address:  p.rate("PRODAPI_RATE_LIMIT_ADDR", defaultRateLimitAddr),
		MissCost: int(p.int("PRODAPI_RATE_MISS_COST", defaultMissCost)),
		MaxLoads: int(p.int("PRODAPI_CLIENT_MAX_LOADS", defaultClientMaxLoads)),
	}
	if l.MissCost < 0 || l.MissCost > 1<<20 {
		p.errorf("PRODAPI_RATE_MISS_COST %d must be between 0 and %d", l.MissCost, 1<<20)
		l.MissCost = defaultMissCost
	}
	if l.MaxLoads < 0 || l.MaxLoads > 1<<20 {
		p.errorf("PRODAPI_CLIENT_MAX_LOADS %d must be between 0 (no cap) and %d", l.MaxLoads, 1<<20)
		l.MaxLoads = defaultClientMaxLoads
	}
	// A load costs 1 + MissCost at once: a limit that holds fewer could
	// never pay for one.
	load := 1 + l.MissCost
	tooLow := func(name string, r Rate) {
		if r.Events > 0 && r.Events < load {
			p.errorf("%s %s cannot pay for a single backend load, which costs 1 + PRODAPI_RATE_MISS_COST = %d: give it at least %d a period (per minute or per hour, for a low rate)",
				name, r, load, load)
		}
	}
	tooLow("PRODAPI_RATE_LIMIT", l.Rate)
	for _, name := range slices.Sorted(maps.Keys(l.Clients)) {
		tooLow("PRODAPI_RATE_LIMIT_CLIENTS "+name, l.Clients[name])
	}
	return l
}

// rate parses a rate: <events>/s, /m or /h, or off.
func (p *parser) rate(name string, def Rate) Rate {
	v := p.getenv(name)
	if v == "" {
		return def
	}
	r, err := parseRate(v)
	if err != nil {
		p.errorf("%s=%q %v", name, v, err)
		return def
	}
	return r
}

func parseRate(v string) (Rate, error) {
	if strings.EqualFold(v, "off") {
		return Rate{}, nil
	}
	events, unit, ok := strings.Cut(strings.TrimSpace(v), "/")
	n, err := strconv.Atoi(events)
	per, known := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[unit]
	if !ok || err != nil || !known || n < 1 || n > 1<<30 {
		return Rate{}, fmt.Errorf("is not a rate (600/s, 3000/m, 100/h, or off)")
	}
	return Rate{Events: n, Per: per}, nil
}

// rates parses limits by client: client-a=50/s,client-b=off.
func (p *parser) rates(name string) map[string]Rate {
	v := p.getenv(name)
	if strings.TrimSpace(v) == "" {
		return nil
	}
	rates := map[string]Rate{}
	for item := range strings.SplitSeq(v, ",") {
		client, rate, ok := strings.Cut(strings.TrimSpace(item), "=")
		client = strings.TrimSpace(client)
		if !ok || client == "" {
			p.errorf("%s: %q is not client=rate (client-a=50/s,client-b=off)", name, strings.TrimSpace(item))
			continue
		}
		if _, dup := rates[client]; dup {
			p.errorf("%s names %s twice", name, client)
			continue
		}
		r, err := parseRate(strings.TrimSpace(rate))
		if err != nil {
			p.errorf("%s: %s=%q %v", name, client, rate, err)
			continue
		}
		rates[client] = r
	}
	return rates
}

// clientRates is limits by client as the setting writes them, the
// clients in order.
func clientRates(rates map[string]Rate) string {
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(rates)) {
		parts = append(parts, name+"="+rates[name].String())
	}
	return strings.Join(parts, ",")
}
