package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prodapi/prodapi/cache/redistier"
	"github.com/prodapi/prodapi/config"
)

// redisLogEvery is how often a Redis problem that lasts is logged again:
// at once, then at most once a minute, with how often it happened
// meanwhile. The cache carries on without Redis, so the log is where an
// operator learns of it; a line per failed call would drown the rest.
const redisLogEvery = time.Minute

// A throttle lets each kind of log line through at most once per period,
// and counts the lines of that kind it held back meanwhile.
type throttle struct {
	every time.Duration
	now   func() time.Time

	mu    sync.Mutex
	kinds map[string]*throttled
}

type throttled struct {
	last time.Time // when a line of the kind was last let through
	held int       // lines held back since
}

func newThrottle(every time.Duration, now func() time.Time) *throttle {
	return &throttle{every: every, now: now, kinds: map[string]*throttled{}}
}

// allow reports whether a line of kind may be written now and, when it
// may, how many lines of kind were held back since the last one.
func (t *throttle) allow(kind string) (ok bool, held int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	k := t.kinds[kind]
	if k == nil {
		t.kinds[kind] = &throttled{last: now}
		return true, 0
	}
	if now.Sub(k.last) < t.every {
		k.held++
		return false, 0
	}
	held = k.held
	k.last, k.held = now, 0
	return true, held
}

// withRepeated adds to a throttled line's attributes how many lines of
// its kind were held back since the last one, if any were.
func withRepeated(held int, attrs ...slog.Attr) []slog.Attr {
	if held == 0 {
		return attrs
	}
	return append(attrs, slog.Int("repeated", held))
}

// redisLogger writes go-redis's own messages (a dial that failed, mostly)
// as warnings: each kind (its format) at most once per redisLogEvery.
// Most of them start with "redis: "; the others get the prefix.
type redisLogger struct {
	l  *slog.Logger
	th *throttle
}

func (r redisLogger) Printf(ctx context.Context, format string, v ...any) {
	ok, held := r.th.allow(format)
	if !ok {
		return
	}
	msg := strings.TrimSpace(fmt.Sprintf(format, v...))
	if !strings.HasPrefix(msg, "redis: ") {
		msg = "redis: " + msg
	}
	r.l.LogAttrs(ctx, slog.LevelWarn, msg, withRepeated(held)...)
}

// authAlarm is a hook on the Redis client that logs, at error level and
// with the fix, Redis refusing the credentials of REDIS_URL
// (redistier.AuthError): at the first refusal, then at most once per
// redisLogEvery while they last. Without it a wrong password shows only
// as "redis": "unavailable" in /readyz, since the cache carries on
// without Redis. Every command and pipeline of the client passes here,
// the follower's first read of the change log at start among them.
type authAlarm struct {
	l   *slog.Logger
	th  *throttle
	url config.URL
}

func (a authAlarm) DialHook(next redis.DialHook) redis.DialHook { return next }

func (a authAlarm) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		a.check(ctx, err)
		return err
	}
}

func (a authAlarm) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		a.check(ctx, err)
		return err
	}
}

// authFix is what to do about a refusal of the credentials.
const authFix = "check the user and password in REDIS_URL, or in the Secret it comes from (the chart's redis.existingSecret)"

func (a authAlarm) check(ctx context.Context, err error) {
	if err == nil || !redistier.AuthError(err) {
		return
	}
	ok, held := a.th.allow("auth")
	if !ok {
		return
	}
	a.l.LogAttrs(ctx, slog.LevelError, "redis: Redis refuses this replica's credentials: the shared cache, its invalidations and /changes are unavailable until they are fixed",
		withRepeated(held, slog.String("error", err.Error()), slog.String("redis", a.url.String()), slog.String("fix", authFix))...)
}
