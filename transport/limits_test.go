package transport

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/memnet"
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
			c.Write([]byte{protoRPC, versionLegacy}) // set up, then idle
			conns = append(conns, c)
			synctest.Wait() // let the listener accept it
		}
		if got := countOpen(conns); got != 64 {
			t.Fatalf("one host holds %d of 100 idle connections open, want 64", got)
		}
		cli := memTransport(t, n, "good", nil, nil)
		defer cli.Close()
		if resp, err := cli.Call(context.Background(), srv.Addr(), []byte("x")); err != nil || string(resp) != "echo:x" {
			t.Fatalf("another host is not served: %q, %v", resp, err)
		}
	})
}

// Connections stalled in the TLS handshake are capped in number (the
// excess is closed at once) and, having sent one byte of their first TLS
// record, closed after FirstByteTimeout.
func TestSynctestHandshakeLimitTLS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, srv, _ := memTLSServer(t, nil)
		defer n.Close()
		defer srv.Close()
		var hosts []string
		for i := range 200 {
			hosts = append(hosts, fmt.Sprintf("stall%d", i))
		}
		conns := stallTLS(t, n, srv.Addr(), hosts, 1)
		synctest.Wait()
		if got := countOpen(conns); got != 128 {
			t.Fatalf("%d of 200 stalled TLS handshakes held open, want 128", got)
		}
		time.Sleep(defaultFirstByteTimeout)
		synctest.Wait()
		if got := countOpen(conns); got != 0 {
			t.Fatalf("%d stalled TLS handshakes still open after FirstByteTimeout", got)
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

// memTLSServer starts an echo server "srv" with mutual TLS on a new memnet
// network (inside a synctest bubble); edit adjusts its config. Clients get
// their configs from the returned CA (memTLS).
func memTLSServer(t *testing.T, edit func(*Config)) (*memnet.Network, *Transport, *testCA) {
	t.Helper()
	ca := newTestCA(t, "ca")
	n := memnet.New()
	srv := memTransport(t, n, "srv", echo, func(c *Config) {
		c.TLS = ca.tlsConfig(t, "srv")
		if edit != nil {
			edit(c)
		}
	})
	return n, srv, ca
}

// stallTLS opens per connections from each of hosts to addr that send the
// first byte of a TLS record and stall.
func stallTLS(t *testing.T, n *memnet.Network, addr string, hosts []string, per int) []net.Conn {
	t.Helper()
	var conns []net.Conn
	for _, h := range hosts {
		for range per {
			c := dialMem(t, n, h, addr)
			t.Cleanup(func() { c.Close() })
			c.Write([]byte{tlsHandshakeRecord})
			conns = append(conns, c)
			synctest.Wait() // let the listener accept it
		}
	}
	return conns
}

// Strangers that fill every handshake slot strangers may use (16 addresses
// with 8 stalled TLS handshakes each) starve strangers, not members: a
// member's call goes through on the member reserve — and without
// MemberHost (the control) it does not.
func TestSynctestMemberReserve(t *testing.T) {
	for _, recognised := range []bool{true, false} {
		t.Run(fmt.Sprintf("recognised=%v", recognised), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				n, srv, ca := memTLSServer(t, func(c *Config) {
					if recognised {
						c.MemberHost = func(host string) bool { return host == "member" }
					}
				})
				defer n.Close()
				defer srv.Close()
				var hosts []string
				for i := range 16 {
					hosts = append(hosts, fmt.Sprintf("stranger%d", i))
				}
				conns := stallTLS(t, n, srv.Addr(), hosts, 9)
				if got := countOpen(conns); got != 128 {
					t.Fatalf("%d of %d stalled handshakes held, want 128 (8 per address)", got, len(conns))
				}
				late := stallTLS(t, n, srv.Addr(), []string{"late"}, 1)
				if countOpen(late) != 0 {
					t.Fatal("a 17th stranger address got a handshake slot")
				}
				cli := memTransport(t, n, "member", nil, func(c *Config) { c.TLS = ca.memTLS(t, "member") })
				defer cli.Close()
				// Within FirstByteTimeout: the strangers still hold their slots.
				ctx, cancel := context.WithTimeout(context.Background(), defaultFirstByteTimeout/2)
				defer cancel()
				resp, err := cli.Call(ctx, srv.Addr(), []byte("x"))
				switch {
				case recognised && (err != nil || string(resp) != "echo:x"):
					t.Fatalf("member's call while strangers hold every slot: %q, %v", resp, err)
				case !recognised && err == nil:
					t.Fatal("control: a call from an unrecognised address went through while strangers hold every slot")
				}
			})
		})
	}
}

