package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/prodapi/prodapi/config"
	"github.com/prodapi/prodapi/sources"
)

// cli runs the program in-process as main does, with exactly the
// environment given (as os.Environ would list it), but for the operator
// listener's address (withTestOps), and returns what it printed and the
// exit status main would give.
func cli(t *testing.T, vars map[string]string, args ...string) (stdout, stderr string, exit int, err error) {
	t.Helper()
	vars = withTestOps(vars)
	var environ []string
	for k, v := range vars {
		environ = append(environ, k+"="+v)
	}
	out, errOut := &syncBuffer{}, &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err = run(ctx, env{args: args, getenv: func(k string) string { return vars[k] }, environ: environ,
		stdout: out, stderr: errOut, ready: func(string) { cancel() }}) // a server that starts stops at once
	if err != nil {
		exit = 1
	}
	return out.String(), errOut.String(), exit, err
}

func TestHelp(t *testing.T) {
	defaults, _ := config.Load(func(string) string { return "" })
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"-help"}, {"run", "--help"}} {
		out, _, exit, err := cli(t, nil, args...)
		if exit != 0 {
			t.Errorf("%v: exit %d: %v", args, exit, err)
			continue
		}
		for _, cmd := range []string{"prodapi [run]", "prodapi token", "prodapi healthcheck", "prodapi check", "prodapi config", "prodapi version", "prodapi help"} {
			if !strings.Contains(out, "\n  "+cmd) {
				t.Errorf("%v: no %q in\n%s", args, cmd, out)
			}
		}
		// Every setting, with its default and its description, on its line.
		for _, s := range config.Settings() {
			def := orNone(s.Value(defaults))
			line := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(s.Name) + ` +` + regexp.QuoteMeta(def) + ` +` + regexp.QuoteMeta(s.Help))
			if !line.MatchString(out) {
				t.Errorf("%v: no line for %s with default %q", args, s.Name, def)
			}
		}
	}
	out, _, _, _ := cli(t, nil, "help")
	for _, want := range []string{"PRODAPI_CACHE_STALE", "15m", "PRODAPI_CACHE_TTL_<RESOURCE>", "ITEMS, DESKS, ASSIGNMENTS", "PORT", "5500"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	// A subcommand's own -h prints its flags and is no failure either.
	if _, errOut, exit, err := cli(t, nil, "token", "-h"); exit != 0 || !strings.Contains(errOut, "-scope") {
		t.Errorf("token -h: exit %d %v\n%s", exit, err, errOut)
	}
	// An unknown command fails and shows the usage.
	if _, _, exit, err := cli(t, nil, "serv"); exit != 1 || !strings.Contains(err.Error(), `unknown command "serv"`) || !strings.Contains(err.Error(), "prodapi config") {
		t.Errorf("unknown command: exit %d %v", exit, err)
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"-version"}, {"version"}} {
		out, _, exit, err := cli(t, nil, args...)
		if exit != 0 || !strings.HasPrefix(out, "prodapi ") || !strings.Contains(out, "\nrevision ") || !strings.Contains(out, runtime.Version()) {
			t.Errorf("%v: exit %d %v\n%s", args, exit, err, out)
		}
	}
}

func TestBuildInfo(t *testing.T) {
	stamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/prodapi/prodapi", Version: "v1.2.3"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abc"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		name              string
		info              *debug.BuildInfo
		version, revision string
		want              buildInfo
	}{
		{"go's stamp", stamped, "", "", buildInfo{Version: "v1.2.3", Revision: "0123abc", GoVersion: "go1.26.8", Modified: true}},
		{"link-time values win", stamped, "v2.0.0", "fedcba9", buildInfo{Version: "v2.0.0", Revision: "fedcba9", GoVersion: "go1.26.8"}},
		{"link-time revision of the stamped tree", stamped, "", "0123abc", buildInfo{Version: "v1.2.3", Revision: "0123abc", GoVersion: "go1.26.8", Modified: true}},
		{"nothing known", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "", "",
			buildInfo{Version: "(devel)", Revision: "unknown", GoVersion: "go1.26.8"}},
		{"no build info", nil, "", "", buildInfo{Version: "(devel)", Revision: "unknown", GoVersion: runtime.Version()}},
	} {
		if got := newBuildInfo(tc.info, tc.version, tc.revision); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
	var b strings.Builder
	printVersion(&b, buildInfo{Version: "v1.2.3", Revision: "0123abc", GoVersion: "go1.26.8", Modified: true})
	if b.String() != "prodapi v1.2.3\nrevision 0123abc (modified)\ngo1.26.8\n" {
		t.Errorf("printed %q", b.String())
	}
}

