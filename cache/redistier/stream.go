package redistier

import (
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
//
// The epoch names one life of the stream: a random value set when the
// stream is created, and again whenever the stream turns out to be gone
// (Redis restarted without persistence, the key was deleted or evicted)
// or the meta hash does. An id means something only with its epoch.
// trimmed is the newest id trimmed away, "0-0" when none was: a reader
// resuming after an id older than it has missed entries.
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
// that "the stream is gone" always means it was lost.
const ensureEpoch = `
local stream, meta = KEYS[1], KEYS[2]
local epoch = redis.call('HGET', meta, 'epoch')
if not epoch or redis.call('EXISTS', stream) == 0 then
  epoch = ARGV[1]
  redis.call('DEL', meta)
  redis.call('HSET', meta, 'epoch', epoch, 'trimmed', '0-0')
  if redis.call('EXISTS', stream) == 0 then
    redis.call('XADD', stream, 'MAXLEN', '0', '*', 'epoch', epoch)
  end
end
local function lastID()
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
return {epoch, redis.call('HGET', meta, 'trimmed'), lastID(), redis.call('XLEN', stream), recs}`)

// streamRange returns where the stream stands and up to ARGV[2] entries
// from ARGV[1] on ("-", or "(<id>" for those after id), in one atomic
// read; nothing at all when there is no stream.
var streamRange = redis.NewScript(`
local stream, meta = KEYS[1], KEYS[2]
local epoch = redis.call('HGET', meta, 'epoch')
if not epoch or redis.call('EXISTS', stream) == 0 then return {} end
local info = redis.call('XINFO', 'STREAM', stream)
local last = '0-0'
for k = 1, #info, 2 do
  if info[k] == 'last-generated-id' then last = info[k + 1] end
end
return {epoch, redis.call('HGET', meta, 'trimmed'), last, redis.call('XLEN', stream),
  redis.call('XRANGE', stream, ARGV[1], '+', 'COUNT', ARGV[2])}`)

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
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	sctx, span := t.span(ctx, "EVALSHA")
	v, err := streamRange.Run(sctx, t.rdb, []string{streamKey(), streamMetaKey()}, from, count).Slice()
	endSpan(span, err)
	if err != nil {
		return st, nil, false, fmt.Errorf("redistier: stream range: %w", err)
	}
	if len(v) == 0 {
		return st, nil, false, nil
	}
	st, recs, err = streamReply(v)
	if err != nil {
		return st, nil, false, fmt.Errorf("redistier: stream range: %w", err)
	}
	return st, recs, true, nil
}

// StreamRead waits up to block for entries after the id after, and
// returns up to count of them (none when block passed first). It holds a
// connection while it waits: the replica's one follower calls it.
func (t *Tier) StreamRead(ctx context.Context, after string, block time.Duration, count int) ([]StreamRecord, error) {
	if t.rdb == nil {
		return nil, ErrNoStream
	}
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

// StreamMeta returns the stream's epoch, newest trimmed id and length
// ("" epoch: there is no stream), for a follower to check that what it
// read continues what it had.
func (t *Tier) StreamMeta(ctx context.Context) (StreamState, error) {
	if t.rdb == nil {
		return StreamState{}, ErrNoStream
	}
	ctx, cancel := t.controlCtx(ctx)
	defer cancel()
	pipe := t.rdb.Pipeline()
	meta := pipe.HMGet(ctx, streamMetaKey(), "epoch", "trimmed")
	n := pipe.XLen(ctx, streamKey())
	exists := pipe.Exists(ctx, streamKey())
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return StreamState{}, fmt.Errorf("redistier: stream meta: %w", err)
	}
	var st StreamState
	if v := meta.Val(); len(v) == 2 && exists.Val() == 1 {
		st.Epoch, _ = v[0].(string)
		st.Trimmed, _ = v[1].(string)
	}
	st.Length = n.Val()
	return st, nil
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
	recs := make([]StreamRecord, 0, len(raw))
	for _, r := range raw {
		pair, _ := r.([]any)
		if len(pair) != 2 {
			return st, nil, errors.New("a malformed entry")
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
	return st, recs, nil
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
