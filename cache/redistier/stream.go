package redistier

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The change log's stream. One Redis Stream holds the fleet's change
// log; every replica appends to it and follows it. Its keys share the
// hash tag {changes}, so that a Cluster keeps them in one slot and a
// script may touch them all:
//
//	prodapi:v1:{changes}:stream      the entries, by id (ms-seq, Redis's clock)
//	prodapi:v1:{changes}:meta        a hash: epoch, trimmed
//	prodapi:v1:{changes}:seen:<key>  the version last appended for a document
//	prodapi:v1:{changes}:feed:<name>:token  a change feed's resume token (lease.go)
//
// The epoch names one life of the stream: a random value set when the
// stream is created, and again whenever the stream turns out to be gone
// (Redis restarted without persistence, the key was deleted or evicted)
// or the meta hash does, or when a reader finds that the stream lost
// entries it had handed out (StreamRenew). An id means something only
// with its epoch. trimmed is the newest id trimmed away (at first, the
// id of the marker the stream was created with; "0-0" for a stream made
// before that was recorded): a reader resuming after an id older than
// it has missed entries.
// A renewed epoch starts with trimmed at the stream's last id: the
// entries of the old one are never read as the new one's.
//
// The reads a replica's follower makes over and over (StreamCheck,
// StreamRead) and a request's (StreamRange) are read-only commands (a
// MULTI of reads, XREAD), never scripts, so that a CLIENT PAUSE WRITE,
// the pause of a failover, does not hold them.
//
// The tier deals in fields and ids; package cache/changelog says what the
// fields mean.

func streamKey() string             { return Prefix + "{changes}:stream" }
func streamMetaKey() string         { return Prefix + "{changes}:meta" }
func streamSeenKey(k string) string { return Prefix + "{changes}:seen:" + k }

// ErrNoStream is returned by the stream's calls on a Tier without Redis.
var ErrNoStream = errors.New("redistier: no Redis: the change log's stream is not there")

// A StreamState is where the stream stands.
type StreamState struct {
	Epoch   string
	Trimmed string // the newest id trimmed away; "0-0": none
	Last    string // the newest id generated ("0-0" before the first)
	Length  int64  // entries kept
}

// A StreamRecord is one entry of the stream: its id and its fields, each
// name followed by its value.
type StreamRecord struct {
	ID     string
	Fields []string
}

// A StreamAppend is what one change adds to the stream: Records (their
// fields; Redis gives the ids), unless Seen is set and its key holds
// Version already, in which case nothing is added (a duplicate). Seen
// then holds Version for the SeenTTL of the call.
type StreamAppend struct {
	Seen    string // a key of the document, under prodapi:v1:{changes}:seen:; "" appends whatever came before
	Version string
	Records [][]string
}

// StreamLimits bound the stream on every append.
type StreamLimits struct {
	MaxLen  int64         // entries kept at most
	Retain  time.Duration // entries older than this (by Redis's clock) are trimmed
	SeenTTL time.Duration // how long a seen key keeps its version
}

// trimBatch bounds what one script trims, so that a stream past its
// limits after a quiet day does not block Redis for long: each append
// trims up to this many more, and the stream converges.
const trimBatch = 1000

// ensureEpoch is the script fragment every script that creates or reads
// the stream starts with: the epoch, made anew (ARGV[1]) when the stream
// or its meta hash is gone. An empty stream is created with the epoch, so
// that "the stream is gone" always means it was lost; the id of that
// creation marker (trimmed at once) is the new stream's trim mark, so
// that every id the stream stands at names an entry or is at most the
// trim mark. A stream kept without its meta hash starts at "0-0".
const ensureEpoch = `
local stream, meta = KEYS[1], KEYS[2]
local epoch = redis.call('HGET', meta, 'epoch')
if not epoch or redis.call('EXISTS', stream) == 0 then
  epoch = ARGV[1]
  local start = '0-0'
  if redis.call('EXISTS', stream) == 0 then
    start = redis.call('XADD', stream, 'MAXLEN', '0', '*', 'epoch', epoch)
  end
  redis.call('DEL', meta)
  redis.call('HSET', meta, 'epoch', epoch, 'trimmed', start)
end
` + lastIDFunc

// lastIDFunc defines lastID(stream), the stream's last-generated-id.
const lastIDFunc = `
local function lastID(stream)
  local info = redis.call('XINFO', 'STREAM', stream)
  for k = 1, #info, 2 do
    if info[k] == 'last-generated-id' then return info[k + 1] end
  end
  return '0-0'
end
`

