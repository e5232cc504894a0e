package cache

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prodapi/prodapi/test/testkit"
)

// A Redis hit whose tags the replica has read within LocalTTL, while
// subscribed, costs the GET alone; an invalidation from another replica
// makes it ask Redis again and load the new version.
func TestRedisHitChecksKnownGenerations(t *testing.T) {
	e := newEnv(t, withDocs, withOptions(func(o *Options) { o.LocalBytes = -1 }))
	ctx := context.Background()
	b := e.newCache()
	defer closeCache(t, b)
	subscribed(t, e, 2)
	i1 := detail(t, "items", "i1")
	e.load(t, i1)
	e.settle()

	known := func() uint64 {
		return e.metrics.Counter("prodapi_cache_known_generation_checks_total", "").Value()
	}
	hit := func(want string) {
		t.Helper()
		rep, err := b.Load(ctx, i1)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Outcome != OutcomeHit || version(t, rep) != want {
			t.Fatalf("b: %s v%s, want a hit of v%s", rep.Outcome, version(t, rep), want)
		}
	}
	hit("1") // reads the generations, and remembers them
	before, cmds := known(), e.m.CommandCount()
	hit("1")
	if got := known() - before; got != 1 {
		t.Errorf("known-generation checks = %d, want 1", got)
	}
	if got := e.m.CommandCount() - cmds; got != 1 {
		t.Errorf("a Redis hit with known generations sent %d commands, want 1 (the GET)", got)
	}

	// Past LocalTTL the generations are read again.
	e.advance(DefaultLocalTTL)
	before = known()
	hit("1")
	if known() != before {
		t.Error("a generation remembered longer than LocalTTL was used")
	}

	// Another replica's invalidation: once its message has arrived, b
	// loads the new version.
	applied := e.metrics.Counter("prodapi_cache_invalidations_applied_total", "").Value()
	e.be.setVersion(2)
	if err := e.c.Changed(ctx, "items", "i1"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "b to apply the invalidation", func() bool {
		return e.metrics.Counter("prodapi_cache_invalidations_applied_total", "").Value() >= applied+2
	})
	rep, err := b.Load(ctx, i1)
	if err != nil {
		t.Fatal(err)
	}
	if v := version(t, rep); v != "2" {
		t.Fatalf("b: v%s (%s) after the invalidation arrived, want 2", v, rep.Outcome)
	}
}

func TestKnownGens(t *testing.T) {
	now := time.Unix(1e9, 0)
	until := now.Add(time.Second)
	tags := []string{tagAll, "res:items", "doc:items/i1"}
	gens := []uint64{1, 2, 3}
	// known is a subscribed replica's memo holding tags at gens.
	known := func() (*knownGens, *invalLog) {
		k, l := new(knownGens), new(invalLog)
		k.setLive(true)
		k.remember(l, l.seqNow(), tags, gens, until)
		return k, l
	}

	t.Run("only while subscribed", func(t *testing.T) {
		var k knownGens
		var l invalLog
		k.remember(&l, l.seqNow(), tags, gens, until)
		if k.match(tags, gens, now) {
			t.Error("remembered while not subscribed")
		}
		k.setLive(true)
		k.remember(&l, l.seqNow(), tags, gens, until)
		if !k.match(tags, gens, now) {
			t.Fatal("not remembered while subscribed")
		}
		k.setLive(false)
		if k.match(tags, gens, now) {
			t.Error("used after the subscription was lost")
		}
		k.setLive(true)
		if k.match(tags, gens, now) {
			t.Error("kept across a lost subscription")
		}
	})
	t.Run("verdicts", func(t *testing.T) {
		k, _ := known()
		for _, c := range []struct {
			name string
			tags []string
			gens []uint64
			at   time.Time
		}{
			{"another generation", tags, []uint64{1, 2, 4}, now},
			{"an unknown tag", append(tags[:3:3], "doc:planning/p1"), []uint64{1, 2, 3, 5}, now},
			{"expired", tags, gens, until},
			{"lengths differ", tags, gens[:2], now},
		} {
			if k.match(c.tags, c.gens, c.at) {
				t.Errorf("%s: matched", c.name)
			}
		}
		if !k.match(tags[1:], gens[1:], now) {
			t.Error("a subset of known tags did not match")
		}
	})
	t.Run("genUnknown is not remembered", func(t *testing.T) {
		k, l := known()
		k.forget(tags)
		k.remember(l, l.seqNow(), tags, []uint64{1, genUnknown, 3}, until)
		if k.match(tags, []uint64{1, genUnknown, 3}, now) {
			t.Error("an unknown generation matched")
		}
	})
	t.Run("fenced by an invalidation during the read", func(t *testing.T) {
		var k knownGens
		var l invalLog
		k.setLive(true)
		seq := l.seqNow()
		l.add([]string{"doc:items/i1"}) // arrives while the read runs
		k.forget([]string{"doc:items/i1"})
		k.remember(&l, seq, tags, gens, until)
		if k.match(tags, gens, now) {
			t.Error("a generation read before an invalidation of its tag was remembered")
		}
		// An invalidation of other tags does not fence.
		seq = l.seqNow()
		l.add([]string{"doc:items/other"})
		k.remember(&l, seq, tags, gens, until)
		if !k.match(tags, gens, now) {
			t.Error("fenced by an unrelated invalidation")
		}
	})
	t.Run("forget", func(t *testing.T) {
		k, _ := known()
		k.forget([]string{"doc:items/i1"})
		if k.match(tags, gens, now) || !k.match(tags[:2], gens[:2], now) {
			t.Error("forget dropped the wrong tags")
		}
		k.forget([]string{tagAll})
		if k.match(tags[:1], gens[:1], now) {
			t.Error(`forget("all") kept a tag`)
		}
	})
	t.Run("bounded", func(t *testing.T) {
		k, l := known()
		for i := range maxKnownGens + 10 {
			k.remember(l, l.seqNow(), []string{fmt.Sprint("doc:items/", i)}, []uint64{1}, until)
			if len(k.m) > maxKnownGens {
				t.Fatalf("%d tags remembered, bound %d", len(k.m), maxKnownGens)
			}
		}
	})
}

// A tag holding a newline cannot travel as a line of its own: the
// message names its resource (or everything) instead, so the other
// replicas drop at least what they must.
func TestInvalidationMessageNewline(t *testing.T) {
	for _, tc := range []struct {
		tags, want []string
	}{
		{[]string{"list:items", "doc:items/a"}, []string{"list:items", "doc:items/a"}},
		{[]string{"list:items", "doc:items/a\nb", "doc:planning/p"}, []string{"list:items", "res:items", "doc:planning/p"}},
		{[]string{"doc:it\nems/a"}, []string{"all"}},
		{[]string{"res:x\ny"}, []string{"all"}},
	} {
		if got := parseInvalidation(invalidationMessage(tc.tags)); !slices.Equal(got, tc.want) {
			t.Errorf("%q: tags %q, want %q", tc.tags, got, tc.want)
		}
	}
}
