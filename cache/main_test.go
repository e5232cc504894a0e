package cache

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
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
