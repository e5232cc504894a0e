package redistier

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/test/realserver"
)

// realTier is a tier on a redis-server of the test's own, and a client of
// it for looking underneath.
func realTier(t *testing.T) (*Tier, *realserver.Redis) {
	t.Helper()
	srv := realserver.StartRedis(t, 0)
	rdb := realserver.RedisClient(srv.Addr())
	t.Cleanup(func() { rdb.Close() })
	tr := New(rdb, Options{Timeout: 5 * time.Second})
	t.Cleanup(func() { closeTier(t, tr) })
	return tr, srv
}

var day = StreamLimits{MaxLen: 1000, Retain: 24 * time.Hour, SeenTTL: time.Hour}

func record(id string) []string { return []string{"r", "items", "i", id, "o", "update"} }

func TestRealRedisStreamAppendAndRead(t *testing.T) {
	tr, _ := realTier(t)
	ctx := t.Context()
	st, _, ids, err := tr.StreamAppend(ctx, []StreamAppend{
		{Records: [][]string{record("a")}},
		{Seen: "doc-b", Version: "v1", Records: [][]string{record("b"), record("b")}},
	}, day)
	if err != nil {
		t.Fatal(err)
	}
	if st.Epoch == "" || st.Length != 3 || len(ids) != 2 || len(ids[0]) != 1 || len(ids[1]) != 2 {
		t.Fatalf("state %+v, ids %v", st, ids)
	}
	epoch := st.Epoch

	// The same version of b again is a duplicate; another is not; a
	// change without a seen key always goes in.
	st, _, again, err := tr.StreamAppend(ctx, []StreamAppend{
		{Seen: "doc-b", Version: "v1", Records: [][]string{record("b")}},
		{Seen: "doc-b", Version: "v2", Records: [][]string{record("b")}},
		{Records: [][]string{record("a")}},
	}, day)
	if err != nil {
		t.Fatal(err)
	}
	if again[0] != nil || len(again[1]) != 1 || len(again[2]) != 1 || st.Epoch != epoch || st.Length != 5 {
		t.Fatalf("second append: state %+v, ids %v", st, again)
	}

	all := slices.Concat(ids[0], ids[1], again[1], again[2])
	st, recs, ok, err := tr.StreamRange(ctx, "", 100)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	if got := recordIDs(recs); !slices.Equal(got, all) {
		t.Errorf("range from the oldest: %v, want %v", got, all)
	}
	if diff := cmp.Diff(recs[0].Fields, record("a")); diff != "" {
		t.Errorf("fields (-got +want):\n%s", diff)
	}
	if st.Epoch != epoch || st.Trimmed == "0-0" || st.Last != all[len(all)-1] || st.Length != 5 {
		t.Errorf("range state %+v", st)
	}
	_, recs, _, _ = tr.StreamRange(ctx, all[1], 2)
	if got := recordIDs(recs); !slices.Equal(got, all[2:4]) {
		t.Errorf("range after %s: %v, want %v", all[1], got, all[2:4])
	}

	st, recs, err = tr.StreamSnapshot(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	if got := recordIDs(recs); st.Epoch != epoch || !slices.Equal(got, all[3:]) {
		t.Errorf("snapshot: %+v %v, want the newest two oldest first, %v", st, got, all[3:])
	}

	recs, err = tr.StreamRead(ctx, all[2], time.Second, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := recordIDs(recs); !slices.Equal(got, all[3:]) {
		t.Errorf("read after %s: %v, want %v", all[2], got, all[3:])
	}
	if recs, err := tr.StreamRead(ctx, all[4], 10*time.Millisecond, 10); err != nil || len(recs) != 0 {
		t.Errorf("read at the end: %v, %v; want nothing once the block passes", recs, err)
	}
	// A reader blocked at the end wakes with the next append.
	got := make(chan []StreamRecord, 1)
	go func() { // ends when the read returns: an entry, or the 30s block
		recs, _ := tr.StreamRead(ctx, all[4], 30*time.Second, 10)
		got <- recs
	}()
	_, _, next, err := tr.StreamAppend(ctx, []StreamAppend{{Records: [][]string{record("c")}}}, day)
	if err != nil {
		t.Fatal(err)
	}
	if recs := <-got; !slices.Equal(recordIDs(recs), next[0]) {
		t.Errorf("blocked read: %v, want %v", recordIDs(recs), next[0])
	}
	last := next[0][0]
	st, rec, ok, err := tr.StreamCheck(ctx, all[1])
	if err != nil || !ok || st.Epoch != epoch || st.Length != 6 || st.Last != last {
		t.Errorf("check: %+v %v %v", st, ok, err)
	}
	if rec == nil || rec.ID != all[1] || !slices.Equal(rec.Fields, record("b")) {
		t.Errorf("check: the record at %s: %+v", all[1], rec)
	}
	// An id that is no entry's: no record (not the next one).
	if _, rec, _, err := tr.StreamCheck(ctx, "1-0"); err != nil || rec != nil {
		t.Errorf("check at 1-0: %+v, %v; want none", rec, err)
	}
	if _, rec, ok, err := tr.StreamCheck(ctx, ""); err != nil || !ok || rec != nil {
		t.Errorf("check of the state alone: %+v %v %v", rec, ok, err)
	}
}

// A renewal ends the epoch it names, if it is still the stream's: the
// new one starts after the last id, so that the old entries are not the
// new epoch's.
func TestRealRedisStreamRenew(t *testing.T) {
	tr, _ := realTier(t)
	ctx := t.Context()
	st, _, _, err := tr.StreamAppend(ctx, []StreamAppend{{Records: [][]string{record("a")}}}, day)
	if err != nil {
		t.Fatal(err)
	}
	old := st.Epoch
	if got, did, err := tr.StreamRenew(ctx, "0123456789abcdef"); err != nil || got != old || did {
		t.Errorf("renewing another epoch: %q %v, %v; want the stream's, %q, kept", got, did, err, old)
	}
	renewed, did, err := tr.StreamRenew(ctx, old)
	if err != nil || !did || renewed == old || len(renewed) != 16 {
		t.Fatalf("renewing the stream's epoch: %q %v, %v", renewed, did, err)
	}
	// A second renewal of the old epoch (another replica found the same
	// loss) leaves the new one.
	if again, did, err := tr.StreamRenew(ctx, old); err != nil || again != renewed || did {
		t.Errorf("renewing the old epoch again: %q %v, %v; want %q, not renewed", again, did, err, renewed)
	}
	st, recs, ok, err := tr.StreamRange(ctx, "", 10)
	if err != nil || !ok || st.Epoch != renewed || st.Trimmed != st.Last || len(recs) != 1 {
		t.Errorf("after the renewal: %+v, %d records, %v %v; want the new epoch, trimmed through the last id", st, len(recs), ok, err)
	}
}

// The follower's reads and a request's are read-only: a CLIENT PAUSE
// WRITE, the pause of a failover, does not hold them, while it holds an
// append.
func TestRealRedisStreamReadsDuringAWritePause(t *testing.T) {
	tr, srv := realTier(t)
	ctx := t.Context()
	st, _, ids, err := tr.StreamAppend(ctx, []StreamAppend{{Records: [][]string{record("a")}}}, day)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do(ctx, "CLIENT", "PAUSE", "60000", "WRITE"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Do(context.Background(), "CLIENT", "UNPAUSE") })
	if got, _, ok, err := tr.StreamCheck(ctx, ids[0][0]); err != nil || !ok || got.Epoch != st.Epoch {
		t.Errorf("check during the pause: %+v %v %v", got, ok, err)
	}
	if _, recs, ok, err := tr.StreamRange(ctx, "", 10); err != nil || !ok || len(recs) != 1 {
		t.Errorf("range during the pause: %d records, %v %v", len(recs), ok, err)
	}
	if _, err := tr.StreamRead(ctx, ids[0][0], 10*time.Millisecond, 10); err != nil {
		t.Errorf("read during the pause: %v", err)
	}
	if _, _, _, err := tr.StreamAppend(ctx, []StreamAppend{{Records: [][]string{record("b")}}}, day); err == nil {
		t.Error("an append went through the pause (it should time out: the pause holds it)")
	}
}

func recordIDs(recs []StreamRecord) []string {
	var ids []string
	for _, r := range recs {
		ids = append(ids, r.ID)
	}
	return ids
}

// Trimming keeps the newest MaxLen entries and none older than Retain,
// and records the newest id it removed.
func TestRealRedisStreamTrims(t *testing.T) {
	tr, srv := realTier(t)
	ctx := t.Context()
	limits := day
	limits.MaxLen = 3
	var ids []string
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		st, _, added, err := tr.StreamAppend(ctx, []StreamAppend{{Records: [][]string{record(id)}}}, limits)
		if err != nil {
			t.Fatal(err)
		}
		if st.Length > 3 {
			t.Errorf("after %s: length %d", id, st.Length)
		}
		ids = append(ids, added[0]...)
	}
	st, recs, _, err := tr.StreamRange(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if got := recordIDs(recs); !slices.Equal(got, ids[2:]) || st.Trimmed != ids[1] {
		t.Errorf("kept %v, trimmed through %s; want %v through %s", got, st.Trimmed, ids[2:], ids[1])
	}

	// By age: an entry from 1970 goes on the next append.
	if _, err := srv.Do(ctx, "DEL", streamKey()); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do(ctx, "XADD", streamKey(), "1-5", "r", "items", "i", "old", "o", "update"); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do(ctx, "HSET", streamMetaKey(), "epoch", "e1", "trimmed", "0-0"); err != nil {
		t.Fatal(err)
	}
	st, trimmed, added, err := tr.StreamAppend(ctx, []StreamAppend{{Records: [][]string{record("new")}}}, day)
	if err != nil {
		t.Fatal(err)
	}
	if st.Epoch != "e1" || trimmed != 1 || st.Length != 1 {
		t.Errorf("state %+v, trimmed %d; want epoch e1, one trimmed, one kept", st, trimmed)
	}
	st, recs, _, _ = tr.StreamRange(ctx, "", 10)
	if got := recordIDs(recs); !slices.Equal(got, added[0]) || st.Trimmed != "1-5" {
		t.Errorf("kept %v, trimmed through %s; want %v through 1-5", got, st.Trimmed, added[0])
	}
}

// A stream that is lost (deleted, or Redis restarted empty) comes back
// under a new epoch; so does one whose meta is lost.
func TestRealRedisStreamEpoch(t *testing.T) {
	tr, srv := realTier(t)
	ctx := context.Background()
	st, _, err := tr.StreamSnapshot(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	first := st.Epoch
	if first == "" || st.Length != 0 || st.Last == "" || st.Last == "0-0" || st.Trimmed != st.Last {
		t.Fatalf("a new stream: %+v; want its creation marker, trimmed, as its last id and trim mark", st)
	}
	again, _, _ := tr.StreamSnapshot(ctx, 10)
	if again.Epoch != first || again.Last != st.Last {
		t.Errorf("a second snapshot: %+v, want %+v", again, st)
	}
	for _, lose := range []string{streamKey(), streamMetaKey()} {
		if _, err := srv.Do(ctx, "DEL", lose); err != nil {
			t.Fatal(err)
		}
		if meta, _, ok, err := tr.StreamCheck(ctx, ""); err != nil || ok {
			t.Errorf("check with %s lost: %+v, %v %v; want no stream", lose, meta, ok, err)
		}
		next, _, _, err := tr.StreamAppend(ctx, []StreamAppend{{Records: [][]string{record("a")}}}, day)
		if err != nil {
			t.Fatal(err)
		}
		if next.Epoch == "" || next.Epoch == first {
			t.Errorf("%s lost: epoch %q, want a new one", lose, next.Epoch)
		}
		// A new stream starts at its creation marker; one kept without
		// its meta hash at 0-0.
		if got, _, _, err := tr.StreamCheck(ctx, ""); err != nil || (got.Trimmed == "0-0") != (lose == streamMetaKey()) {
			t.Errorf("%s lost: trim mark %q, %v", lose, got.Trimmed, err)
		}
		first = next.Epoch
	}
	if _, _, ok, err := tr.StreamRange(ctx, "", 1); !ok || err != nil {
		t.Errorf("range: %v %v", ok, err)
	}
	if _, err := srv.Do(ctx, "FLUSHALL"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, err := tr.StreamRange(ctx, "", 1); ok || err != nil {
		t.Errorf("range of no stream: ok %v, %v; want not ok", ok, err)
	}
}

func TestStreamWithoutRedis(t *testing.T) {
	tr := New(nil, Options{})
	defer closeTier(t, tr)
	if _, _, _, err := tr.StreamAppend(t.Context(), nil, day); err != ErrNoStream {
		t.Errorf("append: %v", err)
	}
	if _, err := tr.StreamRead(t.Context(), "0-0", time.Millisecond, 1); err != ErrNoStream {
		t.Errorf("read: %v", err)
	}
	if _, _, _, err := tr.StreamCheck(t.Context(), ""); err != ErrNoStream {
		t.Errorf("check: %v", err)
	}
	if _, _, err := tr.StreamRenew(t.Context(), "e"); err != ErrNoStream {
		t.Errorf("renew: %v", err)
	}
}
