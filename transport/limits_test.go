package transport

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/memnet"
)

// These are the regression tests of issue 20 #4. They use only defaults
// (no option added by the fix), so that they also run against the code
// before it.

// connOpen reports whether the peer still keeps c open (inside a synctest
// bubble: a read that blocks past a short deadline means open).
func connOpen(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(time.Millisecond))
	_, err := io.Copy(io.Discard, c)
	c.SetReadDeadline(time.Time{})
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// dialMem opens a raw memnet connection from host to addr.
func dialMem(t *testing.T, n *memnet.Network, host, addr string) net.Conn {
	t.Helper()
	c, err := n.Host(host).Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// countOpen counts the connections the peer keeps open.
func countOpen(conns []net.Conn) int {
	n := 0
	for _, c := range conns {
		if connOpen(c) {
			n++
		}
	}
	return n
}

// An inbound Raft connection that sends nothing (after the preface, or in
// the middle of a message) is closed after a bounded idle time instead of
// holding raft's buffers for ever.
func TestSynctestRaftIdleConnClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		send []byte
	}{
		{"preface only", nil},
		{"partial AppendEntries", append(partialAppendEntries(), make([]byte, 4096)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n := memnet.New()
				defer n.Close()
				srv := memTransport(t, n, "srv", nil, nil)
				defer srv.Close()
				srv.RaftTransport()
				c := dialMem(t, n, "idler", srv.Addr())
				defer c.Close()
				c.Write([]byte{protoRaft, 1})
				if _, err := io.ReadFull(c, make([]byte, 2)); err != nil {
					t.Fatalf("preface not accepted: %v", err)
				}
				c.Write(tc.send)
				start := time.Now()
				c.SetReadDeadline(time.Now().Add(time.Hour))
				_, err := io.Copy(io.Discard, c)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatal("idle Raft connection still open after an hour")
				}
				if got := time.Since(start); got > 2*time.Minute {
					t.Fatalf("idle Raft connection closed after %v, want within 2m", got)
				}
			})
		})
	}
}

// One source host cannot hold more than the per-host share of inbound
// connections: the excess is closed at once, and other hosts are served.
func TestSynctestConnLimitPerHost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		defer n.Close()
		srv := memTransport(t, n, "srv", echo, nil)
		defer srv.Close()
		var conns []net.Conn
		for range 100 {
			c := dialMem(t, n, "greedy", srv.Addr())
			defer c.Close()
			conns = append(conns, c)
			synctest.Wait() // let the listener accept it
		}
		if got := countOpen(conns); got != 64 {
			t.Fatalf("one host holds %d of 100 silent connections open, want 64", got)
		}
		cli := memTransport(t, n, "good", nil, nil)
		defer cli.Close()
		if resp, err := cli.Call(context.Background(), srv.Addr(), []byte("x")); err != nil || string(resp) != "echo:x" {
			t.Fatalf("another host is not served: %q, %v", resp, err)
		}
	})
}

// Connections stalled in the TLS handshake are capped in number (the
// excess is closed at once) and closed after HandshakeTimeout.
func TestSynctestHandshakeLimitTLS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ca := newTestCA(t, "ca")
		n := memnet.New()
		defer n.Close()
		srv := memTransport(t, n, "srv", echo, func(c *Config) { c.TLS = ca.tlsConfig(t, "srv") })
		defer srv.Close()
		var conns []net.Conn
		for i := range 200 {
			c := dialMem(t, n, fmt.Sprintf("stall%d", i), srv.Addr())
			defer c.Close()
			c.Write([]byte{tlsHandshakeRecord})
			conns = append(conns, c)
			synctest.Wait() // let the listener accept it
		}
		synctest.Wait()
		if got := countOpen(conns); got != 128 {
			t.Fatalf("%d of 200 stalled TLS handshakes held open, want 128", got)
		}
		time.Sleep(DefaultHandshakeTimeout)
		synctest.Wait()
		if got := countOpen(conns); got != 0 {
			t.Fatalf("%d stalled TLS handshakes still open after HandshakeTimeout", got)
		}
	})
}

