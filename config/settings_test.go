package config

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
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
	if err := load("PRODAPI_CACHE_TTL_ITEMS", "PRODAPI_CACHE_TTL_ASSETS", "HOME", "PORTAL", "PRODAPI_TEST_MONGO_URI",
		"PRODAPI_INTEGRATION_URL", "PRODAPI_REQUIRE_REDIS"); err != nil {
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
