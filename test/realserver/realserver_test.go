package realserver

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestProcessStopsItsGroup(t *testing.T) {
	// A launcher whose child would outlive it: the group goes together.
	p, err := Start("sh", exec.Command("sh", "-c", "sleep 600 & echo started; wait"))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WaitReady(time.Minute, func(context.Context) error {
		if !strings.Contains(p.Output(), "started") {
			return errors.New("not yet")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	pid := p.PID()
	p.Stop(time.Minute)
	<-p.Done()
	// The orphaned sleep is reaped by init in its own time: wait for the
	// group to empty rather than expecting it at once.
	deadline := time.Now().Add(time.Minute)
	for syscall.Kill(-pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still has members a minute after Stop", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWaitReadyNoticesAnExit(t *testing.T) {
	p, err := Start("false", exec.Command("sh", "-c", "echo boom; exit 3"))
	if err != nil {
		t.Fatal(err)
	}
	err = p.WaitReady(time.Hour, func(context.Context) error { return errors.New("not yet") })
	if err == nil {
		t.Fatal("WaitReady returned nil for a process that exited")
	}
}

func TestSharedStartsOnce(t *testing.T) {
	var s Set
	var calls int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := Shared(t, &s, "k", func() (int, error) {
				mu.Lock()
				defer mu.Unlock()
				calls++
				return 42, nil
			})
			if v != 42 {
				t.Errorf("Shared = %d, want 42", v)
			}
		}()
	}
	wg.Wait()
	if calls != 1 {
		t.Fatalf("start ran %d times, want 1", calls)
	}
}

func TestTailBufferKeepsTheEnd(t *testing.T) {
	b := &tailBuffer{max: 4}
	b.Write([]byte("abcdef"))
	b.Write([]byte("gh"))
	if got := b.String(); got != "efgh" {
		t.Fatalf("tail = %q, want %q", got, "efgh")
	}
}

func TestMissingIsRecorded(t *testing.T) {
	if os.Getenv(RequireEnv) != "" {
		t.Skip("Missing fails under " + RequireEnv + ", by design")
	}
	skips := filepath.Join(t.TempDir(), "skips")
	t.Setenv(SkipsEnv, skips)
	t.Run("inner", func(t *testing.T) { Missing(t, "the thing", "install it") })
	data, err := os.ReadFile(skips)
	if err != nil {
		t.Fatal(err)
	}
	if want := "TestMissingIsRecorded/inner: SKIPPED, the thing is not available: install it\n"; string(data) != want {
		t.Fatalf("skips file = %q, want %q", data, want)
	}
}
