// Package realserver starts real servers for tests: an Elasticsearch
// 7.10.2 node assembled from Maven Central, FerretDB (a MongoDB-wire
// server) built from the nested test-only module test/ferretdb, and
// redis-server processes, alone, as a Redis Cluster or as a Sentinel
// set. Each runs on free loopback ports and is stopped by PID.
//
// A server whose prerequisites are missing (no java or mvn, no Go
// toolchain, no redis-server) skips the test with a loud message, or
// fails it when PRODAPI_REQUIRE_REAL is set, as CI does: there a skip
// would hide a missing install step. With PRODAPI_TEST_SKIPS naming a
// file, each skip is also written there, for `make test` to print.
//
// Servers that are slow to start (Elasticsearch takes tens of seconds)
// are shared by the tests of one package through a Set, closed by the
// package's TestMain:
//
//	var servers realserver.Set
//
//	func TestMain(m *testing.M) { os.Exit(servers.Run(m)) }
//
// Servers a test breaks on purpose (a failover kills a master) are its
// own, stopped by the test's cleanup.
package realserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// RequireEnv names the variable that turns a missing prerequisite from
// a skip into a failure.
const RequireEnv = "PRODAPI_REQUIRE_REAL"

// Missing skips t because what is not available, saying how to get it;
// with PRODAPI_REQUIRE_REAL set it fails t instead.
func Missing(t testing.TB, what, how string) {
	t.Helper()
	if os.Getenv(RequireEnv) != "" {
		t.Fatalf("realserver: %s is not available and %s is set: %s", what, RequireEnv, how)
	}
	msg := fmt.Sprintf("%s: SKIPPED, %s is not available: %s", t.Name(), what, how)
	noteSkip(msg)
	t.Skipf("realserver: %s (set %s=1 to make this a failure)", msg, RequireEnv)
}

// SkipsEnv names a file to which Missing appends one line per skipped
// test, so that `make test` can say loudly what did not run: go test
// shows a passing package's skips only with -v.
const SkipsEnv = "PRODAPI_TEST_SKIPS"