// streamAppend adds the records of each change (see StreamAppend), then
// trims by length and by age, each at most trimBatch entries, exactly, so
// that the newest id trimmed is known. It returns the epoch, the entries
// trimmed, the length and, per change, the ids added (none for a
// duplicate).
//
// KEYS: stream, meta, then the seen keys. ARGV: new epoch, max length,
// retention in ms, seen TTL in ms, then per change: the index in KEYS of
// its seen key (0: none), its version, its number of records, then per
// record its number of field strings and the strings.
var streamAppend = redis.NewScript(ensureEpoch + `
local maxlen, retain, ttl = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local out = {}
local i = 5
while i <= #ARGV do
  local seen, version, n = tonumber(ARGV[i]), ARGV[i + 1], tonumber(ARGV[i + 2])
  i = i + 3
  local dup = false
  if seen > 0 then
    if redis.call('GET', KEYS[seen]) == version then
      dup = true
    else
      redis.call('SET', KEYS[seen], version, 'PX', ttl)
    end
  end
  local ids = {}
  for r = 1, n do
    local nf = tonumber(ARGV[i])
    i = i + 1
    if not dup then
      ids[r] = redis.call('XADD', stream, '*', unpack(ARGV, i, i + nf - 1))
    end
    i = i + nf
  end
  out[#out + 1] = ids
end
local trimmed, gone = false, 0
local function trimThrough(upto, count)
  if count <= 0 then return end
  local old = redis.call('XRANGE', stream, '-', upto, 'COUNT', math.min(count, ` + strconv.Itoa(trimBatch) + `))
  if #old == 0 then return end
  local last = old[#old][1]
  local ms, seq = string.match(last, '^(%d+)-(%d+)$')
  gone = gone + redis.call('XTRIM', stream, 'MINID', ms .. '-' .. (tonumber(seq) + 1))
  trimmed = last
end
trimThrough('+', redis.call('XLEN', stream) - maxlen)
local now = redis.call('TIME')
local minid = string.format('%d', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) - retain)
trimThrough('(' .. minid .. '-0', ` + strconv.Itoa(trimBatch) + `)
if trimmed then redis.call('HSET', meta, 'trimmed', trimmed) end
return {epoch, gone, redis.call('XLEN', stream), out}`)

// streamSnapshot returns where the stream stands and its newest ARGV[2]
// entries, newest first, creating it (epoch ARGV[1]) when it is not
// there.
var streamSnapshot = redis.NewScript(ensureEpoch + `
local recs = {}
if tonumber(ARGV[2]) > 0 then
  recs = redis.call('XREVRANGE', stream, '+', '-', 'COUNT', ARGV[2])
end
return {epoch, redis.call('HGET', meta, 'trimmed'), lastID(stream), redis.call('XLEN', stream), recs}`)

// streamRenew ends the epoch ARGV[1], if it is still the stream's, with
// the epoch ARGV[2], whose entries start after the stream's last id; it
// returns the stream's epoch after ("" when there is no stream), and 1
// when it renewed it, 0 when not.
var streamRenew = redis.NewScript(lastIDFunc + `
local stream, meta = KEYS[1], KEYS[2]
local epoch = redis.call('HGET', meta, 'epoch')
if not epoch or redis.call('EXISTS', stream) == 0 then return {'', 0} end
if epoch ~= ARGV[1] then return {epoch, 0} end
redis.call('HSET', meta, 'epoch', ARGV[2], 'trimmed', lastID(stream))
return {ARGV[2], 1}`)

// NewEpoch makes an epoch: 16 lowercase hex digits, random. The stream
// takes one when it is created (the epoch a script is given is kept only
// then), and the change log's tokens carry it in this form.
func NewEpoch() string { return randomID() }

// StreamAppend adds the changes' records to the stream (a change whose
// seen key holds its version already adds none), then trims it to
// limits. It returns the stream's state after (Last is not read: ""),
// the entries it trimmed, and per change the ids added, nil for a
// duplicate. Redis runs it as one script: a change is appended whole or
// not at all, and its seen key is set with it.
func (t *Tier) StreamAppend(ctx context.Context, changes []StreamAppend, limits StreamLimits) (st StreamState, trimmed int64, ids [][]string, err error) {
	if t.rdb == nil {
		return st, 0, nil, ErrNoStream
	}
	keys := []string{streamKey(), streamMetaKey()}
	args := []any{NewEpoch(), limits.MaxLen, limits.Retain.Milliseconds(), max(limits.SeenTTL.Milliseconds(), 1)}
	for _, c := range changes {
		seen := 0
		if c.Seen != "" {
			keys = append(keys, streamSeenKey(c.Seen))
			seen = len(keys)
		}
		args = append(args, seen, c.Version, len(c.Records))
		for _, r := range c.Records {
			args = append(args, len(r))
			for _, f := range r {
				args = append(args, f)
			}
		}
	}
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	v, err := streamAppend.Run(ctx, t.rdb, keys, args...).Slice()
	if err != nil {
		return st, 0, nil, fmt.Errorf("redistier: stream append: %w", err)
	}
	if len(v) != 4 {
		return st, 0, nil, fmt.Errorf("redistier: stream append: a reply of %d parts", len(v))
	}
	st.Epoch, _ = v[0].(string)
	trimmed, _ = v[1].(int64)
	st.Length, _ = v[2].(int64)
	out, _ := v[3].([]any)
	ids = make([][]string, len(out))
	for i, o := range out {
		added, _ := o.([]any)
		for _, id := range added {
			s, _ := id.(string)
			ids[i] = append(ids[i], s)
		}
	}
	return st, trimmed, ids, nil
}