// Failed TLS handshakes (no client certificate) are charged to their
// source address: after ten seconds' worth (40) its connections are closed
// at once, before any TLS work, until it has earned failures back.
func TestSynctestFailedHandshakeBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, srv, ca := memTLSServer(t, nil)
		defer n.Close()
		defer srv.Close()
		attempt := func() {
			c := dialMem(t, n, "certless", srv.Addr())
			defer c.Close()
			tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true})
			if tc.Handshake() == nil {
				io.Copy(io.Discard, tc) // TLS 1.3: the server refuses after the client's flight
			}
		}
		for range 60 {
			attempt()
		}
		synctest.Wait()
		if tlsFail, budget := rejected(t, srv, rejectTLS), rejected(t, srv, rejectFailureLimit); tlsFail != 40 || budget != 20 {
			t.Fatalf("60 certificate-less handshakes: %v failed TLS, %v refused over budget; want 40 and 20", tlsFail, budget)
		}
		time.Sleep(time.Second)
		for range 5 {
			attempt()
		}
		synctest.Wait()
		if tlsFail, budget := rejected(t, srv, rejectTLS), rejected(t, srv, rejectFailureLimit); tlsFail != 44 || budget != 21 {
			t.Fatalf("a second later, 5 more: %v failed TLS, %v refused over budget; want 44 and 21", tlsFail, budget)
		}
		ok := memTransport(t, n, "other", nil, func(c *Config) { c.TLS = ca.memTLS(t, "other") })
		defer ok.Close()
		if resp, err := ok.Call(context.Background(), srv.Addr(), []byte("x")); err != nil || string(resp) != "echo:x" {
			t.Fatalf("another address is not served: %q, %v", resp, err)
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

// rpcConn opens a raw plaintext RPC connection (version 1) from host.
func rpcConn(t *testing.T, n *memnet.Network, host, addr string) net.Conn {
	t.Helper()
	c := dialMem(t, n, host, addr)
	t.Cleanup(func() { c.Close() })
	c.Write([]byte{protoRPC, versionLegacy})
	if _, err := io.ReadFull(c, make([]byte, prefaceLen)); err != nil {
		t.Fatalf("preface not accepted: %v", err)
	}
	return c
}

// writeFor writes b to c until it is written or d passes, and returns the
// bytes written.
func writeFor(c net.Conn, b []byte, d time.Duration) int {
	c.SetWriteDeadline(time.Now().Add(d))
	defer c.SetWriteDeadline(time.Time{})
	n, _ := c.Write(b)
	return n
}

// requestHeader is the header of a request frame of n payload bytes.
func requestHeader(id uint64, n int) []byte {
	b := make([]byte, headerLen)
	header{kind: kindRequest, length: uint32(n), id: id}.put(b)
	return b
}

// 128 connections that each send all but the last byte of a
// MaxMessageSize request hold at most MaxFrameBytes (8 × MaxMessageSize)
// of them in all: beyond it the node stops reading (issue 46 #7: 64 such
// connections pinned 1.1 GiB). Defaults only, so that the test also runs
// against the code before the bound.
func TestSynctestFrameBytesTotal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const msg = 512 << 10
		n := memnet.NewWithBuffer(16 << 10)
		defer n.Close()
		srv := memTransport(t, n, "srv", echo, func(c *Config) { c.MaxMessageSize = msg })
		defer srv.Close()
		var conns []net.Conn
		for _, host := range []string{"slow1", "slow2"} {
			for range 64 {
				conns = append(conns, rpcConn(t, n, host, srv.Addr()))
			}
		}
		var taken atomic.Int64
		payload := make([]byte, msg-1)
		var wg sync.WaitGroup
		for _, c := range conns {
			wg.Go(func() {
				if writeFor(c, requestHeader(1, msg), time.Second) == headerLen {
					taken.Add(int64(writeFor(c, payload, time.Second)))
				}
			})
		}
		wg.Wait()
		// What the node took in, less what the network buffers (16 KiB)
		// and each connection's read buffer (32 KiB) hold.
		slack := int64(len(conns)) * (16<<10 + ioBufSize)
		if got, bound := taken.Load(), int64(8*msg)+slack; got > bound {
			t.Fatalf("128 slow requests: the node took in %d KiB of their payloads, want at most %d KiB (MaxFrameBytes %d KiB and buffers)", got>>10, bound>>10, 8*msg>>10)
		}
	})
}

// One connection's frame bytes — the request being read and those its
// running handlers hold — stay within MaxFrameBytesPerConn
// (4 × MaxMessageSize): with four requests of MaxMessageSize held by
// handlers, the node does not read a fifth until one returns.
func TestSynctestFrameBytesPerConn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const msg = 256 << 10
		n := memnet.NewWithBuffer(16 << 10)
		defer n.Close()
		gate := make(chan struct{})
		var served atomic.Int32
		srv := memTransport(t, n, "srv", HandlerFunc(func(ctx context.Context, _ string, req []byte) ([]byte, error) {
			<-gate
			served.Add(1)
			return nil, nil
		}), func(c *Config) { c.MaxMessageSize = msg })
		defer srv.Close()
		release := sync.OnceFunc(func() { close(gate) })
		defer release() // before srv.Close, which waits for the handlers
		c := rpcConn(t, n, "cli", srv.Addr())
		payload := make([]byte, msg)
		for id := range uint64(4) {
			if w := writeFor(c, append(requestHeader(id+1, msg), payload...), time.Second); w != headerLen+msg {
				t.Fatalf("request %d: %d of %d bytes taken", id+1, w, headerLen+msg)
			}
		}
		writeFor(c, requestHeader(5, msg), time.Second)
		taken := writeFor(c, payload, time.Second)
		if slack := 16<<10 + ioBufSize; taken > slack {
			t.Fatalf("with four requests held, the node took in %d KiB of a fifth, want at most %d KiB (buffers)", taken>>10, slack>>10)
		}
		release()
		if w := writeFor(c, payload[taken:], time.Second); taken+w != msg {
			t.Fatalf("the fifth request's rest was not taken once handlers returned: %d of %d bytes", taken+w, msg)
		}
		synctest.Wait()
		if got := served.Load(); got != 5 {
			t.Fatalf("%d of 5 requests served", got)
		}
	})
}
