package config

import (
	gocmp "cmp"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// The table is the one list of variables: Load reads exactly the
// variables it names, no more (a setting help would not show) and no
// fewer (a row for nothing).
func TestLoadReadsExactlyTheSettings(t *testing.T) {
	want := map[string]bool{}
	for _, s := range Settings() {
		if s.PerResource {
			for _, r := range ResourceNames {
				want[perResourcePrefix+strings.ToUpper(r)] = true
			}
			continue
		}
		want[s.Name] = true
	}
	read := map[string]bool{}
	// PRODAPI_CACHE_TTL set and unset take different paths.
	for _, all := range []string{"", "30s"} {
		_, _ = Load(func(k string) string {
			read[k] = true
			return envOf("AUTH_SERVER_SHARED_SECRET", secret, "PRODAPI_CACHE_TTL", all)(k)
		})
	}
	for name := range read {
		if !want[name] {
			t.Errorf("Load reads %s, which is not in the settings table", name)
		}
	}
	for name := range want {
		if !read[name] {
			t.Errorf("the settings table names %s, which Load never reads", name)
		}
	}
	for _, s := range Settings() {
		if s.Help == "" || strings.Contains(s.Help, "\n") || s.Value == nil {
			t.Errorf("%s: a setting needs a one-line help and a Value", s.Name)
		}
	}
}

func TestUnknownVariablesStopTheStart(t *testing.T) {
	load := func(names ...string) error {
		env := map[string]string{"AUTH_SERVER_SHARED_SECRET": secret}
		for _, n := range names {
			env[n] = "3s"
		}
		_, err := LoadFrom(Env{Getenv: func(k string) string { return env[k] }, Names: slices.Collect(maps.Keys(env)), Resources: ResourceNames})
		return err
	}
	for _, tc := range []struct{ name, want string }{
		{"PRODAPI_CACHE_TTL_ITEM", "PRODAPI_CACHE_TTL_ITEM is not a setting: did you mean PRODAPI_CACHE_TTL_ITEMS?"},
		{"PRODAPI_CACHE_TTL_DESK", "did you mean PRODAPI_CACHE_TTL_DESKS?"},
		{"PRODAPI_CAHCE_STALE", "did you mean PRODAPI_CACHE_STALE?"},
		{"PRODAPI_BACKEND_TIMEOUTS", "did you mean PRODAPI_BACKEND_TIMEOUT?"},
		{"PRODAPI_CACHE_TTL_NEWSLETTERS", "PRODAPI_CACHE_TTL_NEWSLETTERS is not a setting (resources: ITEMS, DESKS, ASSIGNMENTS, EVENTS, EVENTS_HISTORY, EVENTS_FILES, PLANNING, CONTACTS, USERS)"},
		{"PRODAPI_SOMETHING_ELSE_ENTIRELY", "PRODAPI_SOMETHING_ELSE_ENTIRELY is not a setting (prodapi help lists them)"},
	} {
		err := load(tc.name)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// Every problem at once, in a stable order.
	if err := load("PRODAPI_CACHE_TTL_ITEM", "PRODAPI_PORT"); err == nil ||
		!strings.Contains(err.Error(), "PRODAPI_CACHE_TTL_ITEM is") || !strings.Contains(err.Error(), "PRODAPI_PORT is") {
		t.Errorf("two unknown variables: %v", err)
	}
	// Our settings, other programs' variables and the test suites' are fine.
	if err := load("PRODAPI_CACHE_TTL_ITEMS", "PRODAPI_CACHE_TTL_ASSETS", "HOME", "PORTAL", "PRODAPI_TEST_RSS",
		"PRODAPI_INTEGRATION", "PRODAPI_REQUIRE_REAL"); err != nil {
		t.Errorf("known variables: %v", err)
	}
	// The per-resource names come from the resources given.
	if _, err := LoadFrom(Env{Getenv: envOf("AUTH_SERVER_SHARED_SECRET", secret, "PRODAPI_CACHE_TTL_WIDGETS", "3s"),
		Names: []string{"AUTH_SERVER_SHARED_SECRET", "PRODAPI_CACHE_TTL_WIDGETS"}, Resources: []string{"widgets"}}); err != nil {
		t.Errorf("a resource given: %v", err)
	}
	// Load, given no names, cannot look.
	if _, err := Load(envOf("AUTH_SERVER_SHARED_SECRET", secret, "PRODAPI_CACHE_TTL_ITEM", "3s")); err != nil {
		t.Errorf("Load: %v", err)
	}
}

func TestContradictionsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"asset TTL above the URL lifetime", []string{"PRODAPI_CACHE_TTL_ASSETS", "20m"},
			"PRODAPI_CACHE_TTL_ASSETS (20m) must be shorter than PRODAPI_ASSET_URL_LIFETIME (15m)"},
		{"asset TTL above a shorter lifetime, object storage on", []string{"PRODAPI_ASSET_URL_LIFETIME", "5m", "OBJSTORE_CONTAINER_NAME", "media"},
			"PRODAPI_CACHE_TTL_ASSETS (10m) must be shorter than PRODAPI_ASSET_URL_LIFETIME (5m)"},
		{"header timeout above the read timeout", []string{"PRODAPI_READ_HEADER_TIMEOUT", "20s"},
			"PRODAPI_READ_HEADER_TIMEOUT (20s) is longer than PRODAPI_READ_TIMEOUT (10s)"},
		{"write timeout within a load", []string{"PRODAPI_BACKEND_TIMEOUT", "20s"},
			"PRODAPI_WRITE_TIMEOUT (30s) must be longer than twice PRODAPI_BACKEND_TIMEOUT (20s)"},
		{"sandbox latency without a sandbox", []string{"PRODAPI_SANDBOX_LATENCY", "1s"},
			"PRODAPI_SANDBOX_LATENCY is set without PRODAPI_SANDBOX"},
		{"admin listener without a secret", []string{"PRODAPI_ADMIN_ADDR", "127.0.0.1:5501"},
			"PRODAPI_ADMIN_SECRET is shorter than 32 bytes"},
		{"admin listener with a short secret", []string{"PRODAPI_ADMIN_ADDR", "127.0.0.1:5501", "PRODAPI_ADMIN_SECRET", "short"},
			"PRODAPI_ADMIN_SECRET is shorter than 32 bytes"},
		{"admin secret without a listener", []string{"PRODAPI_ADMIN_SECRET", strings.Repeat("a", 32)},
			"PRODAPI_ADMIN_SECRET is set without PRODAPI_ADMIN_ADDR"},
		{"admin secret equal to the token secret", []string{"PRODAPI_ADMIN_ADDR", ":5501", "PRODAPI_ADMIN_SECRET", secret},
			"PRODAPI_ADMIN_SECRET must differ from AUTH_SERVER_SHARED_SECRET"},
		{"proxies without a header", []string{"PRODAPI_TRUSTED_PROXIES", "10.0.0.0/8"},
			"PRODAPI_TRUSTED_PROXIES is set without PRODAPI_TRUSTED_PROXY_HEADER"},
		{"the admin listener on the operator listener's address", []string{"PRODAPI_ADMIN_ADDR", ":5502", "PRODAPI_ADMIN_SECRET", strings.Repeat("a", 32)},
			"PRODAPI_ADMIN_ADDR and PRODAPI_OPS_ADDR are both :5502"},
	} {
		_, err := Load(envOf(append([]string{"AUTH_SERVER_SHARED_SECRET", secret}, tc.env...)...))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	// Each at once.
	_, err := Load(envOf("AUTH_SERVER_SHARED_SECRET", secret, "PRODAPI_CACHE_TTL_ASSETS", "20m", "PRODAPI_READ_HEADER_TIMEOUT", "20s",
		"PRODAPI_BACKEND_TIMEOUT", "20s", "PRODAPI_SANDBOX_LATENCY", "1s"))
	if err == nil || strings.Count(err.Error(), "\n") != 3 {
		t.Errorf("four contradictions, not one line each: %v", err)
	}
	// The edges that hold together, and the zeros that mean "none".
	for _, env := range [][]string{
		{"PRODAPI_CACHE_TTL_ASSETS", "14m59s"},
		{"PRODAPI_READ_HEADER_TIMEOUT", "10s"},
		{"PRODAPI_READ_TIMEOUT", "0", "PRODAPI_READ_HEADER_TIMEOUT", "1m"},
		{"PRODAPI_WRITE_TIMEOUT", "0", "PRODAPI_BACKEND_TIMEOUT", "1m"},
		{"PRODAPI_WRITE_TIMEOUT", "11s", "PRODAPI_BACKEND_TIMEOUT", "5s"},
		{"PRODAPI_SANDBOX", "sample", "PRODAPI_SANDBOX_LATENCY", "1s"},
		{"PRODAPI_ADMIN_ADDR", "127.0.0.1:5501", "PRODAPI_ADMIN_SECRET", strings.Repeat("a", 32)},
		{"PRODAPI_ADMIN_ADDR", "127.0.0.1:0", "PRODAPI_ADMIN_SECRET", strings.Repeat("a", 32), "PRODAPI_OPS_ADDR", "127.0.0.1:0"},
	} {
		if _, err := Load(envOf(append([]string{"AUTH_SERVER_SHARED_SECRET", secret}, env...)...)); err != nil {
			t.Errorf("%v: %v", env, err)
		}
	}
}