// StreamSnapshot returns where the stream stands and its newest n
// entries, oldest first, creating the stream when it is not there (a
// follower starting, or asked where "now" is).
func (t *Tier) StreamSnapshot(ctx context.Context, n int) (StreamState, []StreamRecord, error) {
	if t.rdb == nil {
		return StreamState{}, nil, ErrNoStream
	}
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	v, err := streamSnapshot.Run(ctx, t.rdb, []string{streamKey(), streamMetaKey()}, NewEpoch(), n).Slice()
	if err != nil {
		return StreamState{}, nil, fmt.Errorf("redistier: stream snapshot: %w", err)
	}
	st, recs, err := streamReply(v)
	if err != nil {
		return st, nil, fmt.Errorf("redistier: stream snapshot: %w", err)
	}
	slices.Reverse(recs)
	return st, recs, nil
}

// StreamRange returns where the stream stands and up to count entries
// after the id after ("" from the oldest kept), read atomically, so that
// an entry trimmed meanwhile shows in the state's Trimmed. ok is false
// when there is no stream (nothing was ever appended, or it was lost).
// It is a request's read: traced, and bounded like a control call.
func (t *Tier) StreamRange(ctx context.Context, after string, count int) (st StreamState, recs []StreamRecord, ok bool, err error) {
	if t.rdb == nil {
		return st, nil, false, ErrNoStream
	}
	from := "-"
	if after != "" {
		from = "(" + after
	}
	st, recs, ok, err = t.streamRange(ctx, from, count)
	if err != nil {
		return st, nil, false, fmt.Errorf("redistier: stream range: %w", err)
	}
	return st, recs, ok, nil
}

// StreamCheck returns where the stream stands and, when at is an id,
// the record at that id (nil when there is none): the follower's look,
// after each read, at whether the stream still is the one it was
// reading. ok is false when there is no stream.
func (t *Tier) StreamCheck(ctx context.Context, at string) (st StreamState, rec *StreamRecord, ok bool, err error) {
	if t.rdb == nil {
		return st, nil, false, ErrNoStream
	}
	count := 0
	if at != "" {
		count = 1
	}
	st, recs, ok, err := t.streamRange(ctx, cmp.Or(at, "-"), count)
	if err != nil {
		return st, nil, false, fmt.Errorf("redistier: stream check: %w", err)
	}
	if len(recs) > 0 && recs[0].ID == at {
		rec = &recs[0]
	}
	return st, rec, ok, nil
}

// streamRange returns where the stream stands and up to count entries
// from from on ("-", "(<id>" for those after id, or "<id>" for id itself
// and those after), in one transaction of reads (MULTI: atomic, and not
// held by a CLIENT PAUSE WRITE as a script is); ok is false when there
// is no stream.
func (t *Tier) streamRange(ctx context.Context, from string, count int) (st StreamState, recs []StreamRecord, ok bool, err error) {
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	sctx, span := t.span(ctx, "MULTI")
	var meta *redis.SliceCmd
	var exists, length *redis.IntCmd
	var info *redis.XInfoStreamCmd
	var rng *redis.Cmd
	_, err = t.rdb.TxPipelined(sctx, func(p redis.Pipeliner) error {
		meta = p.HMGet(sctx, streamMetaKey(), "epoch", "trimmed")
		exists = p.Exists(sctx, streamKey())
		info = p.XInfoStream(sctx, streamKey())
		length = p.XLen(sctx, streamKey())
		if count > 0 {
			// Raw, not XRangeN: its fields keep their order.
			rng = p.Do(sctx, "XRANGE", streamKey(), from, "+", "COUNT", count)
		}
		return nil
	})
	endSpan(span, err)
	if exists.Err() != nil || exists.Val() == 0 {
		// XINFO fails without a stream: the transaction's error is its.
		return st, nil, false, exists.Err()
	}
	if err != nil {
		return st, nil, false, err
	}
	v := meta.Val()
	st.Epoch, _ = v[0].(string)
	st.Trimmed, _ = v[1].(string)
	if st.Epoch == "" {
		return st, nil, false, nil
	}
	st.Trimmed = cmp.Or(st.Trimmed, "0-0")
	st.Last = cmp.Or(info.Val().LastGeneratedID, "0-0")
	st.Length = length.Val()
	if rng != nil {
		raw, _ := rng.Val().([]any)
		if recs, err = parseRecords(raw); err != nil {
			return st, nil, false, err
		}
	}
	return st, recs, true, nil
}

