package transport

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"
)

// expectClosedByPeer reads from c until the peer closes it. It fails the
// test if nothing happens for a long time (the bound only stops a broken
// test from hanging).
func expectClosedByPeer(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("connection not closed by the server: %v", err)
	}
}

// stillServes checks that tr answers a normal call from a fresh client.
func stillServes(t *testing.T, tr *Transport, tlsCfg *tls.Config) {
	t.Helper()
	cli := startTransport(t, testConfig(tlsCfg), nil)
	resp, err := cli.Call(ctxTimeout(t), tr.Addr(), []byte("still"))
	if err != nil || string(resp) != "echo:still" {
		t.Fatalf("node stopped serving: %q, %v", resp, err)
	}
}

func dialRaw(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func TestRefusePlaintextGarbage(t *testing.T) {
	cfg := testConfig(nil)
	cfg.Inbound.HandshakeTimeout = 200 * time.Millisecond
	rej := watchRejects(&cfg)
	srv := startTransport(t, cfg, echo)

	rnd := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 4096)
	for i := range random {
		random[i] = byte(rnd.IntN(256))
	}
	random[0] = 0x17 // not a protocol type byte

	for _, tc := range []struct {
		name   string
		send   []byte
		reason string
	}{
		{"unknown first byte", []byte{0xFF, 0x01}, rejectUnknownType},
		{"http request", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"), rejectUnknownType},
		{"random bytes", random, rejectUnknownType},
		{"raft type, future version", []byte{protoRaft, 9}, rejectBadVersion},
		{"silent peer", nil, rejectTimeout},
		{"half a preface", []byte{protoRPC}, rejectTimeout},
		{"tls client hello to plaintext node", []byte{0x16, 0x03, 0x01, 0x00, 0x05}, rejectUnknownType},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialRaw(t, srv.Addr())
			if len(tc.send) > 0 {
				c.Write(tc.send)
			}
			expectClosedByPeer(t, c)
			expectReject(t, srv, rej, tc.reason)
			stillServes(t, srv, nil)
		})
	}
}

func TestRefuseEOFDuringPreface(t *testing.T) {
	cfg := testConfig(nil)
	rej := watchRejects(&cfg)
	srv := startTransport(t, cfg, echo)
	c := dialRaw(t, srv.Addr())
	c.Write([]byte{protoRPC})
	c.(*net.TCPConn).CloseWrite()
	expectClosedByPeer(t, c)
	expectReject(t, srv, rej, rejectEOF)
}