func TestDurationFormat(t *testing.T) {
	for d, want := range map[time.Duration]string{0: "0s", 5 * time.Second: "5s", 1500 * time.Millisecond: "1.5s",
		time.Minute: "1m", 15 * time.Minute: "15m", 90 * time.Second: "1m30s", time.Hour: "1h", 168 * time.Hour: "168h",
		time.Hour + time.Minute: "1h1m", time.Hour + time.Second: "1h0m1s"} {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"", "abc", 3},
		{"REDIS_URL", "REDIS_URL", 0},
		{"REDIS_ULR", "REDIS_URL", 1}, // a swap is one edit (Levenshtein: two)
		{"PRODAPI_CAHCE_STALE", "PRODAPI_CACHE_STALE", 1},
		{"ELASTICSEARCH_URl", "ELASTICSEARCH_URL", 1}, // case counts
		{"MONGO_UR", "MONGO_URI", 1},
		{"MONGO_URIS", "MONGO_URI", 1},
		{"MONGO_URL", "MONGO_URI", 1},
		{"kitten", "sitting", 3},
		{"CA", "ABC", 3}, // optimal string alignment: no substring is edited twice
	} {
		if got := editDistance(tc.a, tc.b); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := editDistance(tc.b, tc.a); got != tc.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
}

