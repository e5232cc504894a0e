package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
)

func envOf(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

const secret = "0123456789abcdef0123456789abcdef-secret"

func TestDefaults(t *testing.T) {
	c, err := Load(envOf("AUTH_SERVER_SHARED_SECRET", secret))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"Port", c.Port, "5500"},
		{"URL", c.URL, "http://localhost:5500"},
		{"URLPrefix", c.URLPrefix, "prodapi"},
		{"MediaPrefix", c.MediaPrefix, "http://localhost:5500/prodapi/v1/assets"},
		{"AuthEnabled", c.AuthEnabled, true},
		{"AuthLeeway", c.AuthLeeway, time.Duration(0)},
		{"MongoURI", c.MongoURI, URL("mongodb://localhost/superdesk")},
		{"ElasticURL", c.ElasticURL, URL("http://localhost:9200")},
		{"ElasticIndex", c.ElasticIndex, "superdesk"},
		{"Region", c.ObjStore.Region, "us-east-1"},
		{"URLLifetime", c.ObjStore.URLLifetime, 15 * time.Minute},
		{"items list TTL", c.Cache.TTL("items", false), 10 * time.Second},
		{"items detail TTL", c.Cache.TTL("items", true), time.Minute},
		{"desks TTL", c.Cache.TTL("desks", false), 5 * time.Minute},
		{"Stale", c.Cache.Stale, 15 * time.Minute},
		{"NotFoundTTL", c.Cache.NotFoundTTL, 5 * time.Second},
		{"AssetTTL", c.Cache.AssetTTL, 10 * time.Minute},
		{"ShutdownGrace", c.ShutdownGrace, 10 * time.Second},
		{"MaxConns", c.MaxConns, 4096},
		{"ShutdownDelay", c.ShutdownDelay, time.Duration(0)},
		{"ReadyRequiresBackends", c.ReadyRequiresBackends, false},
		{"ChangesMaxStreams", c.ChangesMaxStreams, 1000},
		{"ChangesMaxPolls", c.ChangesMaxPolls, 1000},
		{"ChangesMaxStreamAge", c.ChangesMaxStreamAge, time.Hour},
		{"ClientMaxWaits", c.ClientMaxWaits, 50},
		{"ChangesWriteTimeout", c.ChangesWriteTimeout, 10 * time.Second},
		{"ChangesRetain", c.ChangesRetain, 24 * time.Hour},
		{"FeedPoll", c.FeedPoll, time.Second},
		{"Issuer", c.Issuer, ""},
		{"OpsAddr", c.OpsAddr, ":5502"},
		{"FeedReconcile", c.FeedReconcile, 10 * time.Minute},
		{"MinPositionWait", c.MinPositionWait, 2 * time.Second},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

// With purge or a watched sandbox, entries are invalidated as documents
// change: the defaults are long. An explicit TTL still wins.
func TestInvalidatedDefaults(t *testing.T) {
	for _, env := range [][]string{
		{"PRODAPI_ADMIN_ADDR", ":5501", "PRODAPI_ADMIN_SECRET", strings.Repeat("a", 32)},
		{"PRODAPI_SANDBOX", "/srv/newsroom"},
	} {
		c, err := Load(envOf(append([]string{"AUTH_SERVER_SHARED_SECRET", secret}, env...)...))
		if err != nil {
			t.Fatal(err)
		}
		if !c.Cache.Invalidated || c.Cache.TTL("items", true) != time.Hour || c.Cache.TTL("items", false) != 10*time.Minute ||
			c.Cache.TTL("desks", false) != time.Hour {
			t.Errorf("%v: invalidated %v, items %s/%s, desks %s", env, c.Cache.Invalidated,
				c.Cache.TTL("items", false), c.Cache.TTL("items", true), c.Cache.TTL("desks", false))
		}
		c, _ = Load(envOf(append([]string{"AUTH_SERVER_SHARED_SECRET", secret, "PRODAPI_CACHE_TTL", "30s"}, env...)...))
		if c.Cache.TTL("items", true) != 30*time.Second {
			t.Errorf("%v: an explicit TTL lost to the long default", env)
		}
	}
	// The platform: long only while a change feed runs, and an explicit
	// setting still wins.
	c, _ := Load(envOf("AUTH_SERVER_SHARED_SECRET", secret, "PRODAPI_CACHE_TTL_EVENTS", "7s"))
	if c.Cache.TTL("items", true) != time.Minute || c.Cache.FeedTTL("items", true) != time.Hour ||
		c.Cache.FeedTTL("items", false) != 10*time.Minute || c.Cache.FeedTTL("users", false) != time.Hour ||
		c.Cache.FeedTTL("events", true) != 7*time.Second {
		t.Errorf("feed TTLs: items %s/%s, users %s, events %s", c.Cache.FeedTTL("items", false), c.Cache.FeedTTL("items", true),
			c.Cache.FeedTTL("users", false), c.Cache.FeedTTL("events", true))
	}
	c, _ = Load(envOf("AUTH_SERVER_SHARED_SECRET", secret, "PRODAPI_CACHE_TTL", "30s"))
	if c.Cache.FeedTTL("items", true) != 30*time.Second {
		t.Errorf("an explicit TTL lost to the feed's default: %s", c.Cache.FeedTTL("items", true))
	}
	c, _ = Load(envOf("AUTH_SERVER_SHARED_SECRET", secret, "PRODAPI_SANDBOX", "sample"))
	if c.Cache.Invalidated || c.Cache.TTL("items", true) != time.Minute {
		t.Error("the embedded sample, which never changes, took the long defaults")
	}
}

func TestOverrides(t *testing.T) {
	c, err := Load(envOf(
		"PORT", "8080", "PRODAPI_URL_PREFIX", "/api/", "PRODAPI_URL", "https://news.example/",
		"PRODAPI_AUTH_ENABLED", "Off", "PRODAPI_CACHE_TTL", "30", "PRODAPI_CACHE_TTL_ITEMS", "5s",
		"OBJSTORE_S3_SUBFOLDER", "/media/", "AUTH_LEEWAY", "30s", "PRODAPI_CACHE_LOCAL_BYTES", "-1",
		"PRODAPI_MAX_CONNS", "100", "PRODAPI_TRUSTED_PROXY_HEADER", "x-forwarded-for",
		"PRODAPI_SHUTDOWN_DELAY", "5s", "PRODAPI_READY_REQUIRES_BACKENDS", "true",
		"PRODAPI_CHANGES_MAX_STREAMS", "20", "PRODAPI_CHANGES_WRITE_TIMEOUT", "2s", "PRODAPI_FEED_RECONCILE", "1m",
		"PRODAPI_CHANGES_MAX_POLLS", "30", "PRODAPI_CHANGES_MAX_STREAM_AGE", "10m", "PRODAPI_CLIENT_MAX_WAITS", "0",
		"PRODAPI_ISSUER", "Superdesk Auth Server", "PRODAPI_OPS_ADDR", "127.0.0.1:9102",
		"PRODAPI_TRUSTED_PROXIES", "10.0.0.0/8, 192.0.2.7 2001:db8::/32,172.16.5.4/12",
	))
	if err != nil {
		t.Fatal(err)
	}
	if c.MediaPrefix != "https://news.example/api/v1/assets" || c.URLPrefix != "api" || c.AuthEnabled {
		t.Errorf("got MediaPrefix %q URLPrefix %q AuthEnabled %v", c.MediaPrefix, c.URLPrefix, c.AuthEnabled)
	}
	if c.Cache.TTL("items", true) != 5*time.Second || c.Cache.TTL("desks", true) != 30*time.Second || c.Cache.TTL("users", false) != 30*time.Second {
		t.Errorf("TTLs: items %v desks %v users %v", c.Cache.TTL("items", true), c.Cache.TTL("desks", true), c.Cache.TTL("users", false))
	}
	if c.MaxConns != 100 {
		t.Errorf("MaxConns %d, want 100", c.MaxConns)
	}
	if c.ChangesMaxStreams != 20 || c.ChangesWriteTimeout != 2*time.Second {
		t.Errorf("ChangesMaxStreams %d, ChangesWriteTimeout %s", c.ChangesMaxStreams, c.ChangesWriteTimeout)
	}
	if c.ChangesMaxPolls != 30 || c.ChangesMaxStreamAge != 10*time.Minute || c.ClientMaxWaits != 0 {
		t.Errorf("ChangesMaxPolls %d, ChangesMaxStreamAge %s, ClientMaxWaits %d", c.ChangesMaxPolls, c.ChangesMaxStreamAge, c.ClientMaxWaits)
	}
	if c.FeedReconcile != time.Minute {
		t.Errorf("FeedReconcile %s, want 1m", c.FeedReconcile)
	}
	if c.TrustedProxyHeader != "x-forwarded-for" {
		t.Errorf("TrustedProxyHeader %q", c.TrustedProxyHeader)
	}
	wantRanges := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"),
		netip.MustParsePrefix("2001:db8::/32"), netip.MustParsePrefix("172.16.0.0/12")}
	if diff := cmp.Diff(wantRanges, c.TrustedProxies, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("TrustedProxies (-want +got):\n%s", diff)
	}
	if len(c.Warnings) != 0 {
		t.Errorf("warnings with the proxies' ranges: %q", c.Warnings)
	}
	if c.Issuer != "Superdesk Auth Server" || c.OpsAddr != "127.0.0.1:9102" {
		t.Errorf("Issuer %q, OpsAddr %q", c.Issuer, c.OpsAddr)
	}
	if c.ShutdownDelay != 5*time.Second || !c.ReadyRequiresBackends {
		t.Errorf("ShutdownDelay %s, ReadyRequiresBackends %v; want 5s, true", c.ShutdownDelay, c.ReadyRequiresBackends)
	}
	if c.ObjStore.Subfolder != "media" || c.AuthLeeway != 30*time.Second || c.Cache.LocalBytes != -1 {
		t.Errorf("subfolder %q leeway %v", c.ObjStore.Subfolder, c.AuthLeeway)
	}
	if c, _ := Load(envOf("AUTH_SERVER_SHARED_SECRET", secret, "OBJSTORE_S3_SUBFOLDER", "FALSE")); c.ObjStore.Subfolder != "" {
		t.Errorf(`subfolder "FALSE" = %q, want none`, c.ObjStore.Subfolder)
	}
}

