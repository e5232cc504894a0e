package main

import (
	"encoding/json"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources/sandbox"
	"github.com/prodapi/prodapi/test/realserver"
)

// The README's walk-through: serve a sandbox directory, edit a JSON file,
// and the next requests show the edit, well before any TTL would.
func TestSandboxEditShows(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, sandbox.SampleFS()); err != nil {
		t.Fatal(err)
	}
	const id = "urn:newsml:riverton.example:2026-11-19T19:38:52.765190:1880979e-fc9b-454c-bd98-31d4076de7f8"
	const old, corrected = "Councillors vote on the 2027 budget", "Councillors approve the 2027 budget"
	in := start(t, "PRODAPI_SANDBOX", dir, "PRODAPI_CACHE_TTL", "1h")
	auth := bearer(t, devSecret, "ARCHIVE_READ")
	item := "/prodapi/v1/items/" + url.PathEscape(id)
	for range 2 {
		if status, _, body := in.get(t, item, auth); status != 200 || !strings.Contains(string(body), old) {
			t.Fatalf("before: %d %.200s", status, body)
		}
	}
	if _, h, _ := in.get(t, item, auth); !strings.Contains(h.Get("Cache-Status"), "; hit") {
		t.Fatalf("before: Cache-Status %q, want a hit", h.Get("Cache-Status"))
	}

	path := filepath.Join(dir, "archive.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Replace(string(b), old, corrected, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, body := in.get(t, item, auth)
		if strings.Contains(string(body), corrected) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the edit never showed: %.300s", body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// The README shows it on the items list.
	if _, _, body := in.get(t, "/prodapi/v1/items?max_results=50", auth); !strings.Contains(string(body), corrected) {
		t.Errorf("the items list does not show the edit")
	}
	if in.metric(t, `prodapi_cache_changes_total{op="update"}`) < 1 {
		t.Error("no update counted by the change feed")
	}
}

// While Redis refuses writes (CLIENT PAUSE WRITE, as a Sentinel or
// Cluster failover pauses them), the sandbox watcher's invalidations and
// appends to the change log fail: they are retried, in order (nothing is
// appended before the fleet's cache took it), and every edit made
// meanwhile reaches the log afterwards, none lost.
func TestSandboxEditsSurviveARedisPause(t *testing.T) {
	rs := realserver.StartRedis(t, 0)
	room := newNewsroomDir(t)
	in := start(t, "PRODAPI_SANDBOX", room.dir, "REDIS_URL", rs.URL())
	auth := bearer(t, devSecret, "ARCHIVE_READ")
	status, _, body := in.get(t, "/prodapi/v1/changes?since=now", auth)
	var page changesPage
	if status != 200 || json.Unmarshal(body, &page) != nil {
		t.Fatalf("since=now: %d %s", status, body)
	}
	since := page.Meta.Since

	// Paused again on every look, so that writes stay refused until the
	// edits are made and an append has failed, however slow the machine.
	pause := func() {
		if _, err := rs.Do(t.Context(), "CLIENT", "PAUSE", "3000", "WRITE"); err != nil {
			t.Fatal(err)
		}
	}
	const applied, failed = `prodapi_cache_changes_total{op="update"}`, `prodapi_changes_append_errors_total{source="sandbox"}`
	// An invalidation that did not reach Redis fails before the append
	// is tried.
	const unpropagated = `prodapi_cache_redis_errors_total{op="invalidate"}`
	pause()
	edited := room.ids(t, "archive")[:5]
	for i, id := range edited {
		room.edit(t, "archive", id)
		// Reloaded (and in the cache) before the next edit: each edit is a
		// reload, and an append, of its own.
		eventually(t, "the reload of edit "+id, func() bool { pause(); return in.metric(t, applied) >= float64(i+1) })
	}
	eventually(t, "a refused write", func() bool { pause(); return in.metric(t, failed)+in.metric(t, unpropagated) > 0 })
	if _, err := rs.Do(t.Context(), "CLIENT", "UNPAUSE"); err != nil {
		t.Fatal(err)
	}

	var got []string // each document once, in the order of its first entry
	deadline := time.Now().Add(time.Minute)
	for len(got) < len(edited) && time.Now().Before(deadline) {
		status, _, body := in.get(t, "/prodapi/v1/changes?wait=5&since="+url.QueryEscape(since), auth)
		var page changesPage
		if status != 200 || json.Unmarshal(body, &page) != nil {
			t.Fatalf("/changes: %d %s", status, body)
		}
		for _, e := range page.Items {
			if e.Resource != "items" || !slices.Contains(edited, e.DocID) {
				t.Errorf("an entry %s %s/%s, which no edit made", e.Op, e.Resource, e.DocID)
			}
			if !slices.Contains(got, e.DocID) {
				got = append(got, e.DocID)
			}
		}
		since = page.Meta.Since
	}
	if !slices.Equal(got, edited) {
		t.Errorf("the log holds the edits of %q, want %q, in that order (%.0f appends failed)", got, edited, in.metric(t, failed))
	}
}
