package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
	"github.com/prodapi/prodapi/test/realserver"
)

// The convergence tests: a mirroring client that follows the README keeps
// an exact copy of a newsroom that three replicas on one real
// redis-server serve, through random edits and the failures of a real
// deployment.
// convergeSize is the size of the runs: the newsroom's items
// (prodapi-seed -scale's copies of the sample, with their planning,
// events and assignments), the edits each run makes, and whether every
// run is made. make test makes 300 items and 40 edits, and only the runs
// that end with the client on another replica or another epoch (a
// replica killed, a lost tail), in about a minute;
// PRODAPI_TEST_CONVERGE=full makes the full run: 2000 items, 200 edits
// and all five runs (about fifteen minutes here).
func convergeSize(t *testing.T) (items, edits int, all bool) {
	t.Helper()
	switch v := os.Getenv("PRODAPI_TEST_CONVERGE"); v {
	case "":
		return 300, 40, false
	case "full":
		return 2000, 200, true
	default:
		t.Fatalf("PRODAPI_TEST_CONVERGE=%q: want full or nothing", v)
		return 0, 0, false
	}
}

// convergeSeed is the seed of the runs' edits: PRODAPI_TEST_CONVERGE_SEED,
// or a new one each run, logged so that a failure can be run again.
func convergeSeed(t *testing.T) uint64 {
	t.Helper()
	if v := os.Getenv("PRODAPI_TEST_CONVERGE_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("PRODAPI_TEST_CONVERGE_SEED=%q: want a number", v)
		}
		return seed
	}
	return uint64(time.Now().UnixNano())
}