// Every problem is reported at once, each naming its variable.
func TestAllProblemsAtOnce(t *testing.T) {
	_, err := Load(envOf(
		"PORT", "http", "PRODAPI_AUTH_ENABLED", "yes please", "PRODAPI_CACHE_TTL", "soon",
		"MONGO_URI", "postgres://x", "ELASTICSEARCH_URL", "localhost:9200", "REDIS_URL", "memcache://x",
		"AUTH_LEEWAY", "5m", "PRODAPI_CACHE_STALE", "-1s", "PRODAPI_URL_PREFIX", "a b",
		"OBJSTORE_CONTAINER_NAME", "media", "PRODAPI_ASSET_URL_LIFETIME", "5m", "PRODAPI_MAX_CONNS", "0",
		"PRODAPI_TRUSTED_PROXY_HEADER", "X-Forwarded-For: 1.2.3.4", "PRODAPI_CURSOR_SECRET", "short",
		"PRODAPI_SHUTDOWN_DELAY", "-5s", "PRODAPI_READY_REQUIRES_BACKENDS", "perhaps",
		"PRODAPI_CHANGES_MAX_STREAMS", "0", "PRODAPI_CHANGES_WRITE_TIMEOUT", "0s",
		"PRODAPI_CHANGES_MAX_POLLS", "0", "PRODAPI_CHANGES_MAX_STREAM_AGE", "30s", "PRODAPI_CLIENT_MAX_WAITS", "-2",
		"PRODAPI_CHANGES_RETAIN", "30s", "PRODAPI_FEED_POLL", "1ms", "PRODAPI_FEED_RECONCILE", "10ms", "PRODAPI_MIN_POSITION_WAIT", "0s", "PRODAPI_OPS_ADDR", "5502",
		"PRODAPI_TRUSTED_PROXIES", "10.0.0.0/8,10.0.0.0/33,proxy.example,::ffff:10.0.0.0/104",
	))
	if err == nil {
		t.Fatal("no error")
	}
	for _, name := range []string{"PORT", "PRODAPI_AUTH_ENABLED", "PRODAPI_CACHE_TTL", "MONGO_URI", "ELASTICSEARCH_URL",
		"REDIS_URL", "AUTH_LEEWAY", "PRODAPI_CACHE_STALE", "PRODAPI_URL_PREFIX", "PRODAPI_CACHE_TTL_ASSETS", "PRODAPI_MAX_CONNS",
		"PRODAPI_TRUSTED_PROXY_HEADER", "PRODAPI_CURSOR_SECRET", "PRODAPI_SHUTDOWN_DELAY", "PRODAPI_READY_REQUIRES_BACKENDS",
		"PRODAPI_CHANGES_MAX_STREAMS", "PRODAPI_CHANGES_WRITE_TIMEOUT", "PRODAPI_CHANGES_MAX_POLLS", "PRODAPI_CHANGES_MAX_STREAM_AGE", "PRODAPI_CLIENT_MAX_WAITS", "PRODAPI_CHANGES_RETAIN", "PRODAPI_FEED_POLL", "PRODAPI_FEED_RECONCILE", "PRODAPI_MIN_POSITION_WAIT", "PRODAPI_OPS_ADDR",
		`PRODAPI_TRUSTED_PROXIES: "10.0.0.0/33"`, `PRODAPI_TRUSTED_PROXIES: "proxy.example"`, `PRODAPI_TRUSTED_PROXIES: "::ffff:10.0.0.0/104"`} {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("error does not mention %s:\n%v", name, err)
		}
	}
}

