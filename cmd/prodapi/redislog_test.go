package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/prodapi/prodapi/config"
	"github.com/prodapi/prodapi/test/realserver"
	"github.com/prodapi/prodapi/test/testkit"
)

// A logLine is what the tests read of a JSON log line.
type logLine struct {
	Level, Msg, Error, Fix, Redis string
	Repeated                      int
}

// logLines decodes the log lines of out whose message starts with
// prefix.
func logLines(t *testing.T, out, prefix string) []logLine {
	t.Helper()
	var lines []logLine
	for line := range strings.Lines(out) {
		var l logLine
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("a log line that is not JSON: %s", line)
		}
		if strings.HasPrefix(l.Msg, prefix) {
			lines = append(lines, l)
		}
	}
	return lines
}

const dialFailed = "redis: connection pool: failed to dial after %d attempts: %v"

// go-redis's own messages: each kind at once, then once a minute with the
// count of those held back; its "redis: " prefix once.
func TestRedisLoggerThrottles(t *testing.T) {
	var buf bytes.Buffer
	clk := testkit.NewClock(time.Date(2024, 1, 15, 12, 0, 0, 0, time.UTC))
	l := redisLogger{l: slog.New(slog.NewJSONHandler(&buf, nil)), th: newThrottle(redisLogEvery, clk.Now)}
	ctx := context.Background()
	refused := errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	for range 5 {
		l.Printf(ctx, dialFailed, 1, refused)
		clk.Advance(redisLogEvery / 10)
	}
	l.Printf(ctx, "sentinel: GetMasterAddrByName name=%q failed: %s", "mymaster", refused) // another kind
	clk.Advance(redisLogEvery / 2)
	l.Printf(ctx, dialFailed, 1, refused) // a minute after the first
	l.Printf(ctx, dialFailed, 1, refused)
	dial := "redis: connection pool: failed to dial after 1 attempts: " + refused.Error()
	want := []logLine{
		{Level: "WARN", Msg: dial},
		{Level: "WARN", Msg: "redis: sentinel: GetMasterAddrByName name=\"mymaster\" failed: " + refused.Error()},
		{Level: "WARN", Msg: dial, Repeated: 4},
	}
	if diff := cmp.Diff(want, logLines(t, buf.String(), "")); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
}

// A refusal of the credentials: at error level with the fix, at once,
// then once a minute while it lasts; other errors are not its business.
func TestAuthAlarmThrottles(t *testing.T) {
	srv := realserver.StartRedis(t, 0, "--requirepass", "right")
	var buf bytes.Buffer
	clk := testkit.NewClock(time.Date(2024, 1, 15, 12, 0, 0, 0, time.UTC))
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: "wrong", MaxRetries: -1, DisableIdentity: true})
	defer rdb.Close()
	rdb.AddHook(authAlarm{l: slog.New(slog.NewJSONHandler(&buf, nil)), th: newThrottle(redisLogEvery, clk.Now),
		url: config.URL("redis://:wrong@" + srv.Addr())})
	ctx := context.Background()
	for range 3 {
		if err := rdb.Get(ctx, "k").Err(); err == nil {
			t.Fatal("a wrong password read")
		}
		if _, err := rdb.Pipelined(ctx, func(p redis.Pipeliner) error { p.Get(ctx, "k"); return nil }); err == nil {
			t.Fatal("a wrong password read in a pipeline")
		}
	}
	clk.Advance(redisLogEvery)
	rdb.Ping(ctx)
	good := redis.NewClient(&redis.Options{Addr: srv.Addr(), Password: "right", DisableIdentity: true})
	defer good.Close()
	good.AddHook(authAlarm{l: slog.New(slog.NewJSONHandler(&buf, nil)), th: newThrottle(redisLogEvery, clk.Now)})
	good.Get(ctx, "missing")
	good.Do(ctx, "NO-SUCH-COMMAND")

	got := logLines(t, buf.String(), "")
	for i := range got {
		got[i].Error = "" // go-redis's words
	}
	// Each call hears the refusal once or more (its connection's
	// handshake, then the call): at least the 5 calls held back.
	if len(got) == 2 && got[1].Repeated >= 5 {
		got[1].Repeated = 5
	}
	line := logLine{Level: "ERROR", Msg: "redis: Redis refuses this replica's credentials: the shared cache, its invalidations and /changes are unavailable until they are fixed",
		Fix: authFix, Redis: "redis://:xxxxx@" + srv.Addr()}
	again := line
	again.Repeated = 5
	if diff := cmp.Diff([]logLine{line, again}, got); diff != "" {
		t.Errorf("log (-want +got):\n%s", diff)
	}
	if strings.Contains(buf.String(), "wrong@") {
		t.Errorf("the password was logged:\n%s", &buf)
	}
}

// The service with a wrong Redis password says so at start, at error
// level, with the fix; with Redis on a closed port, go-redis's dial
// failures once a minute with its prefix once.
func TestRedisMisconfigurationIsLogged(t *testing.T) {
	srv := realserver.StartRedis(t, 0, "--requirepass", "right")
	t.Run("wrong password", func(t *testing.T) {
		in := start(t, "REDIS_URL", "redis://:wrong@"+srv.Addr())
		var lines []logLine
		testkit.Eventually(t, "the refusal logged", func() bool {
			lines = logLines(t, in.stderr.String(), "redis: Redis refuses")
			return len(lines) > 0
		})
		if l := lines[0]; l.Level != "ERROR" || !strings.Contains(l.Fix, "password in REDIS_URL") || !strings.HasPrefix(l.Error, "WRONGPASS") {
			t.Errorf("%+v", l)
		}
		if strings.Contains(in.stderr.String(), "wrong@") {
			t.Errorf("the password was logged:\n%s", in.stderr)
		}
		if n := len(logLines(t, in.stderr.String(), "REDIS_URL is not set")); n != 0 {
			t.Errorf("with REDIS_URL, %d lines say it is not set", n)
		}
	})
	t.Run("closed port", func(t *testing.T) {
		began := time.Now()
		in := start(t, "REDIS_URL", "redis://"+realserver.Addr(realserver.FreePort(t)))
		// Each probe pings Redis, dialling again.
		for range 3 {
			in.getOps(t, "/readyz")
		}
		lines := logLines(t, in.stderr.String(), "redis: connection pool: failed to dial")
		if len(lines) == 0 || lines[0].Level != "WARN" {
			t.Fatalf("dial failures logged as %+v:\n%s", lines, in.stderr)
		}
		if time.Since(began) < redisLogEvery && len(lines) != 1 {
			t.Errorf("%d dial failures logged within a minute, want 1:\n%s", len(lines), in.stderr)
		}
		if strings.Contains(in.stderr.String(), "redis: redis:") {
			t.Errorf("a doubled prefix:\n%s", in.stderr)
		}
	})
}

// A replica without Redis says once, at start, that its cache and change
// log are its own, and how to share them.
func TestNoRedisIsLogged(t *testing.T) {
	in := start(t)
	if err := in.stop(); err != nil {
		t.Fatal(err)
	}
	lines := logLines(t, in.stderr.String(), "REDIS_URL is not set")
	if len(lines) != 1 || lines[0].Level != "WARN" || !strings.Contains(lines[0].Fix, "set REDIS_URL") ||
		!strings.Contains(lines[0].Msg, "cache and change log are its own") {
		t.Errorf("%+v\n%s", lines, in.stderr)
	}
}