// The binary as `make build` and the Dockerfile link it: the version and
// revision given at link time, the exit statuses an operator sees.
func TestBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "prodapi")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7 -X main.revision=0123456789abcdef", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	prodapi := func(environ []string, args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(environ, "PATH="+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(out), exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	if out, code := prodapi(nil, "--version"); code != 0 || out != "prodapi v9.8.7\nrevision 0123456789abcdef\n"+runtime.Version()+"\n" {
		t.Errorf("--version: %d %q", code, out)
	}
	if out, code := prodapi(nil, "--help"); code != 0 || !strings.Contains(out, "PRODAPI_CACHE_TTL_ASSETS") {
		t.Errorf("--help: %d\n%s", code, out)
	}
	// The real environment is checked: a mistyped variable stops the start.
	out, code := prodapi([]string{"PRODAPI_SANDBOX=sample", "AUTH_SERVER_SHARED_SECRET=" + devSecret, "PRODAPI_CACHE_TTL_ITEM=3s"}, "-addr", "127.0.0.1:0")
	if code != 1 || !strings.Contains(out, "did you mean PRODAPI_CACHE_TTL_ITEMS?") {
		t.Errorf("mistyped variable: %d\n%s", code, out)
	}
}

func TestMistakesStopTheStart(t *testing.T) {
	base := map[string]string{"PRODAPI_SANDBOX": "sample", "AUTH_SERVER_SHARED_SECRET": devSecret}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	// The sandbox starts as it is (and stops at once: see cli).
	if _, errOut, exit, err := cli(t, base, "-addr", "127.0.0.1:0"); exit != 0 {
		t.Fatalf("a good configuration: %v\n%s", err, errOut)
	}
	for _, tc := range []struct {
		vars []string
		want []string
	}{
		{[]string{"PRODAPI_CACHE_TTL_ITEM", "3s"}, []string{"PRODAPI_CACHE_TTL_ITEM is not a setting: did you mean PRODAPI_CACHE_TTL_ITEMS?"}},
		{[]string{"PRODAPI_AUTH_ENABLE", "false"}, []string{"did you mean PRODAPI_AUTH_ENABLED?"}},
		{[]string{"PRODAPI_CACHE_TTL_ASSETS", "20m"}, []string{"PRODAPI_CACHE_TTL_ASSETS (20m) must be shorter than PRODAPI_ASSET_URL_LIFETIME (15m)"}},
		// Every problem at once.
		{[]string{"PRODAPI_CACHE_TTL_ITEM", "3s", "PRODAPI_CACHE_TTL_ASSETS", "20m", "PRODAPI_CACHE_STALE", "soon"},
			[]string{"PRODAPI_CACHE_TTL_ITEMS?", "PRODAPI_CACHE_TTL_ASSETS (20m)", `PRODAPI_CACHE_STALE="soon" is not a duration`}},
	} {
		for _, cmd := range [][]string{{"-addr", "127.0.0.1:0"}, {"run", "-addr", "127.0.0.1:0"}, {"config"}} {
			_, _, exit, err := cli(t, with(tc.vars...), cmd...)
			if exit != 1 || err == nil {
				t.Errorf("%v %v: exit %d", tc.vars, cmd, exit)
				continue
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%v %v: %v\nwant %q", tc.vars, cmd, err, want)
				}
			}
		}
	}
}

