package redistier

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRefs(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if b, err := e.t.Refs(ctx, "archive", "i1"); b != nil || err != nil {
		t.Fatalf("nothing kept: %q, %v", b, err)
	}
	if err := e.t.SaveRefs(ctx, "archive", "i1", []byte("one"), 0); err != nil {
		t.Fatal(err)
	}
	if err := e.t.SaveRefs(ctx, "archive", "i2", []byte("two"), time.Hour); err != nil {
		t.Fatal(err)
	}
	if b, err := e.t.Refs(ctx, "archive", "i1"); string(b) != "one" || err != nil {
		t.Errorf("kept: %q, %v", b, err)
	}
	if ttl := e.m.TTL(Prefix + "{changes}:refs:archive:i2"); ttl != time.Hour {
		t.Errorf("ttl %v, want an hour", ttl)
	}
	if ttl := e.m.TTL(Prefix + "{changes}:refs:archive:i1"); ttl != 0 {
		t.Errorf("ttl %v, want none", ttl)
	}
	if err := e.t.SaveRefs(ctx, "archive", "i1", nil, 0); err != nil {
		t.Fatal(err)
	}
	if e.m.Exists(Prefix + "{changes}:refs:archive:i1") {
		t.Error("nil refs kept the key")
	}
}

func TestKnownIDs(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if err := e.t.MarkKnown(ctx, "desks", 1, []string{"a", "b", "c"}, false); err != nil {
		t.Fatal(err)
	}
	if err := e.t.MarkKnown(ctx, "desks", 2, []string{"a", "c"}, false); err != nil {
		t.Fatal(err)
	}
	// New ones only: b keeps round 1, d comes in at 0.
	if err := e.t.MarkKnown(ctx, "desks", 0, []string{"b", "d"}, true); err != nil {
		t.Fatal(err)
	}
	got, err := e.t.Unmarked(ctx, "desks", 2, 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(got, []string{"d", "b"}); diff != "" {
		t.Errorf("unmarked in round 2 (-got +want):\n%s", diff)
	}
	if got, _ := e.t.Unmarked(ctx, "desks", 2, 1); len(got) != 1 {
		t.Errorf("limit 1: %v", got)
	}
	if err := e.t.ForgetKnown(ctx, "desks", []string{"b", "d"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.t.Unmarked(ctx, "desks", 3, 10); !cmp.Equal(got, []string{"a", "c"}) {
		t.Errorf("after forgetting b and d: %v", got)
	}
	if !e.m.Exists(Prefix + "{changes}:known:desks") {
		t.Error("the set is not in the {changes} slot's keys")
	}
}

func TestFeedStateWithoutRedis(t *testing.T) {
	tr := New(nil, Options{})
	ctx := t.Context()
	for name, err := range map[string]error{
		"SaveRefs":    tr.SaveRefs(ctx, "archive", "i1", []byte("x"), 0),
		"MarkKnown":   tr.MarkKnown(ctx, "desks", 1, []string{"a"}, false),
		"ForgetKnown": tr.ForgetKnown(ctx, "desks", []string{"a"}),
	} {
		if !errors.Is(err, ErrNoRedis) {
			t.Errorf("%s: %v, want ErrNoRedis", name, err)
		}
	}
	if _, err := tr.Refs(ctx, "archive", "i1"); !errors.Is(err, ErrNoRedis) {
		t.Errorf("Refs: %v", err)
	}
	if _, err := tr.Unmarked(ctx, "desks", 1, 1); !errors.Is(err, ErrNoRedis) {
		t.Errorf("Unmarked: %v", err)
	}
}
