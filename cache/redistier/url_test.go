package redistier

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
)

// client is what a test checks of a client NewClient built.
type client struct {
	Kind           string
	Addrs          []string
	DB             int
	User, Password string
	Master         string
	SentinelPass   string
	TLS            bool
	ContextTimeout bool
}

func describe(c redis.UniversalClient) client {
	switch c := c.(type) {
	case *redis.ClusterClient:
		o := c.Options()
		return client{Kind: "cluster", Addrs: o.Addrs, User: o.Username, Password: o.Password, TLS: o.TLSConfig != nil, ContextTimeout: o.ContextTimeoutEnabled}
	case *redis.Client:
		o := c.Options()
		return client{Kind: "standalone", Addrs: []string{o.Addr}, DB: o.DB, User: o.Username, Password: o.Password, TLS: o.TLSConfig != nil, ContextTimeout: o.ContextTimeoutEnabled}
	}
	return client{Kind: "?"}
}

func TestNewClient(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want client
	}{
		{"redis://localhost", client{Kind: "standalone", Addrs: []string{"localhost:6379"}, ContextTimeout: true}},
		{"redis://:s3cret@cache.internal:6380/2?dial_timeout=1s", client{Kind: "standalone", Addrs: []string{"cache.internal:6380"}, DB: 2, Password: "s3cret", ContextTimeout: true}},
		{"rediss://user:p%40ss@cache.internal", client{Kind: "standalone", Addrs: []string{"cache.internal:6379"}, User: "user", Password: "p@ss", TLS: true, ContextTimeout: true}},
		{"redis+cluster://:pw@10.0.0.1:7000,10.0.0.2:7001?addr=10.0.0.3:7002", client{Kind: "cluster",
			Addrs: []string{"10.0.0.1:7000", "10.0.0.2:7001", "10.0.0.3:7002"}, Password: "pw", ContextTimeout: true}},
		{"rediss+cluster://node1,node2", client{Kind: "cluster", Addrs: []string{"node1:6379", "node2:6379"}, TLS: true, ContextTimeout: true}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			c, err := NewClient(tc.url)
			if err != nil {
				t.Fatalf("NewClient: %v", err)
			}
			defer c.Close()
			if diff := cmp.Diff(tc.want, describe(c)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewClientSentinel(t *testing.T) {
	type failover struct {
		Master, User, Password, SentinelUser, SentinelPassword string
		Sentinels                                              []string
		DB                                                     int
		TLS, ContextTimeout                                    bool
	}
	for _, tc := range []struct {
		url  string
		want failover
	}{
		{"redis-sentinel://:pw@s1:26379,s2/mymaster/3",
			failover{Master: "mymaster", Password: "pw", Sentinels: []string{"s1:26379", "s2:26379"}, DB: 3, ContextTimeout: true}},
		{"rediss-sentinel://app:pw@s1/mymaster?sentinel_username=sen&sentinel_password=spw&dial_timeout=2s",
			failover{Master: "mymaster", User: "app", Password: "pw", SentinelUser: "sen", SentinelPassword: "spw",
				Sentinels: []string{"s1:26379"}, TLS: true, ContextTimeout: true}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			opts, err := redisOptions(tc.url)
			if err != nil {
				t.Fatalf("redisOptions: %v", err)
			}
			o, ok := opts.(*redis.FailoverOptions)
			if !ok {
				t.Fatalf("options %T, want failover", opts)
			}
			got := failover{o.MasterName, o.Username, o.Password, o.SentinelUsername, o.SentinelPassword,
				o.SentinelAddrs, o.DB, o.TLSConfig != nil, o.ContextTimeoutEnabled}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			c, err := NewClient(tc.url)
			if err != nil {
				t.Fatalf("NewClient: %v", err)
			}
			c.Close()
		})
	}
}

func TestNewClientRefuses(t *testing.T) {
	for _, raw := range []string{
		"http://localhost",
		"localhost:6379",
		"redis://a:1,b:2",
		"redis://:pw@host:notaport",
		"redis://host/1/2",
		"redis+cluster://host/1",
		"redis-sentinel://host",
		"redis-sentinel://host/master/1/extra",
		"redis-sentinel://host/master?master_name=other",
		"redis://:hunter2@host?bogus_option=1",
		// go-redis's master client panics on these two.
		"redis-sentinel://host/master?route_randomly=true",
		"redis-sentinel://host/master?route_by_latency=true",
		// Writes to a replica fail: a shared tier that never fills.
		"redis-sentinel://host/master?replica_only=true",
		"redis+cluster://host?cluster_state_reload_interval=never",
	} {
		t.Run(raw, func(t *testing.T) {
			c, err := NewClient(raw)
			if err == nil {
				c.Close()
				t.Fatal("accepted")
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q repeats the password", err)
			}
		})
	}
}

// A Cluster client re-reads the slots often: go-redis does it on MOVED,
// never on a refused connection, so after a failover only this bounds how
// long the dead master keeps its slots (TestRealRedisClusterFailover).
func TestNewClientClusterReload(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want time.Duration
	}{
		{"redis+cluster://a:7000,b:7001", DefaultClusterReload},
		{"redis+cluster://a:7000?cluster_state_reload_interval=250ms&dial_timeout=1s", 250 * time.Millisecond},
	} {
		opts, err := redisOptions(tc.url)
		if err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		o := opts.(*redis.ClusterOptions)
		if o.ClusterStateReloadInterval != tc.want {
			t.Errorf("%s: reload every %s, want %s", tc.url, o.ClusterStateReloadInterval, tc.want)
		}
		if o.ReadOnly || o.RouteByLatency || o.RouteRandomly {
			t.Errorf("%s: reads may go to replicas (ReadOnly %v, RouteByLatency %v, RouteRandomly %v): a replica may lag its master", tc.url, o.ReadOnly, o.RouteByLatency, o.RouteRandomly)
		}
	}
	for _, bad := range []string{"0s", "-1s", "soon"} {
		if _, err := redisOptions("redis+cluster://a:7000?cluster_state_reload_interval=" + bad); err == nil {
			t.Errorf("cluster_state_reload_interval=%s accepted", bad)
		}
	}
}

// RESP2 unless the URL asks for another protocol, on every kind of URL.
func TestRedisProtocol(t *testing.T) {
	for url, want := range map[string]int{
		"redis://127.0.0.1:6379":                        2,
		"redis://127.0.0.1:6379/0?protocol=3":           3,
		"redis+cluster://127.0.0.1:7000,127.0.0.1:7001": 2,
		"redis+cluster://127.0.0.1:7000?protocol=3":     3,
		"redis-sentinel://127.0.0.1:26379/mymaster":     2,
	} {
		opts, err := redisOptions(url)
		if err != nil {
			t.Fatalf("%s: %v", url, err)
		}
		var got int
		switch o := opts.(type) {
		case *redis.Options:
			got = o.Protocol
		case *redis.ClusterOptions:
			got = o.Protocol
		case *redis.FailoverOptions:
			got = o.Protocol
		}
		if got != want {
			t.Errorf("%s: protocol %d, want %d", url, got, want)
		}
	}
}
