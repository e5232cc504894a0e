package realserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisTimeout bounds each wait of this file: a server's start, a
// cluster's forming, a failover. It is generous because it bounds a busy
// machine's worst case, not a measurement; the waits end as soon as their
// condition holds.
const RedisTimeout = 60 * time.Second

const redisHow = "apt-get install redis-server (CI installs it)"

// A Redis is a redis-server process (a data node or a sentinel) this
// package started on a loopback port, without persistence.
type Redis struct {
	*Process
	Port int
	ID   string // the cluster node id; "" outside a cluster
	// Password is the server's requirepass (from the --requirepass
	// argument), which this package's own commands authenticate with;
	// URL leaves it out.
	Password string
}

// Addr is the server's host:port.
func (r *Redis) Addr() string { return Addr(r.Port) }

// URL is the redis:// URL of the server.
func (r *Redis) URL() string { return "redis://" + r.Addr() }

// Alive reports whether the process is still running.
func (r *Redis) Alive() bool {
	select {
	case <-r.Done():
		return false
	default:
		return true
	}
}

// redisServer finds redis-server (and redis-cli, when cli is set), or
// stops the test: a skip, or a failure under PRODAPI_REQUIRE_REAL.
func redisServer(t testing.TB, cli bool) string {
	t.Helper()
	names := []string{"redis-server"}
	if cli {
		names = append(names, "redis-cli")
	}
	var server string
	for _, name := range names {
		path, err := exec.LookPath(name)
		if err != nil {
			Missing(t, name, redisHow)
		}
		if server == "" {
			server = path
		}
	}
	return server
}

