package charttest

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"

	"github.com/prodapi/prodapi/config"
)

// newSettings are the variables of the values limits.*, changes.*,
// feed.*, clientAddress.* and auth.issuer.
var newSettings = []string{
	"PRODAPI_RATE_LIMIT", "PRODAPI_RATE_LIMIT_CLIENTS", "PRODAPI_RATE_LIMIT_ADDR", "PRODAPI_RATE_MISS_COST",
	"PRODAPI_CLIENT_MAX_LOADS", "PRODAPI_CLIENT_MAX_WAITS", "PRODAPI_CHANGES_MAX_POLLS", "PRODAPI_CHANGES_MAX_STREAMS",
	"PRODAPI_CHANGES_MAX_STREAM_AGE", "PRODAPI_CHANGES_RETAIN", "PRODAPI_MIN_POSITION_WAIT", "PRODAPI_FEED_POLL",
	"PRODAPI_FEED_RECONCILE", "PRODAPI_TRUSTED_PROXY_HEADER", "PRODAPI_TRUSTED_PROXIES", "PRODAPI_ISSUER",
}

// shown is what prodapi makes of the settings of the fair share, /changes,
// the feed and the edge: each as `prodapi config` shows it.
func shown(c config.Config) map[string]string {
	out := map[string]string{}
	for _, s := range config.Settings() {
		for _, name := range newSettings {
			if s.Name == name {
				out[name] = s.Shown(c)
			}
		}
	}
	return out
}