// loadNames loads with the variables of env set, and the names of names
// set too (empty: a set variable's value does not matter to the checks,
// but for a service link's).
func loadNames(env map[string]string, names ...string) (Config, error) {
	all := append(slices.Collect(maps.Keys(env)), names...)
	return LoadFrom(Env{Getenv: func(k string) string { return env[k] }, Names: all, Resources: ResourceNames})
}

// A variable one edit from a setting read without the PRODAPI_ prefix, or
// the setting in another case, is a warning, never a refusal.
func TestLookAlikesWarn(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"REDIS_ULR", "REDIS_ULR is not a setting and is ignored: did you mean REDIS_URL?"},
		{"ELASTICSEARCH_URl", "did you mean ELASTICSEARCH_URL?"},
		{"ELASTICSEARCH_INDX", "did you mean ELASTICSEARCH_INDEX?"},
		{"MONOG_URI", "did you mean MONGO_URI?"},
		{"MONGO_URL", "did you mean MONGO_URI?"},
		{"AUTH_SERVER_SHARED_SECRT", "did you mean AUTH_SERVER_SHARED_SECRET?"},
		{"AUTH_LEWAY", "did you mean AUTH_LEEWAY?"},
		{"OBJSTORE_REGOIN", "did you mean OBJSTORE_REGION?"},
		{"OBJSTORE_CONTAINER_NAMES", "did you mean OBJSTORE_CONTAINER_NAME?"},
		{"MEDIA_PREFX", "did you mean MEDIA_PREFIX?"},
		{"DEBUF", "did you mean DEBUG?"},
		{"debug", "did you mean DEBUG?"},
		{"redis_url", "did you mean REDIS_URL?"}, // another case, however many letters
		{"Mongo_Uri", "did you mean MONGO_URI?"},
		{"OTEL_TRACES_EXPORTERS", "did you mean OTEL_TRACES_EXPORTER?"},
		{"PRODAPI_URl", ""}, // PRODAPI_: refused, below
		{"PRODAPIURL", "did you mean PRODAPI_URL?"},
		{"prodapi_url", "did you mean PRODAPI_URL?"},
		// Not one edit, or too short to judge.
		{"PORTS", ""},
		{"SORT", ""},
		{"ELASTIC_URL", ""},
		{"REDIS_HOST", ""},
		{"MONGO_DBNAME", ""},
		{"HOSTNAME", ""},
		{"PATH", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := loadNames(map[string]string{"AUTH_SERVER_SHARED_SECRET": secret}, tc.name)
			if strings.HasPrefix(tc.name, "PRODAPI_") {
				if err == nil {
					t.Errorf("%s: not refused", tc.name)
				}
			} else if err != nil {
				t.Errorf("%s refused: %v", tc.name, err)
			}
			got := strings.Join(c.Warnings, "\n")
			if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
				t.Errorf("warnings %q, want %q", got, tc.want)
			}
		})
	}
	// Each look-alike its own warning, in a stable order.
	c, _ := loadNames(map[string]string{"AUTH_SERVER_SHARED_SECRET": secret}, "REDIS_ULR", "DEBUF", "MONGO_URL")
	if diff := cmp.Diff([]string{
		"DEBUF is not a setting and is ignored: did you mean DEBUG?",
		"MONGO_URL is not a setting and is ignored: did you mean MONGO_URI?",
		"REDIS_ULR is not a setting and is ignored: did you mean REDIS_URL?",
	}, c.Warnings); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

