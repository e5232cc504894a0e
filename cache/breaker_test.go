package cache

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// slowProxy forwards loopback connections to addr and delays every reply
// chunk by delay: a Redis whose answers arrive after the cache stopped
// waiting, as they do when the process is short of CPU.
func slowProxy(t *testing.T, addr string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() { // ends when the listener closes
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", addr)
			if err != nil {
				client.Close()
				continue
			}
			wg.Go(func() { // ends when either side closes
				io.Copy(server, client)
				server.Close()
			})
			wg.Go(func() { // ends when either side closes
				defer client.Close()
				buf := make([]byte, 32<<10)
				for {
					n, err := server.Read(buf)
					if err != nil {
						return
					}
					time.Sleep(delay) // the simulated lateness, not a wait for a condition
					if _, err := client.Write(buf[:n]); err != nil {
						return
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

// Replies that arrive after RedisTimeout, but arrive, do not open the
// breaker: the requests fall back, the shared tier stays on. (Five such
// timeouts in a row used to open it.)
func TestLateRepliesDoNotOpenTheBreaker(t *testing.T) {
	m := miniredis.RunT(t)
	addr := slowProxy(t, m.Addr(), 50*time.Millisecond)
	rdb := newClient(addr)
	defer rdb.Close()
	be, clk := newBackend(), newClock()
	c := New(rdb, be, Options{RedisTimeout: 5 * time.Millisecond, Stale: time.Minute, Now: clk.Now})
	defer closeCache(t, c)
	for i := range 3 * breakerMinCalls {
		if _, err := c.Load(context.Background(), detail(t, "items", fmt.Sprintf("i%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	c.calls.Wait() // every read judged
	c.pending.Wait()
	if got := c.breaker.current(); got != closed {
		t.Errorf("breaker %v after late replies, want closed", got)
	}
	if n := len(m.Keys()); n == 0 {
		t.Error("no writes reached Redis")
	}
}

// No reply at all within sickAfter: the breaker opens.
func TestSilentRedisOpensTheBreaker(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Accepts and never answers: a hung Redis.
	var conns []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() { // ends when the listener closes
		defer close(done)
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, conn)
			mu.Unlock()
		}
	}()
	rdb := newClient(ln.Addr().String())
	defer rdb.Close()
	// Before the client closes: its calls end when their connections do.
	defer func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	}()
	clk := newClock()
	c := New(rdb, newBackend(), Options{RedisTimeout: 5 * time.Millisecond, Now: clk.Now})
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
		defer cancel()
		c.Close(ctx) // writes to a silent Redis are abandoned
	}()
	for i := range breakerMinCalls {
		if _, err := c.Load(context.Background(), detail(t, "items", fmt.Sprintf("i%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	c.calls.Wait()
	if got := c.breaker.current(); got != open {
		t.Errorf("breaker %v with a silent Redis, want open", got)
	}
}