// StreamRenew ends the stream's epoch old, if it still is the stream's,
// with a new one whose entries start after the stream's last id: what a
// reader does when it finds that the stream lost entries it had handed
// out, so that every id of old expires. It returns the stream's epoch
// after ("" when there is no stream: the next snapshot or append makes
// one), and whether this call renewed it. Redis runs it as one script:
// of the replicas that find the loss at once, one renews the epoch, and
// the others find it renewed.
func (t *Tier) StreamRenew(ctx context.Context, old string) (epoch string, renewed bool, err error) {
	if t.rdb == nil {
		return "", false, ErrNoStream
	}
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	v, err := streamRenew.Run(ctx, t.rdb, []string{streamKey(), streamMetaKey()}, old, NewEpoch()).Slice()
	if err != nil {
		return "", false, fmt.Errorf("redistier: stream renew: %w", err)
	}
	if len(v) != 2 {
		return "", false, fmt.Errorf("redistier: stream renew: a reply of %d parts", len(v))
	}
	epoch, _ = v[0].(string)
	n, _ := v[1].(int64)
	return epoch, n == 1, nil
}

// StreamRead waits up to block for entries after the id after, and
// returns up to count of them (none when block passed first). It holds a
// connection while it waits: the replica's one follower calls it. A read
// that has no answer within block and a control call's timeout fails.
func (t *Tier) StreamRead(ctx context.Context, after string, block time.Duration, count int) ([]StreamRecord, error) {
	if t.rdb == nil {
		return nil, ErrNoStream
	}
	ctx, cancel := context.WithTimeout(ctx, block+max(t.timeout, time.Second))
	defer cancel()
	res, err := t.rdb.XRead(ctx, &redis.XReadArgs{
		Streams: []string{streamKey(), after},
		Count:   int64(count),
		Block:   block,
	}).Result()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("redistier: stream read: %w", err)
	}
	var recs []StreamRecord
	for _, s := range res {
		for _, m := range s.Messages {
			recs = append(recs, messageRecord(m))
		}
	}
	return recs, nil
}

// streamReply reads {epoch, trimmed, last, length, records} as the
// scripts return it.
func streamReply(v []any) (StreamState, []StreamRecord, error) {
	if len(v) != 5 {
		return StreamState{}, nil, fmt.Errorf("a reply of %d parts", len(v))
	}
	var st StreamState
	st.Epoch, _ = v[0].(string)
	st.Trimmed, _ = v[1].(string)
	st.Last, _ = v[2].(string)
	st.Length, _ = v[3].(int64)
	if st.Epoch == "" {
		return st, nil, errors.New("no epoch")
	}
	if st.Trimmed == "" {
		st.Trimmed = "0-0"
	}
	raw, _ := v[4].([]any)
	recs, err := parseRecords(raw)
	return st, recs, err
}

// parseRecords reads entries as XRANGE returns them: {id, {name, value,
// ...}} each.
func parseRecords(raw []any) ([]StreamRecord, error) {
	recs := make([]StreamRecord, 0, len(raw))
	for _, r := range raw {
		pair, _ := r.([]any)
		if len(pair) != 2 {
			return nil, errors.New("a malformed entry")
		}
		id, _ := pair[0].(string)
		fields, _ := pair[1].([]any)
		rec := StreamRecord{ID: id, Fields: make([]string, 0, len(fields))}
		for _, f := range fields {
			s, _ := f.(string)
			rec.Fields = append(rec.Fields, s)
		}
		recs = append(recs, rec)
	}
	return recs, nil
}

// messageRecord is an XREAD message as a record. go-redis hands the
// fields over as a map, so their order is lost: readers find fields by
// name.
func messageRecord(m redis.XMessage) StreamRecord {
	rec := StreamRecord{ID: m.ID, Fields: make([]string, 0, 2*len(m.Values))}
	for k, v := range m.Values {
		s, _ := v.(string)
		rec.Fields = append(rec.Fields, k, s)
	}
	return rec
}