// A pod's environment, with Kubernetes' links to every service of its
// namespace (prodapi's own, Redis, Elasticsearch, MongoDB...), and the
// environment of a Superdesk deployment, are neither refused nor warned
// about.
func TestPodAndSuperdeskEnvironmentsAreQuiet(t *testing.T) {
	env := map[string]string{"AUTH_SERVER_SHARED_SECRET": secret, "HOME": "/home/nonroot", "HOSTNAME": "prodapi-7d9f8-x2x",
		"PATH": "/usr/bin:/bin", "GOMEMLIMIT": "900MiB", "TZ": "UTC"}
	links := func(service, ip, port, name string) {
		env[service+"_SERVICE_HOST"] = ip
		env[service+"_SERVICE_PORT"] = port
		env[service+"_SERVICE_PORT_"+name] = port
		env[service+"_PORT"] = "tcp://" + ip + ":" + port
		env[service+"_PORT_"+port+"_TCP"] = "tcp://" + ip + ":" + port
		env[service+"_PORT_"+port+"_TCP_PROTO"] = "tcp"
		env[service+"_PORT_"+port+"_TCP_PORT"] = port
		env[service+"_PORT_"+port+"_TCP_ADDR"] = ip
	}
	links("KUBERNETES", "10.96.0.1", "443", "HTTPS")
	links("PRODAPI", "10.96.0.10", "5500", "HTTP")
	links("PRODAPI_ADMIN", "10.96.0.11", "5501", "ADMIN")
	links("REDIS", "10.96.0.12", "6379", "REDIS")
	links("REDIS_URL", "10.96.0.13", "6379", "TCP_REDIS") // a service named redis-url
	links("ELASTICSEARCH", "10.96.0.14", "9200", "HTTP")
	links("MONGO", "10.96.0.15", "27017", "MONGODB")
	links("SUPERDESK_SERVER", "10.96.0.16", "5000", "HTTP")
	c, err := loadNames(env, superdeskSettings...)
	if err != nil {
		t.Errorf("refused: %v", err)
	}
	if len(c.Warnings) > 0 {
		t.Errorf("warnings: %q", c.Warnings)
	}
	// A PRODAPI_PORT that is no service link is a user's, and refused.
	if _, err := loadNames(map[string]string{"AUTH_SERVER_SHARED_SECRET": secret, "PRODAPI_PORT": "5500"}); err == nil {
		t.Error("PRODAPI_PORT=5500 was not refused")
	}
}

