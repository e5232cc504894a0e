package main

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources/sandbox"
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
