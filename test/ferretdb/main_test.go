package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/url"
	"regexp"
	"strings"
	"testing"
)

func TestRunNeedsADirectory(t *testing.T) {
	err := run(t.Context(), nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "-dir") {
		t.Errorf("run without -dir: %v, want an error naming -dir", err)
	}
}

// run serves on the address its ready line names, says which FerretDB it
// is, and returns nil when its context ends (SIGTERM, in main).
func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() { // ends when ctx is cancelled
		done <- run(ctx, []string{"-dir", t.TempDir()}, w, io.Discard)
		w.Close()
	}()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("no ready line: %v (run: %v)", err, <-done)
	}
	m := regexp.MustCompile(`^ferretdb: ready (mongodb://127\.0\.0\.1:\d+/) version (v1\.\d+\.\d+)\n$`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("ready line %q", line)
	}
	go io.Copy(io.Discard, out) // ends when run returns and w closes
	u, err := url.Parse(m[1])
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatalf("dialing %s: %v", u.Host, err)
	}
	conn.Close()
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run after cancel: %v", err)
	}
}