// A variable that looks like a misspelt setting read without the
// PRODAPI_ prefix starts the service all the same, with a warning in the
// log, and `prodapi config` shows it; Kubernetes' service links and
// Superdesk's own variables say nothing.
func TestLookAlikesWarn(t *testing.T) {
	vars := map[string]string{"PRODAPI_SANDBOX": "sample", "AUTH_SERVER_SHARED_SECRET": devSecret,
		"REDIS_ULR": "redis://cache:6379", "ELASTICSEARCH_URl": "http://es:9200",
		"PRODAPI_SERVICE_HOST": "10.96.0.10", "PRODAPI_PORT": "tcp://10.96.0.10:5500", "PRODAPI_PORT_5500_TCP_ADDR": "10.96.0.10",
		"MONGO_DBNAME": "superdesk", "PRODAPI_SECRET_KEY": "flask", "ELASTICSEARCH_BACKUPS_PATH": "/backups"}
	_, errOut, exit, err := cli(t, vars, "-addr", "127.0.0.1:0")
	if exit != 0 {
		t.Fatalf("refused: %v\n%s", err, errOut)
	}
	var warnings []string
	for line := range strings.Lines(errOut) {
		if strings.Contains(line, `"level":"WARN"`) && strings.Contains(line, "did you mean") {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) != 2 || !strings.Contains(warnings[0], "ELASTICSEARCH_URl is not a setting and is ignored: did you mean ELASTICSEARCH_URL?") ||
		!strings.Contains(warnings[1], "REDIS_ULR is not a setting and is ignored: did you mean REDIS_URL?") {
		t.Errorf("warnings:\n%s", strings.Join(warnings, ""))
	}
	if _, errOut, exit, err := cli(t, vars, "config"); exit != 0 || !strings.Contains(errOut, "warning: REDIS_ULR is not a setting") {
		t.Errorf("config: exit %d %v\n%s", exit, err, errOut)
	}
}

func TestConfigCommand(t *testing.T) {
	vars := map[string]string{"AUTH_SERVER_SHARED_SECRET": devSecret, "OBJSTORE_SECRET_ACCESS_KEY": "s3-secret-value",
		"OBJSTORE_ACCESS_KEY_ID": "AKIAEXAMPLEKEY", "MONGO_URI": "mongodb://admin:mongo-password@db:27017/superdesk",
		"REDIS_URL": "redis://:redis-password@cache:6379/0", "PRODAPI_CACHE_TTL_ITEMS": "3s", "PRODAPI_CACHE_STALE": "90s"}
	out, _, exit, err := cli(t, vars, "config")
	if exit != 0 {
		t.Fatalf("config: %v", err)
	}
	for _, leak := range []string{devSecret, "s3-secret-value", "AKIAEXAMPLEKEY", "mongo-password", "redis-password"} {
		if strings.Contains(out, leak) {
			t.Errorf("%q printed:\n%s", leak, out)
		}
	}
	for _, line := range []string{`AUTH_SERVER_SHARED_SECRET +\[redacted\]`, `MONGO_URI +mongodb://admin:xxxxx@db:27017/superdesk`,
		`PRODAPI_CACHE_STALE +1m30s`, `PRODAPI_CACHE_TTL_<RESOURCE> +DESKS=5m ITEMS=3s USERS=5m`, `PRODAPI_AUDIENCE +\(none\)`, `PORT +5500`} {
		if !regexp.MustCompile(`(?m)^` + line + `$`).MatchString(out) {
			t.Errorf("no line %s in\n%s", line, out)
		}
	}
	if n := strings.Count(out, "\n"); n != len(config.Settings()) {
		t.Errorf("%d lines for %d settings", n, len(config.Settings()))
	}
}

// prodapi config shows a refused value as set, marked invalid with the
// reason, never the default the service would fall back on; and the
// error, and exits 1.
func TestConfigShowsInvalidValues(t *testing.T) {
	vars := map[string]string{"AUTH_SERVER_SHARED_SECRET": devSecret, "PRODAPI_FEED_POLL": "banana", "PRODAPI_CACHE_TTL": "soon",
		"REDIS_URL": "memcache://:redis-password@cache"}
	out, _, exit, err := cli(t, vars, "config")
	if exit != 1 || err == nil || !strings.Contains(err.Error(), `PRODAPI_FEED_POLL="banana" is not a duration`) {
		t.Errorf("exit %d: %v", exit, err)
	}
	for _, line := range []string{`PRODAPI_FEED_POLL +banana \(invalid: not a duration \(use 10s, 5m, 1h\)\)`,
		`PRODAPI_CACHE_TTL +soon \(invalid: not a duration \(use 10s, 5m, 1h\)\)`,
		`REDIS_URL +memcache://:xxxxx@cache \(invalid: must be a redis://, rediss:// or redis-sentinel:// URL\)`, `PORT +5500`} {
		if !regexp.MustCompile(`(?m)^` + line + `$`).MatchString(out) {
			t.Errorf("no line %s in\n%s", line, out)
		}
	}
	if strings.Contains(out, "redis-password") {
		t.Errorf("a password printed:\n%s", out)
	}
}

func TestTokenNeedsScope(t *testing.T) {
	vars := map[string]string{"AUTH_SERVER_SHARED_SECRET": devSecret}
	_, _, exit, err := cli(t, vars, "token")
	if exit != 1 || !strings.Contains(err.Error(), "-scope is required") {
		t.Fatalf("no -scope: exit %d %v", exit, err)
	}
	for _, s := range sources.AllScopes {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("the error does not list %s: %v", s, err)
		}
	}
	claims := func(args ...string) map[string]any {
		t.Helper()
		out, _, exit, err := cli(t, vars, append([]string{"token"}, args...)...)
		parts := strings.Split(strings.TrimSpace(out), ".")
		if exit != 0 || len(parts) != 3 {
			t.Fatalf("token %v: exit %d %v %q", args, exit, err, out)
		}
		payload, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil {
			t.Fatal(err)
		}
		var c map[string]any
		if err := json.Unmarshal(payload, &c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := claims("-scope", ""); len(c["scope"].([]any)) != 0 {
		t.Errorf("-scope '': scope %v", c["scope"])
	}
	if c := claims("-scope", "archive_read,DESKS_READ"); len(c["scope"].([]any)) != 2 || c["scope"].([]any)[0] != "ARCHIVE_READ" {
		t.Errorf("two scopes: %v", c["scope"])
	}
}

// config knows the resources without importing sources (dependencies
// point inward); the service hands it sources' list, and config's own
// default list must not drift from it.
func TestConfigResourceNames(t *testing.T) {
	if !slices.Equal(config.ResourceNames, resourceNames()) {
		t.Errorf("config.ResourceNames %v, sources: %v", config.ResourceNames, resourceNames())
	}
}
