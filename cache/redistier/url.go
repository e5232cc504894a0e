package redistier

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// NewClient builds a Redis client from a REDIS_URL (the forms are in the
// package documentation): standalone, Sentinel or Cluster. It does not
// connect: a Redis that is down at start is a cache that runs without it
// until it comes back. Errors never repeat the URL, which may hold a
// password.
func NewClient(rawURL string) (redis.UniversalClient, error) {
	opts, err := redisOptions(rawURL)
	if err != nil {
		return nil, err
	}
	switch o := opts.(type) {
	case *redis.ClusterOptions:
		return redis.NewClusterClient(o), nil
	case *redis.FailoverOptions:
		return redis.NewFailoverClient(o), nil
	default:
		return redis.NewClient(o.(*redis.Options)), nil
	}
}

// redisOptions parses a REDIS_URL into go-redis options: *redis.Options,
// *redis.ClusterOptions or *redis.FailoverOptions.
func redisOptions(rawURL string) (any, error) {
	u, err := splitURL(rawURL)
	if err != nil {
		return nil, fmt.Errorf("redistier: REDIS_URL: %w", err)
	}
	switch u.scheme {
	case "redis", "rediss":
		if len(u.hosts) > 1 {
			return nil, errors.New("redistier: REDIS_URL: several hosts: use redis+cluster:// or redis-sentinel://")
		}
		opts, err := redis.ParseURL(u.rebuild(u.scheme, u.user, u.hosts[0], u.path, u.query))
		if err != nil {
			return nil, fmt.Errorf("redistier: REDIS_URL: %w", clean(err))
		}
		opts.ContextTimeoutEnabled = true
		opts.DialerRetries = dialerRetries(u.query)
		opts.MaintNotificationsConfig = noMaintNotifications()
		opts.Protocol = protocol(u.query)
		return opts, nil

	case "redis+cluster", "rediss+cluster":
		if strings.Trim(u.path, "/") != "" {
			return nil, errors.New("redistier: REDIS_URL: a cluster has no database number")
		}
		q := u.query
		reload, err := clusterReload(q)
		if err != nil {
			return nil, err
		}
		q["addr"] = append(slices.Clone(u.hosts[1:]), q["addr"]...)
		scheme := strings.TrimSuffix(u.scheme, "+cluster")
		opts, err := redis.ParseClusterURL(u.rebuild(scheme, u.user, u.hosts[0], "", q))
		if err != nil {
			return nil, fmt.Errorf("redistier: REDIS_URL: %w", clean(err))
		}
		opts.ContextTimeoutEnabled = true
		opts.DialerRetries = dialerRetries(u.query)
		opts.MaintNotificationsConfig = noMaintNotifications()
		opts.Protocol = protocol(u.query)
		opts.ClusterStateReloadInterval = reload
		return opts, nil

	case "redis-sentinel", "rediss-sentinel":
		// /mastername[/db]
		parts := strings.Split(strings.Trim(u.path, "/"), "/")
		if parts[0] == "" || len(parts) > 2 {
			return nil, errors.New("redistier: REDIS_URL: a sentinel URL needs /mastername[/db]")
		}
		q := u.query
		if q.Has("master_name") || q.Has("addr") || q.Has("username") || q.Has("password") {
			return nil, errors.New("redistier: REDIS_URL: give the master name in the path, hosts before it and credentials in the userinfo")
		}
		q.Set("master_name", parts[0])
		if len(parts) == 2 {
			q.Set("db", parts[1])
		}
		// go-redis reads sentinel credentials from the userinfo and the
		// master's from the query: ours are the other way round.
		if u.user != nil {
			if name := u.user.Username(); name != "" {
				q.Set("username", name)
			}
			if pass, ok := u.user.Password(); ok {
				q.Set("password", pass)
			}
		}
		var sentinelUser *url.Userinfo
		if q.Has("sentinel_username") || q.Has("sentinel_password") {
			sentinelUser = url.UserPassword(q.Get("sentinel_username"), q.Get("sentinel_password"))
			q.Del("sentinel_username")
			q.Del("sentinel_password")
		}
		for _, h := range u.hosts[1:] {
			q.Add("addr", h)
		}
		scheme := strings.TrimSuffix(u.scheme, "-sentinel")
		opts, err := redis.ParseFailoverURL(u.rebuild(scheme, sentinelUser, u.hosts[0], "", q))
		if err != nil {
			return nil, fmt.Errorf("redistier: REDIS_URL: %w", clean(err))
		}
		// go-redis panics on the first two for a master client, and the
		// third would send the cache's writes to a read-only replica.
		if opts.RouteByLatency || opts.RouteRandomly || opts.ReplicaOnly {
			return nil, errors.New("redistier: REDIS_URL: a Sentinel URL names the master the cache reads and writes: route_by_latency, route_randomly and replica_only are not supported")
		}
		opts.ContextTimeoutEnabled = true
		opts.DialerRetries = dialerRetries(u.query)
		opts.Protocol = protocol(u.query)
		return opts, nil

	default:
		return nil, errors.New("redistier: REDIS_URL: the scheme must be redis, rediss, redis+cluster, rediss+cluster, redis-sentinel or rediss-sentinel")
	}
}

