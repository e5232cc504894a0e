package realserver

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestRedisStandalone(t *testing.T) {
	r := StartRedis(t, 0)
	ctx := context.Background()
	v, err := r.Version(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("redis-server %s", v)
	if err := r.isMaster(ctx); err != nil {
		t.Fatal(err)
	}
	r.Kill()
	if r.Alive() {
		t.Fatal("alive after Kill")
	}
	if _, err := r.Do(ctx, "PING"); err == nil {
		t.Fatal("PING answered after Kill")
	}
}

// A server started with --requirepass is waited for with its password,
// which a client without it needs.
func TestRedisWithPassword(t *testing.T) {
	r := StartRedis(t, 0, "--requirepass", "s3cret")
	if r.Password != "s3cret" {
		t.Fatalf("Password %q", r.Password)
	}
	ctx := context.Background()
	if _, err := r.Do(ctx, "PING"); err != nil {
		t.Fatalf("PING with the password: %v", err)
	}
	c := RedisClient(r.Addr())
	defer c.Close()
	if err := c.Ping(ctx).Err(); err == nil || !strings.HasPrefix(err.Error(), "NOAUTH") {
		t.Errorf("PING without the password: %v, want NOAUTH", err)
	}
}

func TestRedisClusterFailover(t *testing.T) {
	c := StartRedisCluster(t, 3, 1)
	ctx := context.Background()
	masters, err := c.Masters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(masters) != 3 {
		t.Fatalf("%d masters, want 3", len(masters))
	}
	dead, err := c.MasterOf(ctx, "some-key")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(masters, dead) {
		t.Fatalf("MasterOf named %s, not a master", dead.Addr())
	}
	dead.Kill()
	if err := c.WaitFailover(dead); err != nil {
		t.Fatal(err)
	}
	after, err := c.Masters(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != 3 || slices.Contains(after, dead) {
		t.Fatalf("masters after the failover: %v", addrs(after))
	}
	m, err := c.MasterOf(ctx, "some-key")
	if err != nil || m == dead || !m.Alive() {
		t.Fatalf("some-key is served by %v, %v", m, err)
	}
}

func TestRedisSentinelFailover(t *testing.T) {
	s := StartRedisSentinel(t, 2)
	ctx := context.Background()
	m, err := s.Master(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m != s.Servers[0] {
		t.Fatalf("master %s, want %s", m.Addr(), s.Servers[0].Addr())
	}
	m.Kill()
	next, err := s.WaitFailover(m)
	if err != nil {
		t.Fatal(err)
	}
	if next == m || !next.Alive() {
		t.Fatalf("new master %s", next.Addr())
	}
}

func addrs(rs []*Redis) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Addr())
	}
	return out
}