func TestRefusesToStartWithoutSecret(t *testing.T) {
	if _, err := Load(envOf()); err == nil || !strings.Contains(err.Error(), "AUTH_SERVER_SHARED_SECRET is empty") {
		t.Errorf("auth on, no secret: %v", err)
	}
	if _, err := Load(envOf("PRODAPI_AUTH_ENABLED", "false")); err != nil {
		t.Errorf("auth off, no secret: %v", err)
	}
}

func TestStrtobool(t *testing.T) {
	for v, want := range map[string]bool{"y": true, "YES": true, "t": true, "True": true, "on": true, "1": true,
		"n": false, "No": false, "f": false, "FALSE": false, "off": false, "0": false} {
		c, err := Load(envOf("PRODAPI_AUTH_ENABLED", v, "AUTH_SERVER_SHARED_SECRET", secret))
		if err != nil || c.AuthEnabled != want {
			t.Errorf("PRODAPI_AUTH_ENABLED=%q: %v, %v; want %v", v, c.AuthEnabled, err, want)
		}
	}
}

// Secrets never print, whatever prints them.
func TestSecretsNeverPrint(t *testing.T) {
	c, err := Load(envOf("AUTH_SERVER_SHARED_SECRET", secret, "OBJSTORE_SECRET_ACCESS_KEY", "s3-secret-value",
		"OBJSTORE_ACCESS_KEY_ID", "AKIAEXAMPLEKEY", "MONGO_URI", "mongodb://admin:mongo-password@db:27017/superdesk",
		"REDIS_URL", "redis://:redis-password@cache:6379/0", "ELASTICSEARCH_URL", "https://elastic:es-password@es:9200",
		"PRODAPI_CURSOR_SECRET", "cursor-secret-value-of-thirty-two-bytes"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "config", c, "secret", c.Secret)
	out := buf.String() + fmt.Sprint(c.Secret, c.MongoURI, c.Cache.RedisURL, c.ElasticURL, c.ObjStore.SecretAccessKey)
	for _, leak := range []string{secret, "s3-secret-value", "AKIAEXAMPLEKEY", "mongo-password", "redis-password", "es-password", "cursor-secret-value"} {
		if strings.Contains(out, leak) {
			t.Errorf("%q printed:\n%s", leak, out)
		}
	}
	if !strings.Contains(out, "db:27017/superdesk") || !strings.Contains(out, "[redacted]") {
		t.Errorf("redacted config lost its useful parts:\n%s", out)
	}
}

// Cursors are sealed with PRODAPI_CURSOR_SECRET, else with the token
// secret (an install with auth off may have neither).
func TestCursorKey(t *testing.T) {
	own := strings.Repeat("c", 32)
	for _, tc := range []struct {
		env  []string
		want string
		ok   bool
	}{
		{[]string{"AUTH_SERVER_SHARED_SECRET", secret, "PRODAPI_CURSOR_SECRET", own}, own, true},
		{[]string{"AUTH_SERVER_SHARED_SECRET", secret}, secret, true},
		{[]string{"PRODAPI_AUTH_ENABLED", "false", "PRODAPI_CURSOR_SECRET", own}, own, true},
		{[]string{"PRODAPI_AUTH_ENABLED", "false"}, "", false},
	} {
		c, err := Load(envOf(tc.env...))
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := c.CursorKey(); string(got) != tc.want || ok != tc.ok {
			t.Errorf("%v: CursorKey() = %q, %v; want %q, %v", tc.env, got, ok, tc.want, tc.ok)
		}
	}
}

// TestResourceNamesCoverResources keeps the resources that take a TTL
// setting in step with the resources served: config may not import
// sources (the dependency-direction test), so the list is written out,
// and this test, which may, compares it with the Resource table.
func TestResourceNamesCoverResources(t *testing.T) {
	var want []string
	for _, r := range sources.Resources() {
		want = append(want, r.Name)
	}
	if diff := cmp.Diff(want, ResourceNames); diff != "" {
		t.Errorf("ResourceNames (-sources.Resources() +config):\n%s", diff)
	}
}

func TestAccessLogHits(t *testing.T) {
	for v, want := range map[string]float64{"": 1, "1": 1, "0.01": 0.01, "0": 0} {
		c, err := Load(envOf("AUTH_SERVER_SHARED_SECRET", secret, "PRODAPI_ACCESS_LOG_HITS", v))
		if err != nil || c.AccessLogHits != want {
			t.Errorf("PRODAPI_ACCESS_LOG_HITS=%q: %v, %v; want %v", v, c.AccessLogHits, err, want)
		}
	}
	for _, v := range []string{"2", "-0.5", "half", "NaN"} {
		if _, err := Load(envOf("AUTH_SERVER_SHARED_SECRET", secret, "PRODAPI_ACCESS_LOG_HITS", v)); err == nil || !strings.Contains(err.Error(), "PRODAPI_ACCESS_LOG_HITS") {
			t.Errorf("PRODAPI_ACCESS_LOG_HITS=%q: %v, want an error naming it", v, err)
		}
	}
}

// Listening moves what is derived from the port to the one listened on,
// and leaves what was set alone.
func TestListening(t *testing.T) {
	tcp := func(ip string, port int) net.Addr { return &net.TCPAddr{IP: net.ParseIP(ip), Port: port} }
	for _, tc := range []struct {
		name             string
		env              []string
		addr             net.Addr
		port, url, media string
	}{
		{"-addr :8080", nil, tcp("::", 8080), "8080", "http://localhost:8080", "http://localhost:8080/prodapi/v1/assets"},
		{"-addr 127.0.0.1:0", nil, tcp("127.0.0.1", 41234), "41234", "http://localhost:41234", "http://localhost:41234/prodapi/v1/assets"},
		{"-addr [::1]:8080", nil, tcp("::1", 8080), "8080", "http://localhost:8080", "http://localhost:8080/prodapi/v1/assets"},
		{"an address of the machine's", nil, tcp("192.0.2.7", 8080), "8080", "http://192.0.2.7:8080", "http://192.0.2.7:8080/prodapi/v1/assets"},
		{"an IPv6 address of the machine's", nil, tcp("2001:db8::7", 8080), "8080", "http://[2001:db8::7]:8080", "http://[2001:db8::7]:8080/prodapi/v1/assets"},
		{"another prefix", []string{"PRODAPI_URL_PREFIX", "api"}, tcp("::", 8080), "8080", "http://localhost:8080", "http://localhost:8080/api/v1/assets"},
		{"PRODAPI_URL set", []string{"PRODAPI_URL", "https://news.example"}, tcp("::", 8080), "8080", "https://news.example",
			"https://news.example/prodapi/v1/assets"},
		{"MEDIA_PREFIX set", []string{"MEDIA_PREFIX", "https://cdn.example/media"}, tcp("::", 8080), "8080", "http://localhost:8080",
			"https://cdn.example/media"},
		{"not TCP", nil, &net.UnixAddr{Name: "/run/prodapi.sock", Net: "unix"}, "5500", "http://localhost:5500",
			"http://localhost:5500/prodapi/v1/assets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := Load(envOf(append([]string{"AUTH_SERVER_SHARED_SECRET", secret}, tc.env...)...))
			if err != nil {
				t.Fatal(err)
			}
			c = c.Listening(tc.addr)
			if c.Port != tc.port || c.URL != tc.url || c.MediaPrefix != tc.media {
				t.Errorf("port %s, URL %s, media %s; want %s, %s, %s", c.Port, c.URL, c.MediaPrefix, tc.port, tc.url, tc.media)
			}
		})
	}
}