func TestRefuseUnsupportedVersionWithReason(t *testing.T) {
	cfg := testConfig(nil)
	rej := watchRejects(&cfg)
	srv := startTransport(t, cfg, echo)
	for _, proto := range []byte{protoRPC, protoRaft} {
		c := dialRaw(t, srv.Addr())
		c.Write([]byte{proto, 3})
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		var hdr [headerLen]byte
		h, msg, err := readFrame(bufio.NewReader(c), &hdr, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		if h.kind != kindError || h.code != codeVersion || !strings.Contains(string(msg), "unsupported version 3") {
			t.Fatalf("got frame %+v %q", h, msg)
		}
		expectClosedByPeer(t, c)
		expectReject(t, srv, rej, rejectBadVersion)
	}
	// The dialing side turns the refusal into errProtocol with the reason.
	c := dialRaw(t, srv.Addr())
	c.Write([]byte{protoRPC, 7})
	if err := readAck(c, protoRPC, 7); !errors.Is(err, errProtocol) || !strings.Contains(err.Error(), "unsupported version 7") {
		t.Fatalf("readAck = %v", err)
	}
}

func TestRefuseGarbageAfterPreface(t *testing.T) {
	srv := startTransport(t, testConfig(nil), echo)
	for _, garbage := range [][]byte{
		make([]byte, headerLen),         // kind 0
		[]byte(strings.Repeat("z", 64)), // reserved bytes set
		append([]byte{kindRequest, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff}, make([]byte, 16)...), // 2 GiB payload
		newFrame(kindResponse, 0, 1, 0, nil),                                              // server-only kind
	} {
		c := dialRaw(t, srv.Addr())
		c.Write(append([]byte{protoRPC, versionLegacy}, garbage...))
		expectClosedByPeer(t, c)
	}
	// Each violation was counted before its connection closed.
	if got := counterValue(t, srv.metrics.protocol); got != 4 {
		t.Fatalf("protocol errors counted: %v, want 4", got)
	}
	stillServes(t, srv, nil)
}

func TestRefuseTLSPeers(t *testing.T) {
	ca := newTestCA(t, "cluster-ca")
	other := newTestCA(t, "other-ca")
	cfg := testConfig(ca.tlsConfig(t, "srv"))
	cfg.Inbound.HandshakeTimeout = 200 * time.Millisecond
	rej := watchRejects(&cfg)
	srv := startTransport(t, cfg, echo)

	t.Run("plaintext transport", func(t *testing.T) {
		cli := startTransport(t, testConfig(nil), nil)
		_, err := cli.Call(ctxTimeout(t), srv.Addr(), []byte("x"))
		if !errors.Is(err, errHandshake) {
			t.Fatalf("plaintext call to a TLS node: %v, want errHandshake", err)
		}
		expectReject(t, srv, rej, rejectTLS)
		stillServes(t, srv, ca.tlsConfig(t, "good"))
	})

	t.Run("raw plaintext request", func(t *testing.T) {
		c := dialRaw(t, srv.Addr())
		c.Write(append([]byte{protoRPC, versionLegacy}, newFrame(kindRequest, 0, 1, 0, []byte("hi"))...))
		expectClosedByPeer(t, c)
		expectReject(t, srv, rej, rejectTLS)
	})

	t.Run("silent TLS peer", func(t *testing.T) {
		c := dialRaw(t, srv.Addr())
		expectClosedByPeer(t, c)
		expectReject(t, srv, rej, rejectTimeout)
	})

	t.Run("client certificate from another CA", func(t *testing.T) {
		// Trusts the cluster CA (so it accepts the server) but presents a
		// certificate the cluster CA did not sign.
		bad := NewMutualTLSConfig(other.leaf(t, "intruder"), ca.Pool, "")
		cli := startTransport(t, testConfig(bad), nil)
		_, err := cli.Call(ctxTimeout(t), srv.Addr(), []byte("x"))
		if !errors.Is(err, errHandshake) {
			t.Fatalf("call with a foreign client certificate: %v, want errHandshake", err)
		}
		expectReject(t, srv, rej, rejectTLS)
		// The Raft path refuses it too.
		if _, err := cli.streamLayer().Dial("127.0.0.1:1", time.Second); err == nil {
			t.Fatal("raft dial to a closed port succeeded")
		}
		if _, err := cli.streamLayer().Dial(raftAddr(srv), 20*time.Second); !errors.Is(err, errHandshake) {
			t.Fatalf("raft dial with a foreign certificate: %v, want errHandshake", err)
		}
		expectReject(t, srv, rej, rejectTLS)
		stillServes(t, srv, ca.tlsConfig(t, "good"))
	})

	t.Run("server certificate from another CA", func(t *testing.T) {
		// A node of another cluster: the client refuses it.
		foreign := startTransport(t, testConfig(other.tlsConfig(t, "foreign")), echo)
		cli := startTransport(t, testConfig(ca.tlsConfig(t, "cli")), nil)
		_, err := cli.Call(ctxTimeout(t), foreign.Addr(), []byte("x"))
		if !errors.Is(err, errHandshake) {
			t.Fatalf("err = %v, want errHandshake", err)
		}
	})

	t.Run("TLS client without certificate", func(t *testing.T) {
		c := dialRaw(t, srv.Addr())
		tc := tls.Client(c, &tls.Config{RootCAs: ca.Pool, ServerName: "127.0.0.1"})
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := tc.HandshakeContext(ctx); err == nil {
			// TLS 1.3: the server rejects the missing certificate after the
			// client's handshake completes; the connection then closes.
			tc.Write([]byte{protoRPC, versionLegacy})
		}
		expectClosedByPeer(t, tc)
		expectReject(t, srv, rej, rejectTLS)
	})
}