// Unset, none of them is written, so that prodapi's defaults hold; set,
// each becomes its variable, and prodapi reads what was meant.
func TestFairShareChangesAndEdgeValues(t *testing.T) {
	c := container(t, renderAndDecode(t, withSecret))
	for _, name := range newSettings {
		if hasEnv(c, name) {
			t.Errorf("%s written by default: prodapi's own default must hold", name)
		}
	}
	defaults, err := config.LoadFrom(config.Env{Getenv: func(k string) string {
		return map[string]string{"AUTH_SERVER_SHARED_SECRET": "a-chart-test-secret-of-32-bytes-or-more"}[k]
	}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(shown(defaults), shown(loadsInProdapi(t, c, one[*corev1.Secret](t, renderAndDecode(t, withSecret))))); diff != "" {
		t.Errorf("the chart's defaults are not prodapi's (-prodapi +chart):\n%s", diff)
	}

	objs := renderAndDecode(t, with(map[string]any{
		"auth": map[string]any{"sharedSecret": "a-chart-test-secret-of-32-bytes-or-more", "issuer": "Superdesk Auth Server"},
		"limits": map[string]any{"rate": "2000/m", "address": false, "missCost": 4, "clientMaxLoads": 0, "clientMaxWaits": 10,
			"clients": map[string]any{"mirror-a": "2000/s", "partner-b": "60/m", "internal": false}},
		"changes":       map[string]any{"maxPolls": 200, "maxStreams": 300, "maxStreamAge": "30m", "retain": "48h", "minPositionWait": "1.5s"},
		"feed":          map[string]any{"poll": "2s", "reconcile": "5m"},
		"clientAddress": map[string]any{"proxyHeader": "X-Forwarded-For", "trustedProxies": []any{"10.244.0.0/16", "192.0.2.7", "2001:db8::/32"}},
	}))
	c = container(t, objs)
	got := map[string]string{}
	for _, e := range c.Env {
		got[e.Name] = e.Value
	}
	want := map[string]string{
		"PRODAPI_RATE_LIMIT": "2000/m", "PRODAPI_RATE_LIMIT_ADDR": "off", "PRODAPI_RATE_MISS_COST": "4",
		"PRODAPI_RATE_LIMIT_CLIENTS": "internal=off,mirror-a=2000/s,partner-b=60/m",
		"PRODAPI_CLIENT_MAX_LOADS":   "0", "PRODAPI_CLIENT_MAX_WAITS": "10",
		"PRODAPI_CHANGES_MAX_POLLS": "200", "PRODAPI_CHANGES_MAX_STREAMS": "300", "PRODAPI_CHANGES_MAX_STREAM_AGE": "30m",
		"PRODAPI_CHANGES_RETAIN": "48h", "PRODAPI_MIN_POSITION_WAIT": "1.5s", "PRODAPI_FEED_POLL": "2s", "PRODAPI_FEED_RECONCILE": "5m",
		"PRODAPI_TRUSTED_PROXY_HEADER": "X-Forwarded-For", "PRODAPI_TRUSTED_PROXIES": "10.244.0.0/16,192.0.2.7,2001:db8::/32",
		"PRODAPI_ISSUER": "Superdesk Auth Server",
	}
	for _, name := range newSettings {
		if got[name] != want[name] {
			t.Errorf("%s = %q, want %q", name, got[name], want[name])
		}
	}
	cfg := loadsInProdapi(t, c, one[*corev1.Secret](t, objs))
	gotCfg := struct {
		Rate, Address                  string
		Clients                        map[string]string
		MissCost, MaxLoads, MaxWaits   int
		MaxPolls, MaxStreams           int
		StreamAge, Retain, MinPosition time.Duration
		Poll, Reconcile                time.Duration
		Header, Issuer                 string
		Proxies                        []netip.Prefix
	}{
		Rate: cfg.Limits.Rate.String(), Address: cfg.Limits.Address.String(), Clients: map[string]string{},
		MissCost: cfg.Limits.MissCost, MaxLoads: cfg.Limits.MaxLoads, MaxWaits: cfg.ClientMaxWaits,
		MaxPolls: cfg.ChangesMaxPolls, MaxStreams: cfg.ChangesMaxStreams,
		StreamAge: cfg.ChangesMaxStreamAge, Retain: cfg.ChangesRetain, MinPosition: cfg.MinPositionWait,
		Poll: cfg.FeedPoll, Reconcile: cfg.FeedReconcile,
		Header: cfg.TrustedProxyHeader, Issuer: cfg.Issuer, Proxies: cfg.TrustedProxies,
	}
	for name, r := range cfg.Limits.Clients {
		gotCfg.Clients[name] = r.String()
	}
	wantCfg := gotCfg
	wantCfg.Rate, wantCfg.Address = "2000/m", "off"
	wantCfg.Clients = map[string]string{"mirror-a": "2000/s", "partner-b": "60/m", "internal": "off"}
	wantCfg.MissCost, wantCfg.MaxLoads, wantCfg.MaxWaits, wantCfg.MaxPolls, wantCfg.MaxStreams = 4, 0, 10, 200, 300
	wantCfg.StreamAge, wantCfg.Retain, wantCfg.MinPosition = 30*time.Minute, 48*time.Hour, 1500*time.Millisecond
	wantCfg.Poll, wantCfg.Reconcile = 2*time.Second, 5*time.Minute
	wantCfg.Header, wantCfg.Issuer = "X-Forwarded-For", "Superdesk Auth Server"
	wantCfg.Proxies = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("2001:db8::/32")}
	if diff := cmp.Diff(wantCfg, gotCfg, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
		t.Errorf("prodapi reads the chart's values otherwise (-want +got):\n%s", diff)
	}
}

// YAML's bare off is a boolean to Helm: it means off, as the setting
// does.
func TestRateOffInYAML(t *testing.T) {
	v, err := chartutil.ReadValues([]byte("limits:\n  rate: off\n  address: off\n  clients:\n    internal: off\n    mirror-a: 2000/s\n"))
	if err != nil {
		t.Fatal(err)
	}
	if v["limits"].(map[string]any)["rate"] != false {
		t.Fatalf("YAML's off reads as %#v: the test no longer tests what it says", v["limits"].(map[string]any)["rate"])
	}
	c := container(t, renderAndDecode(t, with(v)))
	for name, want := range map[string]string{"PRODAPI_RATE_LIMIT": "off", "PRODAPI_RATE_LIMIT_ADDR": "off", "PRODAPI_RATE_LIMIT_CLIENTS": "internal=off,mirror-a=2000/s"} {
		if got := envVar(t, c, name).Value; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
}

// The values schema refuses what prodapi would refuse at start, and the
// chart what cannot work together.
func TestFairShareRefusals(t *testing.T) {
	checkRefusals(t, []refusal{
		{"a rate that is no rate", with(map[string]any{"limits": map[string]any{"rate": "fast"}}), "/limits/rate"},
		{"a rate per day", with(map[string]any{"limits": map[string]any{"address": "100/d"}}), "/limits/address"},
		{"a rate of true", with(map[string]any{"limits": map[string]any{"rate": true}}), "/limits/rate"},
		{"a client named with =", with(map[string]any{"limits": map[string]any{"clients": map[string]any{"a=b": "5/s"}}}), "'a=b' does not match"},
		{"a client without a rate", with(map[string]any{"limits": map[string]any{"clients": map[string]any{"mirror-a": ""}}}), "/limits/clients/mirror-a"},
		{"a negative miss cost", with(map[string]any{"limits": map[string]any{"missCost": -1}}), "/limits/missCost"},
		{"a cap of no long polls", with(map[string]any{"changes": map[string]any{"maxPolls": 0}}), "/changes/maxPolls"},
		{"an age that is no duration", with(map[string]any{"changes": map[string]any{"maxStreamAge": "an hour"}}), "/changes/maxStreamAge"},
		{"a misspelt feed value", with(map[string]any{"feed": map[string]any{"reconcilePeriod": "5m"}}), "reconcilePeriod"},
		{"a header that is no header name", with(map[string]any{"clientAddress": map[string]any{"proxyHeader": "X Forwarded For"}}), "/clientAddress/proxyHeader"},
		{"a proxy that is no address", with(map[string]any{"clientAddress": map[string]any{"proxyHeader": "X-Forwarded-For", "trustedProxies": []any{"ingress-nginx"}}}),
			"/clientAddress/trustedProxies/0"},
		{"trusted proxies without their header", with(map[string]any{"clientAddress": map[string]any{"trustedProxies": []any{"10.244.0.0/16"}}}),
			"clientAddress.trustedProxies is set without clientAddress.proxyHeader"},
	})
}

// With an Ingress or an HTTPRoute in front, NOTES.txt says how to give
// prodapi the client's address, until it is given.
func TestClientAddressNotes(t *testing.T) {
	ingress := map[string]any{"enabled": true, "hosts": []any{"news.example"}}
	route := map[string]any{"enabled": true, "parentRefs": []any{map[string]any{"name": "public"}}}
	const unset, anyPeer = "clientAddress.proxyHeader is not set", "believed from any peer"
	for _, tc := range []struct {
		name   string
		values map[string]any
		want   string // "": neither warning
	}{
		{"no proxy in front", withSecret, ""},
		{"an Ingress", with(map[string]any{"ingress": ingress}), unset},
		{"an HTTPRoute", with(map[string]any{"httpRoute": route}), unset},
		{"an Ingress, the header from env", with(map[string]any{"ingress": ingress,
			"env": map[string]any{"PRODAPI_TRUSTED_PROXY_HEADER": "X-Forwarded-For", "PRODAPI_TRUSTED_PROXIES": "10.0.0.0/8"}}), ""},
		{"an Ingress, the header and its proxies", with(map[string]any{"ingress": ingress,
			"clientAddress": map[string]any{"proxyHeader": "X-Forwarded-For", "trustedProxies": []any{"10.244.0.0/16"}}}), ""},
		{"the header without its proxies", with(map[string]any{"clientAddress": map[string]any{"proxyHeader": "X-Forwarded-For"}}), anyPeer},
	} {
		n := notes(t, tc.values)
		for _, w := range []string{unset, anyPeer} {
			if has := strings.Contains(n, w); has != (w == tc.want) {
				t.Errorf("%s: NOTES.txt says %q: %v, want %v:\n%s", tc.name, w, has, w == tc.want, n)
			}
		}
		if tc.want == unset {
			for _, w := range []string{"PRODAPI_RATE_LIMIT_ADDR", "clientAddress.trustedProxies", "X-Forwarded-For"} {
				if !strings.Contains(n, w) {
					t.Errorf("%s: NOTES.txt lacks %q:\n%s", tc.name, w, n)
				}
			}
		}
	}
}
