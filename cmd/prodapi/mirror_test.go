package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prodapi/prodapi/sources"
)

// The README's mirroring walk-through, as examples/mirror runs it against
// a sandbox directory: it walks every list, follows /changes with
// include=doc, streamed and polled, and applies an edit made to the
// directory afterwards. Its copy then holds every document of a walk of
// each list exactly once, and the edit.
func TestMirrorExample(t *testing.T) {
	if testing.Short() {
		t.Skip("builds examples/mirror")
	}
	bin := filepath.Join(t.TempDir(), "mirror")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/prodapi/prodapi/examples/mirror").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, follow := range []string{"stream", "poll"} {
		t.Run(follow, func(t *testing.T) { mirrorExample(t, bin, follow) })
	}
}

// mirrorExample runs the mirror built at bin, following /changes as
// follow says, and holds its copy to the lists.
func mirrorExample(t *testing.T, bin, follow string) {
	room := newNewsroomDir(t)
	in := start(t, "PRODAPI_SANDBOX", room.dir)
	var scopes []string
	for _, res := range sources.Resources() {
		scopes = append(scopes, res.Scope)
	}
	auth := bearer(t, devSecret, scopes...)

	copyDir := filepath.Join(t.TempDir(), "copy")
	ctx, cancel := context.WithCancel(context.Background())
	// Pages of 7 documents: the walks follow their cursors.
	client := exec.CommandContext(ctx, bin, "-dir", copyDir, "-max-results", "7", "-follow", follow)
	client.Env = []string{"PRODAPI_URL=" + in.base + "/prodapi/v1", "PRODAPI_TOKEN=" + strings.TrimPrefix(auth, "Bearer ")}
	client.Cancel = func() error { return client.Process.Signal(os.Interrupt) }
	client.WaitDelay = time.Minute
	var out, logged syncBuffer
	client.Stdout, client.Stderr = &out, &logged
	if err := client.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			cancel()
			// Interrupted, it ends cleanly: Wait then says it was cancelled.
			if err := client.Wait(); !errors.Is(err, context.Canceled) {
				t.Errorf("the mirror: %v\n%s", err, logged.String())
			}
		}
	}
	t.Cleanup(stop)
	printed := func(line string) func() bool {
		return func() bool { return strings.Contains(out.String(), "\n"+line+"\n") }
	}

	eventually(t, "mirror following /changes", func() bool {
		return strings.Contains(out.String(), "following /changes from ") && strings.Contains(out.String(), ", "+follow+"ed\n")
	})
	id := room.ids(t, "archive")[4]
	room.set(t, "archive", id, "headline", "Mirrored as it changed")
	eventually(t, "mirror applying the edit", printed("update items/"+id))
	stop()

	// What the mirror walked, as it said: "walked <resource>: <n> documents".
	walked := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^walked (\w+): (\d+) documents$`).FindAllStringSubmatch(out.String(), -1) {
		if _, twice := walked[m[1]]; twice {
			t.Errorf("%s walked twice", m[1])
		}
		walked[m[1]], _ = strconv.Atoi(m[2])
	}
	for _, res := range sources.Resources() {
		w := &walker{name: res.Name, next: fmt.Sprintf("/prodapi/v1/%s?max_results=5&cursor=", res.Name), auth: auth, seen: map[string]int{}}
		for w.next != "" {
			w.step(t, in)
		}
		files, err := os.ReadDir(filepath.Join(copyDir, res.Name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		copied := map[string]bool{}
		for _, f := range files {
			id, err := url.PathUnescape(strings.TrimSuffix(f.Name(), ".json"))
			if err != nil || !strings.HasSuffix(f.Name(), ".json") {
				t.Errorf("%s: a file %s in the copy", res.Name, f.Name())
			}
			copied[id] = true
			if w.seen[id] == 0 {
				t.Errorf("%s: %s is in the copy, not in the list", res.Name, id)
			}
		}
		for id := range w.seen {
			if !copied[id] {
				t.Errorf("%s: %s is not in the copy", res.Name, id)
			}
		}
		if walked[res.Name] != len(w.seen) {
			t.Errorf("the mirror walked %d documents of %s, want %d (each once)", walked[res.Name], res.Name, len(w.seen))
		}
	}
	b, err := os.ReadFile(filepath.Join(copyDir, "items", url.PathEscape(id)+".json"))
	if err != nil || !strings.Contains(string(b), `"headline":"Mirrored as it changed"`) {
		t.Errorf("the copy of the edited item: %v %.300s", err, b)
	}
}