// Inbound connections are capped in total, whatever their source.
func TestSynctestConnLimitTotal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		defer n.Close()
		srv := memTransport(t, n, "srv", echo, nil)
		defer srv.Close()
		var conns []net.Conn
		for i := range 600 {
			c := dialMem(t, n, fmt.Sprintf("bot%d", i), srv.Addr())
			defer c.Close()
			c.Write([]byte{protoRPC, 1})
			conns = append(conns, c)
			synctest.Wait() // one handshake at a time
		}
		if got := countOpen(conns); got != 512 {
			t.Fatalf("%d of 600 connections from distinct hosts held open, want 512", got)
		}
	})
}

// A plaintext bind that other machines can reach is refused by Validate.
func TestValidateRefusesPlaintextNonLoopback(t *testing.T) {
	for _, bind := range []string{":7400", "0.0.0.0:7400", "10.213.0.5:7400", "[::]:7400"} {
		err := Config{BindAddr: bind}.Validate()
		if err == nil || !strings.Contains(err.Error(), "plaintext") {
			t.Errorf("Validate(plaintext bind %q) = %v, want a plaintext refusal", bind, err)
		}
	}
}

// The RPC pool forgets addresses no longer used: their connections close
// after a while without calls (peer alive) or when they fail (peer gone).
func TestSynctestRPCPoolPruned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		defer n.Close()
		cli := memTransport(t, n, "cli", nil, nil)
		defer cli.Close()
		var srvs []*Transport
		for i := range 20 {
			srv := memTransport(t, n, fmt.Sprintf("srv%d", i), echo, nil)
			defer srv.Close()
			srvs = append(srvs, srv)
			if _, err := cli.Call(context.Background(), srv.Addr(), nil); err != nil {
				t.Fatal(err)
			}
		}
		for _, srv := range srvs[10:] {
			srv.Close() // gone: its connections fail
		}
		time.Sleep(10 * time.Minute) // the others stay alive but unused
		synctest.Wait()
		cli.mu.Lock()
		peers, conns := len(cli.peers), len(cli.conns)
		cli.mu.Unlock()
		if peers != 0 || conns != 0 {
			t.Fatalf("after 10m without calls the client keeps %d pools and %d connections, want none", peers, conns)
		}
		// A pruned address is dialed again on demand.
		if resp, err := cli.Call(context.Background(), srvs[0].Addr(), []byte("again")); err != nil || string(resp) != "echo:again" {
			t.Fatalf("call after pruning: %q, %v", resp, err)
		}
	})
}

// The requests one connection's running handlers hold are bounded in bytes
// (4 × MaxMessageSize): beyond it the connection's reader waits.
func TestSynctestInflightBytesBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := memnet.New()
		defer n.Close()
		var running, most atomic.Int32
		gate := make(chan struct{})
		srv := memTransport(t, n, "srv", HandlerFunc(func(ctx context.Context, _ string, req []byte) ([]byte, error) {
			now := running.Add(1)
			defer running.Add(-1)
			for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
			}
			<-gate
			return nil, nil
		}), func(c *Config) { c.MaxMessageSize = 1024 })
		defer srv.Close()
		cli := memTransport(t, n, "cli", nil, func(c *Config) { c.RPCConnsPerPeer = 1 })
		defer cli.Close()
		errs := make(chan error, 10)
		for range 10 {
			go func() {
				_, err := cli.Call(context.Background(), srv.Addr(), make([]byte, 1000))
				errs <- err
			}()
		}
		synctest.Wait()
		if got := running.Load(); got != 4 {
			t.Fatalf("%d handlers hold 1000-byte requests at once, want 4 (4 KiB budget)", got)
		}
		close(gate)
		for range 10 {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		if most.Load() != 4 {
			t.Fatalf("at most %d handlers ran at once, want 4", most.Load())
		}
	})
}
