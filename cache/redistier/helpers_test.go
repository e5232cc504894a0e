package redistier

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/prodapi/prodapi/server/metrics"
	"github.com/prodapi/prodapi/test/realserver"
	"github.com/prodapi/prodapi/test/testkit"
)

// quiet drops go-redis' own log lines (dial failures while a test has
// Redis down on purpose).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	// go-redis logs through a process-wide logger; this test binary owns
	// the process.
	redis.SetLogger(quiet{})
	os.Exit(m.Run())
}

func newClock() *testkit.Clock {
	return testkit.NewClock(time.Date(2024, 1, 15, 12, 0, 0, 0, time.UTC))
}

// An env is a tier on miniredis, with its metrics and clock.
type env struct {
	t       *Tier
	m       *miniredis.Miniredis
	rdb     *redis.Client
	clock   *testkit.Clock
	metrics *metrics.Metrics
}

// newEnv starts miniredis and a tier on it; edit, when given, changes
// the tier's options first.
func newEnv(t testing.TB, edit ...func(*Options)) *env {
	t.Helper()
	e := &env{m: miniredis.RunT(t), clock: newClock(), metrics: metrics.NewMetrics()}
	e.rdb = realserver.RedisClient(e.m.Addr())
	t.Cleanup(func() { e.rdb.Close() })
	e.t = e.tier(t, edit...)
	return e
}

// tier returns another tier on the same Redis, metrics and clock: another
// replica's. It is closed at the end of the test.
func (e *env) tier(t testing.TB, edit ...func(*Options)) *Tier {
	t.Helper()
	opts := Options{
		// Generous: on a busy machine a healthy Redis must not look
		// like a timeout. (miniredis never hangs; a closed one refuses
		// at once.)
		Timeout: 5 * time.Second,
		Metrics: e.metrics,
		Now:     e.clock.Now,
	}
	for _, f := range edit {
		f(&opts)
	}
	tr := New(e.rdb, opts)
	t.Cleanup(func() { closeTier(t, tr) })
	return tr
}

// errors is prodapi_cache_redis_errors_total for op.
func (e *env) errors(op string) uint64 {
	return e.metrics.Counter("prodapi_cache_redis_errors_total", "op").Value(op)
}

func closeTier(t testing.TB, tr *Tier) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := tr.Close(ctx); err != nil {
		t.Errorf("Close: %v", err)
	}
}