// scaledNewsroom returns a directory of the test's own holding a newsroom
// of items items, as prodapi-seed -scale -out writes it (made once for
// the package's tests).
func scaledNewsroom(t *testing.T, items int) string {
	t.Helper()
	bin := seedBinary(t)
	tmpl := realserver.Shared(t, &servers, fmt.Sprintf("a newsroom of %d items", items), func() (string, error) {
		dir, err := os.MkdirTemp("", "prodapi-newsroom-")
		if err != nil {
			return "", err
		}
		servers.OnClose(func() { os.RemoveAll(dir) })
		room := filepath.Join(dir, "room")
		if out, err := exec.Command(bin, "-scale", strconv.Itoa(items), "-out", room).CombinedOutput(); err != nil {
			return "", fmt.Errorf("prodapi-seed -scale %d -out: %v\n%s", items, err, out)
		}
		return room, nil
	})
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(tmpl)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A convFixture is one run: the newsroom, the redis-server (with
// append-only persistence in aof), the three replicas and the client.
type convFixture struct {
	t      *testing.T
	edits  int // how many edits the run makes
	room   *convRoom
	redis  *realserver.Redis
	aof    string
	fleet  []*instance
	live   []bool
	client *convClient
	auth   string
	// refusals is refusedWrites when a failure began (-1: the failure
	// was seen).
	refusals float64
	// killed is the replica killed, atKill the entries the client had
	// applied from each replica then.
	killed int
	atKill map[int]int
	// atRedisKill is the log's stream when redis-server was killed, and
	// readByRestart the entries the client had applied when it started
	// again ("resource/_id op", in order): what lostTail compares.
	atRedisKill   []convRecord
	readByRestart []string
}

// startAOFRedis starts a redis-server with append-only persistence (every
// write on disk before its reply) in dir, on port (0: a free one).
func startAOFRedis(t *testing.T, dir string, port int) *realserver.Redis {
	t.Helper()
	return realserver.StartRedis(t, port, "--dir", dir, "--appendonly", "yes", "--appendfsync", "always")
}

// refusedWrites sums, over the live replicas, the writes to Redis they
// counted as failed: appends to the log and invalidations.
func (f *convFixture) refusedWrites() float64 {
	total := 0.0
	for i, in := range f.fleet {
		if f.live[i] {
			total += in.metric(f.t, `prodapi_changes_append_errors_total{source="sandbox"}`) +
				in.metric(f.t, `prodapi_cache_redis_errors_total{op="invalidate"}`)
		}
	}
	return total
}

// A convVariant is a failure a run goes through: before runs before each
// edit n (1 to the run's edits) and may break something or mend it; check
// holds the run's counts to what the failure allows.
type convVariant struct {
	name   string
	quick  bool // made by make test too (see convergeSize)
	before func(f *convFixture, n int)
	check  func(f *convFixture, stats convStats)
}

// convVariants are the runs: no failure, a replica killed, redis-server
// killed and restarted on its append-only file (whole, and lacking its
// tail), and a failover's write pause.
var convVariants = []convVariant{
	{name: "no failure", check: noResync},
	{name: "a replica killed mid-stream", quick: true, before: killReplica, check: func(f *convFixture, s convStats) {
		noResync(f, s)
		after := 0
		for i, n := range s.byReplica {
			if i != f.killed {
				after += n - f.atKill[i]
			}
		}
		if after == 0 {
			f.t.Errorf("entries by replica %v, %v when replica %d was killed: none from another since", s.byReplica, f.atKill, f.killed)
		}
	}},
	{name: "redis-server killed and restarted on its append-only file", before: restartRedis(false), check: func(f *convFixture, s convStats) {
		if s.unavailable+s.dropped == 0 {
			f.t.Errorf("the client never saw the outage: %v", s)
		}
	}},
	// The restart loses the entries appended after the files were
	// copied. Where the client had read some, the epoch must end: a 410
	// and a resync. (Seed 1795930714042342582 once got neither: the
	// replicas' retried appends reached the restarted Redis before their
	// followers looked, and each follower looked only for the entry its
	// replica had just appended; package changelog now looks for the
	// newest one it read as well.) Where the client had read none, the
	// epoch ends all the same once a replica had read or appended one;
	// only appends cut short by the kill, which their feeds retry, are
	// lost without a 410 and without an edit lost: the unseen-edit check
	// and the comparison hold there.
	{name: "redis-server restarted on an append-only file lacking its tail", quick: true, before: restartRedis(true), check: func(f *convFixture, s convStats) {
		if s.unavailable+s.dropped == 0 {
			f.t.Errorf("the client never saw the outage: %v", s)
		}
		lost, read := f.lostTail()
		f.t.Logf("the restart lost %d entries, %d of which the client had read", lost, read)
		if read > 0 && s.gone == 0 {
			f.t.Errorf("the log lost %d entries the client had read, and the client got no 410: %v", read, s)
		}
		if s.gone > 0 && s.syncs < 2 {
			f.t.Errorf("a 410 without a resync: %v", s)
		}
	}},
	{name: "CLIENT PAUSE 6000 WRITE", before: pauseWrites, check: noResync},
}

// noResync: the log lost nothing, so the client never had to start over.
func noResync(f *convFixture, s convStats) {
	if s.gone > 0 || s.syncs != 1 {
		f.t.Errorf("the client got %d 410s and synced %d times, want none and once: %v", s.gone, s.syncs, s)
	}
}

// killReplica stops the replica the client follows mid-run, once the
// client has applied entries read from it: the client resumes on another
// with Last-Event-ID.
func killReplica(f *convFixture, n int) {
	if n != f.edits/2 {
		return
	}
	eventually(f.t, "entries streamed from the replica the client reads", func() bool {
		var ok bool
		f.killed, ok = f.client.streaming()
		return ok
	})
	_, _, s := f.client.snapshot()
	f.atKill = s.byReplica
	if err := f.fleet[f.killed].stop(); err != nil {
		f.t.Errorf("stopping replica %d: %v", f.killed, err)
	}
	f.live[f.killed] = false
}

// restartRedis kills redis-server (SIGKILL) at 2/5 of the edits and
// starts it again on its files once a replica has had a write refused
// meanwhile, edits going on all along. With lost, the files it restarts
// on are those of a fifth of the edits earlier: the log lost its tail.
func restartRedis(lost bool) func(f *convFixture, n int) {
	saved := ""
	return func(f *convFixture, n int) {
		t := f.t
		switch {
		case lost && n == f.edits/5:
			saved = filepath.Join(t.TempDir(), "appendonlydir")
			if out, err := exec.Command("cp", "-a", filepath.Join(f.aof, "appendonlydir"), saved).CombinedOutput(); err != nil {
				t.Fatalf("copying the append-only files: %v %s", err, out)
			}
		case n == 2*f.edits/5:
			f.refusals = f.refusedWrites()
			f.atRedisKill = f.streamRecords()
			f.redis.Kill()
			<-f.redis.Done()
		case n == 3*f.edits/5:
			eventually(t, "a write refused while Redis is down", func() bool { return f.refusedWrites() > f.refusals })
			f.readByRestart = f.client.appliedOrder()
			if lost {
				if err := os.RemoveAll(filepath.Join(f.aof, "appendonlydir")); err != nil {
					t.Fatal(err)
				}
				if out, err := exec.Command("cp", "-a", saved, filepath.Join(f.aof, "appendonlydir")).CombinedOutput(); err != nil {
					t.Fatalf("restoring the append-only files: %v %s", err, out)
				}
			}
			f.redis = startAOFRedis(t, f.aof, f.redis.Port)
		}
	}
}

// A convRecord is an entry of the log's stream, as the client names it
// ("resource/_id op") with its stream id.
type convRecord struct{ id, entry string }

// streamRecords reads the log's stream (every entry since the run began:
// nothing is trimmed in a run).
func (f *convFixture) streamRecords() []convRecord {
	f.t.Helper()
	reply, err := f.redis.Do(context.Background(), "XRANGE", "prodapi:v1:{changes}:stream", "-", "+")
	if err != nil {
		f.t.Fatalf("reading the log's stream: %v", err)
	}
	var out []convRecord
	for _, r := range reply.([]any) {
		r := r.([]any)
		fields := map[string]string{}
		kv := r[1].([]any)
		for i := 0; i+1 < len(kv); i += 2 {
			fields[kv[i].(string)] = kv[i+1].(string)
		}
		out = append(out, convRecord{id: r[0].(string), entry: fields["r"] + "/" + fields["i"] + " " + fields["o"]})
	}
	return out
}

// lostTail compares the stream when redis-server was killed with the
// stream now: it returns how many of the former's entries are gone (the
// append-only file lacked them; appends after the restart are new
// entries, with new ids), and how many of those the client had read
// (the client reads every entry after its first position, in order:
// what it applied before the restart is a run of the former).
func (f *convFixture) lostTail() (lost, read int) {
	f.t.Helper()
	now := map[convRecord]bool{}
	for _, r := range f.streamRecords() {
		now[r] = true
	}
	applied := f.readByRestart
	end := -1 // the index of the client's position in atRedisKill
	if len(applied) > 0 {
		for o := 0; o+len(applied) <= len(f.atRedisKill) && end < 0; o++ {
			if slices.EqualFunc(f.atRedisKill[o:o+len(applied)], applied, func(r convRecord, e string) bool { return r.entry == e }) {
				end = o + len(applied) - 1
			}
		}
		if end < 0 {
			f.t.Fatalf("the %d entries the client applied are no run of the %d in the stream", len(applied), len(f.atRedisKill))
		}
	}
	for i, r := range f.atRedisKill {
		if !now[r] {
			lost++
			if i <= end {
				read++
			}
		}
	}
	return lost, read
}

// pauseWrites pauses Redis's writes for 6 s (CLIENT PAUSE 6000 WRITE, a
// failover's pause) at half the edits, and again before each edit until
// a replica had a write refused; the last pause then runs out.
func pauseWrites(f *convFixture, n int) {
	pause := func() {
		if _, err := f.redis.Do(context.Background(), "CLIENT", "PAUSE", "6000", "WRITE"); err != nil {
			f.t.Fatal(err)
		}
	}
	switch {
	case n == f.edits/2:
		f.refusals = f.refusedWrites()
		pause()
	case n > f.edits/2 && f.refusals >= 0:
		if f.refusedWrites() > f.refusals {
			f.refusals = -1 // seen: the pause runs out
			return
		}
		pause()
		if n == 3*f.edits/4 {
			eventually(f.t, "a write refused during the pause", func() bool { pause(); return f.refusedWrites() > f.refusals })
			f.refusals = -1
		}
	}
}

// Three replicas on one real redis-server and a sandbox newsroom of
// convergeSize's items; a client mirroring it as the README says
// (include=doc, the event stream, Last-Event-ID, a 410's resync). The
// newsroom takes convergeSize's random edits (seeded, the seed logged):
// updates, inserts and deletes of items, desks, users, contacts,
// planning, events and assignments, and edits that move links (an item's
// assignment, an assignment's planning, a coverage's assignment, a
// planning's event), so that what other documents embed moves. Then the
// client has seen every edit, and its copy equals a fresh cursor walk of
// every list on each live replica: no document missing, extra or stale,
// derived fields included. The same holds when the replica the client
// follows is killed mid-stream, when redis-server is killed and
// restarted on its append-only file (whole: every edit reaches the log;
// lacking its tail: the client gets a 410 and converges after its
// resync), and under a failover's CLIENT PAUSE 6000 WRITE.
func TestFleetMirrorConverges(t *testing.T) {
	if testing.Short() {
		t.Skip("three replicas on a real redis-server, through five runs of edits")
	}
	seed := convergeSeed(t)
	t.Logf("seed %d (PRODAPI_TEST_CONVERGE_SEED=%d runs these edits again)", seed, seed)
	_, _, all := convergeSize(t)
	for i, v := range convVariants {
		t.Run(v.name, func(t *testing.T) {
			if !all && !v.quick {
				t.Skip("PRODAPI_TEST_CONVERGE=full makes this run")
			}
			converge(t, v, seed+uint64(i))
		})
	}
}

// converge makes one run of v.
func converge(t *testing.T, v convVariant, seed uint64) {
	started := time.Now()
	items, edits, _ := convergeSize(t)
	f := &convFixture{t: t, edits: edits, aof: t.TempDir(), auth: bearer(t, devSecret, sources.AllScopes...)}
	dir := scaledNewsroom(t, items)
	f.room = openConvRoom(t, dir, seed)
	f.redis = startAOFRedis(t, f.aof, 0)
	// One public URL for the fleet, as behind a load balancer: every
	// replica's hrefs name it.
	f.fleet = startFleet(t, 3, dir, f.redis.URL(), "PRODAPI_URL", "http://prodapi.example")
	f.live = []bool{true, true, true}
	t.Cleanup(func() {
		if t.Failed() {
			for i, in := range f.fleet {
				t.Logf("replica %d's warnings:\n%s", i, warnings(in.stderr.String()))
			}
		}
	})
	var bases []string
	for _, in := range f.fleet {
		bases = append(bases, in.base)
	}
	f.client = startConvClient(t, bases, f.auth)
	eventually(t, "the client's first walk", func() bool { return f.client.following(0) })
	synced := time.Now()

	// An editor's pause between saves: the watchers' settle time (50 ms)
	// passes between some edits, so that reloads, appends and the stream
	// run all along the edits, not once at their end.
	think := rand.New(rand.NewPCG(seed, 1))
	for n := 1; n <= f.edits; n++ {
		if v.before != nil {
			v.before(f, n)
		}
		f.room.edit(t)
		time.Sleep(time.Duration(20+think.IntN(100)) * time.Millisecond)
	}
	edited := time.Now()
	f.client.waitSeen(t, f.room.edits)
	// The last edit: once its entry is applied, so is every entry before
	// it, derived ones included (each replica appends a change with what
	// it derives, in order).
	last := f.room.set(t, "desks")
	f.client.waitSeen(t, []convEdit{last})
	seen := time.Now()

	copied, since, stats := f.client.snapshot()
	for i, in := range f.fleet {
		if f.live[i] {
			f.compare(in, copied, since)
		}
	}
	v.check(f, stats)
	// Entries of documents no edit touched: derived ones.
	touched := map[string]bool{}
	for _, e := range append(f.room.edits, last) {
		touched[e.resource+"/"+e.id] = true
	}
	derived := 0
	for key, n := range stats.byDoc {
		if !touched[key] {
			derived += n
		}
	}
	t.Logf("%d edits: synced in %v, edited in %v, all seen %v later, compared in %v; %d derived entries; the client: %v",
		len(f.room.edits), synced.Sub(started).Round(time.Millisecond), edited.Sub(synced).Round(time.Millisecond),
		seen.Sub(edited).Round(time.Millisecond), time.Since(seen).Round(time.Millisecond), derived, stats)
}

// compare holds the client's copy to a fresh cursor walk of every list
// on a replica, with min_position (the client's), so that the walk is at
// least as new as the copy.
func (f *convFixture) compare(in *instance, copied map[string]map[string]json.RawMessage, since string) {
	t := f.t
	t.Helper()
	client := &http.Client{Timeout: 2 * time.Minute}
	for _, res := range sources.Resources() {
		var walked map[string]json.RawMessage
		// A 503 (the replica has not applied the log up to since within
		// PRODAPI_MIN_POSITION_WAIT, or cannot follow it for a moment) is
		// tried again, as a client does.
		eventually(t, "a fresh walk of "+res.Name+" on "+in.base, func() bool {
			var err error
			walked, err = walkList(context.Background(), client, in.base, res.Name, f.auth, since)
			if err != nil && convCode(err) != http.StatusServiceUnavailable {
				t.Fatalf("a fresh walk on %s: %v", in.base, err)
			}
			return err == nil
		})
		var missing, extra, stale []string
		for id, doc := range walked {
			c, ok := copied[res.Name][id]
			if !ok {
				missing = append(missing, id)
				continue
			}
			if diff := convDiff(res, c, doc); diff != "" {
				stale = append(stale, id+" ("+diff+")")
			}
		}
		for id := range copied[res.Name] {
			if _, ok := walked[id]; !ok {
				extra = append(extra, id)
			}
		}
		slices.Sort(missing)
		slices.Sort(extra)
		slices.Sort(stale)
		if len(missing)+len(extra)+len(stale) > 0 {
			t.Errorf("%s on %s: of %d documents, the copy lacks %d %q, has %d extra %q, and %d stale: %q",
				res.Name, in.base, len(walked), len(missing), firstFew(missing), len(extra), firstFew(extra), len(stale), firstFew(stale))
		}
	}
}

// convDiff compares a document of the copy with the walk's, as a detail
// and a list item may differ: a detail's _links has parent and
// collection, and a detail of a resource with a projection (items,
// contacts) has only its fields. It names the top-level fields that
// differ otherwise ("" when none does).
func convDiff(res *sources.Resource, copied, walked json.RawMessage) string {
	a, b := convNormal(res, copied), convNormal(res, walked)
	var out []string
	for k := range a {
		if _, ok := b[k]; !ok {
			out = append(out, "-"+k)
		}
	}
	for k, v := range b {
		w, ok := a[k]
		switch {
		case !ok:
			out = append(out, "+"+k)
		case string(w) != string(v):
			out = append(out, fmt.Sprintf("%s: %.200s, want %.200s", k, w, v))
		}
	}
	slices.Sort(out)
	return strings.Join(out, "; ")
}

// convNormal is a document's top-level fields, each as canonical JSON
// (object keys sorted), with what differs between a detail and a list
// item left out.
func convNormal(res *sources.Resource, doc json.RawMessage) map[string]string {
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		return map[string]string{"": "unparsable: " + string(doc)}
	}
	if links, ok := m["_links"].(map[string]any); ok {
		delete(links, "parent")
		delete(links, "collection")
	}
	out := map[string]string{}
	for k, v := range m {
		if res.Projection != nil && k != "_links" && !slices.Contains(res.Projection, k) {
			continue
		}
		b, _ := json.Marshal(v)
		out[k] = string(b)
	}
	return out
}

// firstFew is at most the first five of list.
func firstFew(list []string) []string { return list[:min(5, len(list))] }

// warnings are the log lines of a replica above Info.
func warnings(log string) string {
	var out []string
	for line := range strings.SplitSeq(log, "\n") {
		if strings.Contains(line, `"level":"WARN"`) || strings.Contains(line, `"level":"ERROR"`) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