// StartRedis starts a standalone redis-server on port (0: a free one)
// with the extra arguments given, waits until it answers PING, and stops
// it at the test's cleanup. With "--requirepass", pw among the arguments,
// it waits for PING with that password (Redis.Password).
func StartRedis(t testing.TB, port int, args ...string) *Redis {
	t.Helper()
	r, err := startRedis(t, redisServer(t, false), port, "", args...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// startRedis starts one redis-server in a scratch directory; config, if
// not "", is the path of a config file to give first (a sentinel needs
// one it can rewrite).
//
// With port 0 it takes a free port, and another when the server could
// not listen on it: between FreePort's check and the server's bind,
// another process may take the port (or, in a cluster, the bus port
// 10000 above it).
func startRedis(t testing.TB, server string, port int, config string, args ...string) (*Redis, error) {
	if port != 0 {
		return startRedisOn(t, server, port, config, args...)
	}
	for attempt := 1; ; attempt++ {
		r, err := startRedisOn(t, server, FreePort(t), config, args...)
		if err == nil || attempt == 5 || r == nil || !cannotListen(r.Output()) {
			return r, err
		}
	}
}

// cannotListen reports whether a redis-server's output says it could not
// listen on its port or its cluster bus port.
func cannotListen(out string) bool {
	return strings.Contains(out, "Address already in use") || strings.Contains(out, "port number too high")
}

func startRedisOn(t testing.TB, server string, port int, config string, args ...string) (*Redis, error) {
	dir := t.TempDir()
	var argv []string
	if config != "" {
		argv = append(argv, config)
	}
	argv = append(argv, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--dir", dir, "--save", "", "--appendonly", "no", "--loglevel", "notice")
	argv = append(argv, args...)
	p, err := Start(fmt.Sprintf("redis-server :%d", port), exec.Command(server, argv...))
	if err != nil {
		return nil, err
	}
	// Registered after TempDir's, so it runs first: the directory goes
	// once the server has.
	t.Cleanup(func() { p.Stop(10 * time.Second) })
	r := &Redis{Process: p, Port: port, Password: requirepass(args)}
	err = p.WaitReady(RedisTimeout, func(ctx context.Context) error {
		// A plain dial first: go-redis logs every refused dial.
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", r.Addr())
		if err != nil {
			return err
		}
		conn.Close()
		return r.do(ctx, "PING").Err()
	})
	return r, err
}

// requirepass is the value of the --requirepass argument, "" without one.
func requirepass(args []string) string {
	for i, a := range args {
		if a == "--requirepass" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// RedisClient is a client of the Redis at addr (a real one or miniredis)
// for tests: deadlines honoured, no retries, one dial per attempt, no
// CLIENT SETINFO (which miniredis refuses). The caller closes it.
func RedisClient(addr string) *redis.Client {
	return redis.NewClient(redisOptions(addr))
}

func redisOptions(addr string) *redis.Options {
	return &redis.Options{
		Addr:                  addr,
		ContextTimeoutEnabled: true,
		MaxRetries:            -1,
		DialerRetries:         1,
		DisableIdentity:       true,
	}
}

// do runs one command on the server, on a connection of its own.
func (r *Redis) do(ctx context.Context, args ...any) *redis.Cmd {
	o := redisOptions(r.Addr())
	o.PoolSize = 1
	o.Password = r.Password
	c := redis.NewClient(o)
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return c.Do(ctx, args...)
}

// Do runs one command on the server and returns its reply.
func (r *Redis) Do(ctx context.Context, args ...any) (any, error) {
	return r.do(ctx, args...).Result()
}

// info returns the fields of INFO section (or CLUSTER INFO, for
// section "cluster-info").
func (r *Redis) info(ctx context.Context, section string) (map[string]string, error) {
	args := []any{"INFO", section}
	if section == "cluster-info" {
		args = []any{"CLUSTER", "INFO"}
	}
	s, err := r.do(ctx, args...).Text()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", r.Addr(), err)
	}
	m := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m, nil
}

// replicaUp reports an error unless r is a replica whose link to its
// master is up.
func (r *Redis) replicaUp(ctx context.Context) error {
	m, err := r.info(ctx, "replication")
	if err != nil {
		return err
	}
	if m["role"] != "slave" || m["master_link_status"] != "up" {
		return fmt.Errorf("%s: role %s, master link %q", r.Addr(), m["role"], m["master_link_status"])
	}
	return nil
}

// isMaster reports an error unless r says it is a master.
func (r *Redis) isMaster(ctx context.Context) error {
	m, err := r.info(ctx, "replication")
	if err != nil {
		return err
	}
	if m["role"] != "master" {
		return fmt.Errorf("%s: role %s", r.Addr(), m["role"])
	}
	return nil
}

// CPU is the CPU time the server has used so far, system and user (INFO
// cpu), for benchmarks that weigh what a client costs it.
func (r *Redis) CPU(ctx context.Context) (time.Duration, error) {
	m, err := r.info(ctx, "cpu")
	if err != nil {
		return 0, err
	}
	var total float64
	for _, k := range []string{"used_cpu_sys", "used_cpu_user"} {
		f, err := strconv.ParseFloat(m[k], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: INFO cpu %s: %w", r.Addr(), k, err)
		}
		total += f
	}
	return time.Duration(total * float64(time.Second)), nil
}

// Version is the redis-server version, for the logs of the tests.
func (r *Redis) Version(ctx context.Context) (string, error) {
	m, err := r.info(ctx, "server")
	if err != nil {
		return "", err
	}
	return m["redis_version"], nil
}

// waitFor calls cond until it returns nil or RedisTimeout passes.
func waitFor(what string, cond func(context.Context) error) error {
	if err, _ := poll(RedisTimeout, nil, cond); err != nil {
		return fmt.Errorf("realserver: %s: not after %s: %w", what, RedisTimeout, err)
	}
	return nil
}

// A RedisCluster is a Redis Cluster of redis-server processes on
// loopback ports, each stopped at the test's cleanup.
type RedisCluster struct {
	Nodes []*Redis
}

// ClusterNodeTimeout is the cluster-node-timeout of a RedisCluster: a
// master unreachable that long is failed over. Short, so that a failover
// takes seconds; long enough that a busy machine does not fail over a
// node that is only slow.
const ClusterNodeTimeout = 2 * time.Second

// StartRedisCluster starts masters masters with replicas replicas each,
// forms the cluster with redis-cli --cluster create, and returns once
// every node reports cluster_state:ok with every slot served and every
// replica's link to its master up.
func StartRedisCluster(t testing.TB, masters, replicas int) *RedisCluster {
	t.Helper()
	server := redisServer(t, true)
	n := masters * (1 + replicas)
	c := &RedisCluster{}
	for range n {
		r, err := startRedis(t, server, 0, "",
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", strconv.Itoa(int(ClusterNodeTimeout/time.Millisecond)),
			// A replica fails over however long it was cut off: in a
			// test, one that lagged is still better than a dead shard.
			"--cluster-replica-validity-factor", "0")
		if err != nil {
			t.Fatal(err)
		}
		c.Nodes = append(c.Nodes, r)
	}
	ctx := context.Background()
	args := []string{"--cluster", "create"}
	for _, r := range c.Nodes {
		args = append(args, r.Addr())
		id, err := r.do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatal(err)
		}
		r.ID = id
	}
	args = append(args, "--cluster-replicas", strconv.Itoa(replicas), "--cluster-yes")
	cctx, cancel := context.WithTimeout(ctx, RedisTimeout)
	defer cancel()
	if out, err := exec.CommandContext(cctx, "redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("realserver: redis-cli --cluster create: %v\n%s", err, out)
	}
	err := waitFor("cluster formed", func(ctx context.Context) error {
		if err := c.healthy(ctx, n); err != nil {
			return err
		}
		for _, r := range c.Nodes {
			m, err := r.info(ctx, "replication")
			if err != nil {
				return err
			}
			if m["role"] == "slave" && m["master_link_status"] != "up" {
				return fmt.Errorf("replica %s: master link %s", r.Addr(), m["master_link_status"])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// URL is the redis+cluster:// URL naming every node.
func (c *RedisCluster) URL() string {
	addrs := make([]string, len(c.Nodes))
	for i, r := range c.Nodes {
		addrs[i] = r.Addr()
	}
	return "redis+cluster://" + strings.Join(addrs, ",")
}

// healthy reports an error unless every live node says cluster_state:ok
// with all 16384 slots served and knows n nodes.
func (c *RedisCluster) healthy(ctx context.Context, n int) error {
	for _, r := range c.Nodes {
		if !r.Alive() {
			continue
		}
		m, err := r.info(ctx, "cluster-info")
		if err != nil {
			return err
		}
		if m["cluster_state"] != "ok" || m["cluster_slots_ok"] != "16384" || m["cluster_known_nodes"] != strconv.Itoa(n) {
			return fmt.Errorf("%s: cluster_state %s, slots ok %s, known nodes %s", r.Addr(),
				m["cluster_state"], m["cluster_slots_ok"], m["cluster_known_nodes"])
		}
	}
	return nil
}

// byAddr returns the node listening on addr.
func (c *RedisCluster) byAddr(addr string) *Redis {
	for _, r := range c.Nodes {
		if r.Addr() == addr {
			return r
		}
	}
	return nil
}

// live returns a node that is running.
func (c *RedisCluster) live() (*Redis, error) {
	for _, r := range c.Nodes {
		if r.Alive() {
			return r, nil
		}
	}
	return nil, errors.New("realserver: no cluster node is running")
}

// MasterOf returns the node serving key's slot now, as a live node sees
// it.
func (c *RedisCluster) MasterOf(ctx context.Context, key string) (*Redis, error) {
	r, err := c.live()
	if err != nil {
		return nil, err
	}
	slot, err := r.do(ctx, "CLUSTER", "KEYSLOT", key).Int64()
	if err != nil {
		return nil, err
	}
	slots, err := c.slots(ctx, r)
	if err != nil {
		return nil, err
	}
	for _, s := range slots {
		if int64(s.Start) <= slot && slot <= int64(s.End) && len(s.Nodes) > 0 {
			if m := c.byAddr(s.Nodes[0].Addr); m != nil {
				return m, nil
			}
			return nil, fmt.Errorf("realserver: slot %d is served by %s, not a node of this cluster", slot, s.Nodes[0].Addr)
		}
	}
	return nil, fmt.Errorf("realserver: slot %d is not served", slot)
}

func (c *RedisCluster) slots(ctx context.Context, r *Redis) ([]redis.ClusterSlot, error) {
	cl := redis.NewClient(&redis.Options{Addr: r.Addr(), MaxRetries: -1, DialerRetries: 1, DisableIdentity: true, ContextTimeoutEnabled: true})
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	//lint:ignore SA1019 CLUSTER SLOTS is what go-redis routes by, and Redis 6 has no CLUSTER SHARDS.
	return cl.ClusterSlots(ctx).Result()
}

// Masters returns the nodes serving slots now, as a live node sees it.
func (c *RedisCluster) Masters(ctx context.Context) ([]*Redis, error) {
	r, err := c.live()
	if err != nil {
		return nil, err
	}
	slots, err := c.slots(ctx, r)
	if err != nil {
		return nil, err
	}
	var out []*Redis
	seen := map[*Redis]bool{}
	for _, s := range slots {
		if len(s.Nodes) == 0 {
			continue
		}
		m := c.byAddr(s.Nodes[0].Addr)
		if m != nil && !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	return out, nil
}

// WaitFailover waits until the cluster has failed dead over: every live
// node flags it as failed, serves no slot from it, and reports
// cluster_state:ok with every slot served.
func (c *RedisCluster) WaitFailover(dead *Redis) error {
	return waitFor("cluster failover of "+dead.Addr(), func(ctx context.Context) error {
		if dead.Alive() {
			return errors.New("the node is still running")
		}
		if err := c.healthy(ctx, len(c.Nodes)); err != nil {
			return err
		}
		for _, r := range c.Nodes {
			if !r.Alive() {
				continue
			}
			nodes, err := r.do(ctx, "CLUSTER", "NODES").Text()
			if err != nil {
				return err
			}
			for line := range strings.SplitSeq(nodes, "\n") {
				f := strings.Fields(line)
				if len(f) < 8 || f[0] != dead.ID {
					continue
				}
				if !strings.Contains(f[2], "fail") || strings.Contains(f[2], "fail?") || len(f) > 8 {
					return fmt.Errorf("%s sees %s as %s with %d slot ranges", r.Addr(), dead.Addr(), f[2], len(f)-8)
				}
			}
			slots, err := c.slots(ctx, r)
			if err != nil {
				return err
			}
			for _, s := range slots {
				if len(s.Nodes) > 0 && s.Nodes[0].Addr == dead.Addr() {
					return fmt.Errorf("%s still routes slots %d-%d to %s", r.Addr(), s.Start, s.End, dead.Addr())
				}
			}
		}
		return nil
	})
}

// A RedisSentinel is a master, its replicas and three sentinels watching
// it, each a redis-server process on a loopback port stopped at the
// test's cleanup.
type RedisSentinel struct {
	MasterName string
	Servers    []*Redis // the data nodes; Servers[0] is the first master
	Sentinels  []*Redis
}

// Sentinel timings: a master unreachable for SentinelDownAfter is failed
// over, and a failover that stalls is retried after twice
// SentinelFailoverTimeout.
const (
	SentinelDownAfter       = 1500 * time.Millisecond
	SentinelFailoverTimeout = 5 * time.Second
)

// StartRedisSentinel starts a master with replicas replicas and three
// sentinels (quorum two), and returns once every replica's link is up and
// every sentinel knows the master, its replicas and the other sentinels.
func StartRedisSentinel(t testing.TB, replicas int) *RedisSentinel {
	t.Helper()
	server := redisServer(t, false)
	s := &RedisSentinel{MasterName: "prodapi"}
	master, err := startRedis(t, server, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	s.Servers = append(s.Servers, master)
	for range replicas {
		r, err := startRedis(t, server, 0, "", "--replicaof", "127.0.0.1", strconv.Itoa(master.Port))
		if err != nil {
			t.Fatal(err)
		}
		s.Servers = append(s.Servers, r)
	}
	// Sentinels learn replicas from the master's INFO: they come after
	// the replicas are attached, so that they see them at once.
	if err := waitFor("replicas attached", func(ctx context.Context) error {
		for _, r := range s.Servers[1:] {
			if err := r.replicaUp(ctx); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		conf := filepath.Join(t.TempDir(), "sentinel.conf")
		text := fmt.Sprintf("sentinel monitor %[1]s 127.0.0.1 %[2]d 2\n"+
			"sentinel down-after-milliseconds %[1]s %[3]d\n"+
			"sentinel failover-timeout %[1]s %[4]d\n"+
			"sentinel parallel-syncs %[1]s 1\n",
			s.MasterName, master.Port, SentinelDownAfter.Milliseconds(), SentinelFailoverTimeout.Milliseconds())
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		r, err := startRedis(t, server, 0, conf, "--sentinel")
		if err != nil {
			t.Fatal(err)
		}
		s.Sentinels = append(s.Sentinels, r)
	}
	if err := waitFor("sentinels ready", func(ctx context.Context) error {
		for _, sn := range s.Sentinels {
			m, err := s.sentinelMaster(ctx, sn)
			if err != nil {
				return err
			}
			if m["flags"] != "master" || m["num-slaves"] != strconv.Itoa(replicas) || m["num-other-sentinels"] != strconv.Itoa(len(s.Sentinels)-1) {
				return fmt.Errorf("sentinel %s: flags %s, %s replicas, %s other sentinels", sn.Addr(), m["flags"], m["num-slaves"], m["num-other-sentinels"])
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

// URL is the redis-sentinel:// URL naming every sentinel and the master.
func (s *RedisSentinel) URL() string {
	addrs := make([]string, len(s.Sentinels))
	for i, r := range s.Sentinels {
		addrs[i] = r.Addr()
	}
	return "redis-sentinel://" + strings.Join(addrs, ",") + "/" + s.MasterName
}

// sentinelMaster returns what sentinel sn knows of the master.
func (s *RedisSentinel) sentinelMaster(ctx context.Context, sn *Redis) (map[string]string, error) {
	v, err := sn.Do(ctx, "SENTINEL", "MASTER", s.MasterName)
	if err != nil {
		return nil, fmt.Errorf("sentinel %s: %w", sn.Addr(), err)
	}
	m := map[string]string{}
	switch v := v.(type) {
	case []any: // RESP2: a flat list of names and values
		for i := 0; i+1 < len(v); i += 2 {
			m[fmt.Sprint(v[i])] = fmt.Sprint(v[i+1])
		}
	case map[any]any: // RESP3
		for k, x := range v {
			m[fmt.Sprint(k)] = fmt.Sprint(x)
		}
	default:
		return nil, fmt.Errorf("sentinel %s: SENTINEL MASTER answered %T", sn.Addr(), v)
	}
	return m, nil
}

// masterAddr is the master's address as sentinel sn names it.
func (s *RedisSentinel) masterAddr(ctx context.Context, sn *Redis) (string, error) {
	v, err := sn.do(ctx, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", s.MasterName).StringSlice()
	if err != nil {
		return "", fmt.Errorf("sentinel %s: %w", sn.Addr(), err)
	}
	if len(v) != 2 {
		return "", fmt.Errorf("sentinel %s: master address %q", sn.Addr(), v)
	}
	return v[0] + ":" + v[1], nil
}

// Master returns the server every live sentinel names as the master.
func (s *RedisSentinel) Master(ctx context.Context) (*Redis, error) {
	var addr string
	for _, sn := range s.Sentinels {
		if !sn.Alive() {
			continue
		}
		a, err := s.masterAddr(ctx, sn)
		if err != nil {
			return nil, err
		}
		if addr != "" && a != addr {
			return nil, fmt.Errorf("sentinels disagree on the master: %s, %s", addr, a)
		}
		addr = a
	}
	for _, r := range s.Servers {
		if r.Addr() == addr {
			return r, nil
		}
	}
	return nil, fmt.Errorf("the sentinels name %q, not a server of this set", addr)
}

// WaitFailover waits until the set has failed dead over: every live
// sentinel names the same other, running server as the master, that
// server says it is the master, and every other running server is its
// replica with the link up. It returns the new master.
func (s *RedisSentinel) WaitFailover(dead *Redis) (*Redis, error) {
	var master *Redis
	err := waitFor("sentinel failover of "+dead.Addr(), func(ctx context.Context) error {
		m, err := s.Master(ctx)
		if err != nil {
			return err
		}
		if m == dead || !m.Alive() {
			return fmt.Errorf("the sentinels name %s, which is down", m.Addr())
		}
		if err := m.isMaster(ctx); err != nil {
			return err
		}
		for _, r := range s.Servers {
			if r == m || !r.Alive() {
				continue
			}
			if err := r.replicaUp(ctx); err != nil {
				return err
			}
			rm, err := r.info(ctx, "replication")
			if err != nil {
				return err
			}
			if rm["master_port"] != strconv.Itoa(m.Port) {
				return fmt.Errorf("%s still replicates :%s", r.Addr(), rm["master_port"])
			}
		}
		master = m
		return nil
	})
	return master, err
}
