package cache

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// A compressed body is kept in a slice of its own size, and an entry is
// charged for the whole array behind its body: the in-process tier's
// byte bound counts what the entries really hold.
func TestEntryIsChargedWhatItHolds(t *testing.T) {
	c := New(nil, newBackend(), Options{})
	defer closeCache(t, c)
	now := time.Now()
	big := body(list(t, "items"), 1, 300<<10) // compresses to almost nothing
	e := c.newEntry(&sources.Representation{Status: 200, Body: big, ETag: `"x"`}, now, time.Minute, 0)
	if !e.gzip {
		t.Fatal("a 300 KiB body was not compressed")
	}
	if slack := cap(e.body) - len(e.body); slack > len(e.body)/8+64 {
		t.Errorf("compressed body: len %d, cap %d: the entry keeps %d bytes it is not charged for", len(e.body), cap(e.body), slack)
	}
	if e.size() < int64(cap(e.body)) {
		t.Errorf("size %d < cap(body) %d", e.size(), cap(e.body))
	}

	// A loader's gzip body sliced from a larger buffer.
	buf := make([]byte, 100, 64<<10)
	e = c.newEntry(&sources.Representation{Status: 200, Gzip: buf, ETag: `"y"`}, now, time.Minute, 0)
	if e.size() > 4<<10 {
		t.Errorf("a 100-byte body sliced from 64 KiB: the entry holds the 64 KiB (size %d)", e.size())
	}
	// The same for a small plain body.
	e = c.newEntry(&sources.Representation{Status: 404, Body: buf[:10], ETag: `"z"`}, now, time.Minute, 0)
	if e.size() > 4<<10 {
		t.Errorf("a 10-byte body sliced from 64 KiB: the entry holds the 64 KiB (size %d)", e.size())
	}

	// A decoded value keeps its whole buffer alive.
	v := encode("k", sampleEntry())
	d, err := decode("k", v)
	if err != nil {
		t.Fatal(err)
	}
	if d.size() < int64(len(v)) {
		t.Errorf("decoded entry: size %d < the %d-byte value it aliases", d.size(), len(v))
	}
}

// heapInUse returns the live heap after a full collection.
func heapInUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// Many distinct large keys through a small tier: the live heap stays
// within a small multiple of the tier's budget. (Before entries were
// charged what they hold, 1,000 keys of 16 KiB kept ~6 MiB alive in a
// 512 KiB tier.)
func TestLocalTierBoundsTheHeap(t *testing.T) {
	const budget = 512 << 10
	be := newBackend()
	be.size = 16 << 10
	c := New(nil, be, Options{LocalBytes: budget})
	defer closeCache(t, c)
	before := heapInUse()
	for i := range 1000 {
		if _, err := c.Load(context.Background(), list(t, "items", "page", strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
	}
	after := heapInUse()
	runtime.KeepAlive(c)
	grown := int64(after) - int64(before)
	if limit := int64(3*budget + 2<<20); grown > limit {
		t.Errorf("live heap grew by %d KiB through a %d KiB tier (limit %d KiB)", grown>>10, budget>>10, limit>>10)
	}
	t.Logf("live heap grew by %d KiB through a %d KiB tier", grown>>10, budget>>10)
}

// rss returns the process's resident set size from /proc.
func rss(t testing.TB) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// userPage is a list page like users?max_results=500: JSON documents of
// varied text, compressing about as well as real ones.
func userPage(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	words := strings.Fields("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu")
	var b bytes.Buffer
	b.WriteString(`{"_items":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"_id":"%016x%08x","username":"%s.%s%d","display_name":"%s %s","email":"%s@%s.example","sign_off":"%s","_updated":"2024-01-%02dT%02d:%02d:%02d+0000","is_active":%t,"is_enabled":true,"needs_activation":false,"user_type":"user","role":"5d385f31fe985ec67a0ca583","desk":"5d385f17fe985ec5e1a78b49","invisible_stages":[],"slack_username":null,"private":{},"_etag":"%016x","_links":{"self":{"title":"User","href":"users/%016x"}}}`,
			r.Uint64(), r.Uint32(), words[r.IntN(len(words))], words[r.IntN(len(words))], r.IntN(1000),
			words[r.IntN(len(words))], words[r.IntN(len(words))], words[r.IntN(len(words))], words[r.IntN(len(words))],
			words[r.IntN(len(words))][:2], 1+r.IntN(28), r.IntN(24), r.IntN(60), r.IntN(60), r.IntN(2) == 0, r.Uint64(), r.Uint64())
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// The in-process tier's bound holds in RSS: after 20,000 distinct list
// keys through a 32 MiB tier, RSS has grown by at most 3× the budget +
// 48 MiB. It
// takes a minute of CPU, so it runs only when asked:
//
//	PRODAPI_TEST_RSS=1 go test -run TestRSSStaysWithinTheBudget -v ./cache
func TestRSSStaysWithinTheBudget(t *testing.T) {
	if os.Getenv("PRODAPI_TEST_RSS") == "" {
		t.Skip("set PRODAPI_TEST_RSS=1 to run (a minute of CPU)")
	}
	const budget, keys = 32 << 20, 20000
	be := newBackend()
	be.setHook(func(_ context.Context, q *sources.Query) (*sources.Representation, error) {
		page, _ := strconv.ParseUint(q.Params[0].Value, 10, 64)
		return representation(userPage(page, 500)), nil
	})
	c := New(nil, be, Options{LocalBytes: budget})
	defer closeCache(t, c)
	runtime.GC()
	before := rss(t)
	var peak int64
	for i := range keys {
		if _, err := c.Load(context.Background(), list(t, "users", "where", strconv.Itoa(i))); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 {
			peak = max(peak, rss(t))
		}
	}
	peak = max(peak, rss(t))
	grown := peak - before
	t.Logf("%d keys of ~%d KiB through a %d MiB tier: RSS %d → peak %d MiB, grew %d MiB (limit %d MiB); tier holds %d entries",
		keys, len(userPage(0, 500))>>10, budget>>20, before>>20, peak>>20, grown>>20, (3*budget+48<<20)>>20, c.local.len())
	if grown > 3*budget+48<<20 {
		t.Errorf("RSS grew by %d MiB, over 3× the budget + 48 MiB", grown>>20)
	}
}
