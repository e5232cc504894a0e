package main

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prodapi/prodapi/sources"
)

// calls records what a replica's applier does, in order.
type calls []string

type fakeSandbox struct {
	c   *calls
	err error
}

func (f fakeSandbox) CatchUp(_ context.Context, entries []sources.LogEntry) error {
	*f.c = append(*f.c, "catch up "+entries[0].Resource+"/"+entries[0].ID)
	return f.err
}

type fakeCache struct {
	c   *calls
	err error // PurgeAll's
}

func (f fakeCache) PurgeAll(context.Context) error {
	*f.c = append(*f.c, "purge all")
	return f.err
}

func (f fakeCache) ApplyLocal(_ context.Context, changes []sources.Change) {
	for _, ch := range changes {
		*f.c = append(*f.c, "invalidate "+ch.Collection+"/"+ch.ID+" "+ch.Op+" "+ch.Version)
	}
}

// An entry is applied to the sandbox first (its reload's changes reach
// the cache as any other's), then to the cache, by collection; a
// catch-up that fails is the applier's error (the log retries), and the
// cache is not told the entry is applied.
func TestReplicaApplier(t *testing.T) {
	entries := []sources.LogEntry{
		{Resource: "items", ID: "i1", Op: sources.OpUpdate, Version: "v1"},
		{Resource: "desks", Op: sources.OpFlush},
		{Resource: "no such resource", ID: "x", Op: sources.OpUpdate},
	}
	var c calls
	a := replicaApplier{cache: fakeCache{c: &c}, sandbox: fakeSandbox{c: &c}}
	if err := a.ApplyEntries(t.Context(), entries); err != nil {
		t.Fatal(err)
	}
	want := calls{"catch up items/i1", "invalidate archive/i1 update v1", "invalidate desks/ flush "}
	if diff := cmp.Diff(c, want); diff != "" {
		t.Errorf("calls (-got +want):\n%s", diff)
	}

	c = nil
	broken := errors.New("the directory does not load")
	a.sandbox = fakeSandbox{c: &c, err: broken}
	if err := a.ApplyEntries(t.Context(), entries); !errors.Is(err, broken) {
		t.Errorf("a failed catch-up: %v", err)
	}
	if diff := cmp.Diff(c, calls{"catch up items/i1"}); diff != "" {
		t.Errorf("calls after a failed catch-up (-got +want):\n%s", diff)
	}

	// Without a sandbox: the cache alone.
	c = nil
	a.sandbox = nil
	if err := a.ApplyEntries(t.Context(), entries[:1]); err != nil || len(c) != 1 {
		t.Errorf("without a sandbox: %v %v", c, err)
	}

	// An ended epoch: the whole cache, Redis's too; a purge that did not
	// reach Redis is the applier's error (the log retries).
	c = nil
	if err := a.EpochEnded(t.Context()); err != nil || !cmp.Equal(c, calls{"purge all"}) {
		t.Errorf("an ended epoch: %v %v", c, err)
	}
	a.cache = fakeCache{c: &c, err: broken}
	if err := a.EpochEnded(t.Context()); !errors.Is(err, broken) {
		t.Errorf("a purge that failed: %v", err)
	}
}