// A refused value's row shows the value set and why, for every kind of
// setting, never the default the field fell back on; redacted where it
// may hold a secret. The other rows are as they were.
func TestInvalidValuesShown(t *testing.T) {
	const notDuration = "not a duration (use 10s, 5m, 1h)"
	for _, tc := range []struct {
		name, value string
		row         string // the setting's name, when it is not name
		want        string
	}{
		{name: "PRODAPI_FEED_POLL", value: "banana", want: "banana (invalid: " + notDuration + ")"},
		{name: "PRODAPI_FEED_POLL", value: "1ms", want: "1ms (invalid: must be at least 10ms: each poll queries every collection)"},
		{name: "PRODAPI_CACHE_TTL", value: "soon", want: "soon (invalid: " + notDuration + ")"},
		{name: "PRODAPI_CACHE_STALE", value: "-1s", want: "-1s (invalid: negative)"},
		{name: "PRODAPI_CACHE_TTL_ITEMS", value: "x", row: perResourcePrefix + "<RESOURCE>",
			want: "DESKS=5m ITEMS=x (invalid: " + notDuration + ") USERS=5m"},
		{name: "PRODAPI_AUTH_ENABLED", value: "perhaps", want: "perhaps (invalid: not a boolean (use true or false))"},
		{name: "PRODAPI_MAX_CONNS", value: "many", want: "many (invalid: not an integer)"},
		{name: "PRODAPI_MAX_CONNS", value: "0", want: "0 (invalid: must be at least 1)"},
		{name: "PRODAPI_CACHE_LOCAL_BYTES", value: "1GB", want: "1GB (invalid: not an integer)"},
		{name: "PRODAPI_MONGO_MAX_POOL", value: "-1", want: "-1 (invalid: not a non-negative integer)"},
		{name: "PRODAPI_ACCESS_LOG_HITS", value: "2", want: "2 (invalid: not a share between 0 and 1 (1: all, 0.01: one in a hundred, 0: none))"},
		{name: "PORT", value: "99999", want: "99999 (invalid: not a port number)"},
		{name: "PRODAPI_OPS_ADDR", value: "5502", want: "5502 (invalid: not a listen address (:5502, 127.0.0.1:5502, [::1]:5502))"},
		{name: "PRODAPI_TRUSTED_PROXIES", value: "10.0.0.0/8,proxy",
			want: `10.0.0.0/8,proxy (invalid: "proxy" is neither an address range (10.0.0.0/8, 2001:db8::/32) nor an address)`},
		{name: "MONGO_URI", value: "postgres://u:mongo-password@db/x", want: "postgres://u:xxxxx@db/x (invalid: must be a mongodb:// or mongodb+srv:// URI)"},
		{name: "REDIS_URL", value: "memcache://:redis-password@cache", want: "memcache://:xxxxx@cache (invalid: must be a redis://, rediss:// or redis-sentinel:// URL)"},
		{name: "ELASTICSEARCH_URL", value: "localhost:9200", want: "localhost:9200 (invalid: must be an http(s) URL)"},
		{name: "PRODAPI_CURSOR_SECRET", value: "cursor-password", want: "[redacted] (invalid: shorter than 32 bytes: a short secret would let cursors be forged)"},
		{name: "OTEL_TRACES_SAMPLER_ARG", value: "2", want: "2 (invalid: want a ratio from 0 to 1)"},
	} {
		c, err := Load(envOf("AUTH_SERVER_SHARED_SECRET", secret, tc.name, tc.value))
		if err == nil {
			t.Errorf("%s=%s: no error", tc.name, tc.value)
		}
		row := gocmp.Or(tc.row, tc.name)
		for _, s := range Settings() {
			got := s.Shown(c)
			if s.Name == row {
				if got != tc.want {
					t.Errorf("%s=%s: row %q, want %q", tc.name, tc.value, got, tc.want)
				}
				continue
			}
			if got != s.Value(c) || strings.Contains(got, "invalid") {
				t.Errorf("%s=%s: the row of %s is %q", tc.name, tc.value, s.Name, got)
			}
		}
		if strings.Contains(c.LogValue().String(), "-password") {
			t.Errorf("%s=%s: a password shown: %s", tc.name, tc.value, c.LogValue())
		}
	}
}