func noteSkip(msg string) {
	name := os.Getenv(SkipsEnv)
	if name == "" {
		return
	}
	f, err := os.OpenFile(name, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintln(f, msg)
}

// FreePort returns a loopback TCP port nobody listens on now.
func FreePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// A Process is a server this package started. Its output is kept (the
// last 64 KiB) for the failure messages of the tests that use it.
type Process struct {
	Name string
	cmd  *exec.Cmd
	out  *tailBuffer
	done chan struct{} // closed when the process has exited
	err  error         // the exit status, once done is closed
}

// Start starts cmd in a process group of its own (so that a launcher's
// children go with it) and returns at once.
func Start(name string, cmd *exec.Cmd) (*Process, error) {
	p := &Process{Name: name, cmd: cmd, out: &tailBuffer{max: 64 << 10}, done: make(chan struct{})}
	cmd.Stdout = p.out
	cmd.Stderr = p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("realserver: start %s: %w", name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Output is the tail of what the process wrote.
func (p *Process) Output() string { return p.out.String() }

// Signal sends sig to the process group. For SIGSTOP it returns once
// every thread of the process has stopped: the signal is delivered
// asynchronously, and on a busy machine a server may still answer a
// request sent right after kill(2) returned.
func (p *Process) Signal(sig syscall.Signal) error {
	if err := syscall.Kill(-p.PID(), sig); err != nil || sig != syscall.SIGSTOP {
		return err
	}
	deadline := time.Now().Add(time.Minute)
	for !p.stopped() {
		if time.Now().After(deadline) {
			return fmt.Errorf("realserver: %s not stopped a minute after SIGSTOP", p.Name)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// stopped reports whether every thread of the process is stopped (state
// T in /proc), or the process is gone.
func (p *Process) stopped() bool {
	dir := "/proc/" + strconv.Itoa(p.PID()) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return true // exited: nothing left to answer
	}
	for _, task := range tasks {
		stat, err := os.ReadFile(dir + "/" + task.Name() + "/stat")
		if err != nil {
			continue // the thread ended
		}
		// pid (comm) state ...: comm may hold spaces and parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) || (stat[i+2] != 'T' && stat[i+2] != 't') {
			return false
		}
	}
	return true
}

// Kill ends the process group with SIGKILL (continuing it first, in case
// a test stopped it) and waits for the process.
func (p *Process) Kill() {
	p.Signal(syscall.SIGCONT)
	p.Signal(syscall.SIGKILL)
	<-p.done
}

// Stop asks the process group to end (SIGTERM), and kills it when it has
// not within grace.
func (p *Process) Stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	p.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		// Children that outlived the leader go too.
		p.Signal(syscall.SIGKILL)
	case <-time.After(grace):
		p.Kill()
	}
}

// WaitReady calls ready until it returns nil, the process exits, or
// timeout passes; timeout bounds a start on a loaded machine, not a
// measurement.
func (p *Process) WaitReady(timeout time.Duration, ready func(context.Context) error) error {
	err, exited := poll(timeout, p.done, ready)
	switch {
	case err == nil:
		return nil
	case exited:
		return fmt.Errorf("realserver: %s exited before it was ready (%v): %w\n%s", p.Name, p.err, err, p.Output())
	default:
		return fmt.Errorf("realserver: %s not ready after %s: %w\n%s", p.Name, timeout, err, p.Output())
	}
}

// poll calls cond, backing off from 20 ms to 500 ms, until it returns
// nil, stop is closed (exited is then true; a nil stop never is) or
// timeout passes, and returns cond's last error.
func poll(timeout time.Duration, stop <-chan struct{}, cond func(context.Context) error) (err error, exited bool) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	delay := 20 * time.Millisecond
	for {
		if err = cond(ctx); err == nil {
			return nil, false
		}
		select {
		case <-stop:
			return err, true
		case <-ctx.Done():
			return err, false
		case <-time.After(delay):
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// A Set holds the servers shared by the tests of one package, started on
// first use and stopped when the package's tests end.
type Set struct {
	mu      sync.Mutex
	once    map[string]*onceResult
	cleanup []func()
}

type onceResult struct {
	done chan struct{}
	v    any
	err  error
}

// Run runs the package's tests, then stops every server the set
// started; it returns m.Run's exit code, for os.Exit.
func (s *Set) Run(m *testing.M) int {
	code := m.Run()
	s.Close()
	return code
}

// Close stops every server of the set, last started first.
func (s *Set) Close() {
	s.mu.Lock()
	cleanup := s.cleanup
	s.cleanup = nil
	s.mu.Unlock()
	for i := len(cleanup) - 1; i >= 0; i-- {
		cleanup[i]()
	}
}

// OnClose registers f to run in Close, last registered first: stopping a
// server, removing a scratch directory.
func (s *Set) OnClose(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cleanup = append(s.cleanup, f)
}

// ErrUnavailable wraps the reason a server's prerequisites are missing;
// Shared turns it into Missing for every test that asks.
var ErrUnavailable = errors.New("unavailable")

// Unavailable returns an error saying what is missing and how to get it.
func Unavailable(what, how string) error {
	return fmt.Errorf("%w: %s|%s", ErrUnavailable, what, how)
}

// Shared returns the value start made for key, calling start once per
// set: later callers wait for the first. A start that failed fails every
// caller; one that returned Unavailable skips them (or fails them under
// PRODAPI_REQUIRE_REAL).
func Shared[T any](t testing.TB, s *Set, key string, start func() (T, error)) T {
	t.Helper()
	s.mu.Lock()
	if s.once == nil {
		s.once = map[string]*onceResult{}
	}
	r, ok := s.once[key]
	if !ok {
		r = &onceResult{done: make(chan struct{})}
		s.once[key] = r
	}
	s.mu.Unlock()
	if !ok {
		v, err := start()
		r.v, r.err = v, err
		close(r.done)
	}
	<-r.done
	if errors.Is(r.err, ErrUnavailable) {
		what, how := splitUnavailable(r.err)
		Missing(t, what, how)
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v.(T)
}

func splitUnavailable(err error) (what, how string) {
	msg := err.Error()
	prefix := ErrUnavailable.Error() + ": "
	if len(msg) > len(prefix) {
		msg = msg[len(prefix):]
	}
	for i := range len(msg) {
		if msg[i] == '|' {
			return msg[:i], msg[i+1:]
		}
	}
	return msg, ""
}

// LookPath finds a program, or returns Unavailable with how to install it.
func LookPath(name, how string) (string, error) {
	p, err := exec.LookPath(name)
	if err != nil {
		return "", Unavailable(name, how)
	}
	return p, nil
}

// Addr is host:port on loopback.
func Addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf bytes.Buffer
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.Write(p)
	if over := b.buf.Len() - b.max; over > 0 {
		b.buf.Next(over)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
