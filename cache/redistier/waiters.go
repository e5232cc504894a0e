package redistier

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// The fleet's count of each client's waiters (/changes event streams,
// long polls, min_position waits: server/changes's Fleet), so that a
// client's cap holds across the replicas. A client's waiters are a
// sorted set, each member a waiter's id scored by the time its lease
// ends, on Redis's clock (its TIME, so the replicas' clocks do not
// matter): a waiter joins with a lease, its replica renews the leases of
// all its waiters in one pipelined round trip every third of a lease,
// and it leaves when it ends. The waiters of a replica that died are
// never renewed, and no longer count once their leases end: each join
// first drops the members whose leases ended. The key itself expires a
// lease after its last write.

// waitersKey is the set of client's waiters.
func waitersKey(client string) string { return Prefix + "waiters:" + client }

// joinWaiter adds ARGV[1] to the set KEYS[1] with a lease of ARGV[3]
// milliseconds, unless it holds ARGV[2] live members already (0); a
// member there already is renewed.
var joinWaiter = redis.NewScript(`
redis.replicate_commands()
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call("ZREMRANGEBYSCORE", KEYS[1], "-inf", now)
if not redis.call("ZSCORE", KEYS[1], ARGV[1]) and redis.call("ZCARD", KEYS[1]) >= tonumber(ARGV[2]) then
  return 0
end
redis.call("ZADD", KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
redis.call("PEXPIRE", KEYS[1], ARGV[3])
return 1`)

// renewWaiters extends to ARGV[1] milliseconds from now the lease of each
// member of KEYS[1] named in ARGV[2:] that is still in the set (a member
// whose lease ended, and was dropped, is not added again).
var renewWaiters = redis.NewScript(`
redis.replicate_commands()
local t = redis.call("TIME")
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local lease = tonumber(ARGV[1])
local renewed = 0
for i = 2, #ARGV do
  renewed = renewed + redis.call("ZADD", KEYS[1], "XX", "CH", now + lease, ARGV[i])
end
if renewed > 0 then redis.call("PEXPIRE", KEYS[1], lease) end
return renewed`)

// The answers of a Tier that does not ask Redis to the calls that count
// the fleet's waiters: the caller counts on its replica alone.
var (
	errNoRedis     = errors.New("redistier: no Redis")
	errBreakerOpen = errors.New("redistier: the Redis breaker is open")
)

// JoinWaiter adds the waiter id to client's live waiters, with a lease,
// unless client has max of them already (joined false). An error (no
// Redis, the breaker open, a failure or no reply in time) means the
// fleet could not be asked. It is on the path of a request about to wait
// for seconds or hours, and waits as a control call does (a second, or
// Timeout when longer), rather than give up on the cap under load.
func (t *Tier) JoinWaiter(ctx context.Context, client, id string, max int, lease time.Duration) (joined bool, err error) {
	err = t.waitersCall(ctx, func(ctx context.Context) error {
		sctx, span := t.span(ctx, "EVALSHA")
		n, err := joinWaiter.Run(sctx, t.rdb, []string{waitersKey(client)}, id, max, lease.Milliseconds()).Int()
		endSpan(span, err)
		joined = n == 1
		return err
	})
	return joined, err
}

// RenewWaiters extends the lease of each of waiters (their ids, by
// client) still live, in one pipelined round trip (a Cluster routes each
// client's call to its slot's master).
func (t *Tier) RenewWaiters(ctx context.Context, waiters map[string][]string, lease time.Duration) error {
	return t.waitersCall(ctx, func(ctx context.Context) error {
		_, err := t.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
			for client, ids := range waiters {
				args := make([]any, 0, 1+len(ids))
				args = append(args, lease.Milliseconds())
				for _, id := range ids {
					args = append(args, id)
				}
				// The script's source each time: a pipeline cannot fall
				// back from EVALSHA, and it is sent every ten seconds,
				// not per request.
				renewWaiters.Eval(ctx, p, []string{waitersKey(client)}, args...)
			}
			return nil
		})
		return err
	})
}

// LeaveWaiter removes the waiter id from client's waiters.
func (t *Tier) LeaveWaiter(ctx context.Context, client, id string) error {
	return t.waitersCall(ctx, func(ctx context.Context) error {
		return t.rdb.ZRem(ctx, waitersKey(client), id).Err()
	})
}

// waitersCall makes a call of the waiters' count, within a control
// call's time and judged by the breaker, unless there is no Redis or the
// breaker is open; a failure is counted.
func (t *Tier) waitersCall(ctx context.Context, call func(ctx context.Context) error) error {
	if t.rdb == nil {
		return errNoRedis
	}
	if !t.breaker.allow() {
		return errBreakerOpen
	}
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	err := call(ctx)
	t.judgeShort(ctx, err)
	if err != nil {
		t.metrics.redisErrors.Inc("waiters")
	}
	return err
}