// PRODAPI_TOKEN_URL is an http(s) URL whose origin the reference page's
// policy can name; anything else stops the start.
func TestTokenURL(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"", true},
		{"https://superdesk.example/api/auth_server/token", true},
		{"http://127.0.0.1:5000/api/auth_server/token", true},
		{"https://[::1]:5000/api/auth_server/token", true},
		{"/api/auth_server/token", false},
		{"superdesk.example/api/auth_server/token", false},
		{"ftp://superdesk.example/token", false},
		{"https://client:secret@superdesk.example/token", false},
		{"https://super;desk.example/token", false},
		{"https://superdesk.example:99999999/token", false},
	} {
		c, err := Load(envOf("AUTH_SERVER_SHARED_SECRET", secret, "PRODAPI_TOKEN_URL", tc.url))
		if got := err == nil; got != tc.ok {
			t.Errorf("PRODAPI_TOKEN_URL=%q: error %v, want ok %v", tc.url, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "PRODAPI_TOKEN_URL") {
			t.Errorf("PRODAPI_TOKEN_URL=%q: the error does not name it: %v", tc.url, err)
		}
		if err == nil && c.TokenURL != tc.url {
			t.Errorf("PRODAPI_TOKEN_URL=%q: TokenURL %q", tc.url, c.TokenURL)
		}
	}
}

// A proxy header without the proxies' ranges still starts (the header is
// believed from any peer, as before the ranges existed), with a warning
// that says what that lets a client do.
func TestProxyHeaderWithoutRangesWarns(t *testing.T) {
	c, err := Load(envOf("AUTH_SERVER_SHARED_SECRET", secret, "PRODAPI_TRUSTED_PROXY_HEADER", "X-Forwarded-For"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Warnings) != 1 || !strings.Contains(c.Warnings[0], "PRODAPI_TRUSTED_PROXY_HEADER is set without PRODAPI_TRUSTED_PROXIES") {
		t.Errorf("warnings %q", c.Warnings)
	}
	c, _ = Load(envOf("AUTH_SERVER_SHARED_SECRET", secret))
	if len(c.Warnings) != 0 {
		t.Errorf("warnings without a header: %q", c.Warnings)
	}
}