// protocol is RESP2 unless the URL sets protocol: the cache uses no
// RESP3 feature (push notifications, client-side caching), RESP2 is what
// every Redis speaks, and RESP3 measured no cheaper (BenchmarkGet,
// BENCHMARKS.md "The Redis tier": the two within noise).
func protocol(q url.Values) int {
	if n, err := strconv.Atoi(q.Get("protocol")); err == nil {
		return n
	}
	return 2
}

// dialerRetries is 1 unless the URL sets dialer_retries: go-redis's
// default of 5 attempts, 100ms apart, would spend every call's whole
// budget waiting on a Redis that refuses connections, where failing at
// once lets the breaker see the outage sooner.
func dialerRetries(q url.Values) int {
	if n, err := strconv.Atoi(q.Get("dialer_retries")); err == nil {
		return n
	}
	return 1
}

// DefaultClusterReload is how often a Cluster client asks the cluster
// for its slots again, unless the URL sets cluster_state_reload_interval.
//
// go-redis re-reads the slots on a MOVED or ASK reply, never on a refused
// connection, and otherwise every 60s: after a failover it keeps sending
// the dead master's slots to the dead master for up to a minute (seen
// against a real cluster: every command on those slots refused, and the
// cache's breaker open for all keys). A CLUSTER SLOTS a second per
// client costs the cluster nothing and bounds that window by a second
// once the cluster has promoted a replica.
const DefaultClusterReload = time.Second

// clusterReload takes cluster_state_reload_interval out of q, which
// go-redis does not parse.
func clusterReload(q url.Values) (time.Duration, error) {
	v := q.Get("cluster_state_reload_interval")
	q.Del("cluster_state_reload_interval")
	if v == "" {
		return DefaultClusterReload, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, errors.New("redistier: REDIS_URL: cluster_state_reload_interval must be a positive duration, such as 1s")
	}
	return d, nil
}

// noMaintNotifications turns off the handshake for Redis Enterprise
// maintenance notifications, which plain Redis refuses.
func noMaintNotifications() *maintnotifications.Config {
	return &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
}

// A redisURL is a REDIS_URL split by hand: url.Parse refuses the comma
// separated host lists that Sentinel and Cluster URLs carry.
type redisURL struct {
	scheme string
	user   *url.Userinfo
	hosts  []string
	path   string
	query  url.Values
}

func splitURL(raw string) (redisURL, error) {
	var u redisURL
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		return u, errors.New("not a URL")
	}
	u.scheme = strings.ToLower(scheme)
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority, rest = rest[:i], rest[i:]
	} else {
		rest = ""
	}
	if i := strings.LastIndexByte(authority, '@'); i >= 0 {
		// Let url.Parse decode the userinfo's escapes.
		p, err := url.Parse("redis://" + authority[:i] + "@host")
		if err != nil {
			return u, fmt.Errorf("bad userinfo: %w", clean(err))
		}
		u.user, authority = p.User, authority[i+1:]
	}
	port := "6379"
	if strings.HasSuffix(u.scheme, "-sentinel") {
		port = "26379"
	}
	for h := range strings.SplitSeq(authority, ",") {
		if h == "" {
			if authority == "" {
				h = "localhost"
			} else {
				return u, errors.New("an empty host")
			}
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), port)
		}
		u.hosts = append(u.hosts, h)
	}
	p, err := url.Parse("redis://host" + rest)
	if err != nil {
		return u, clean(err)
	}
	u.path, u.query = p.Path, p.Query()
	return u, nil
}

func (u redisURL) rebuild(scheme string, user *url.Userinfo, host, path string, q url.Values) string {
	r := url.URL{Scheme: scheme, User: user, Host: host, Path: path, RawQuery: q.Encode()}
	return r.String()
}

// clean drops the URL from a url.Error, which would otherwise carry a
// password into logs.
func clean(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	return err
}
