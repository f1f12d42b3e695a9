package transport

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

var errOtherCluster = errors.New("other cluster")

// sameCluster is a CheckPeer that refuses peers of another cluster (an
// empty ClusterID on either side is accepted).
func sameCluster(own string) func(Identity, bool) error {
	return func(p Identity, inbound bool) error {
		if own != "" && p.ClusterID != "" && p.ClusterID != own {
			return fmt.Errorf("%w: peer %q is in cluster %q, this node in %q", errOtherCluster, p.NodeID, p.ClusterID, own)
		}
		return nil
	}
}

// identityTransport starts a loopback transport with the hello on.
func identityTransport(t *testing.T, id Identity, check func(Identity, bool) error, edit func(*Config)) *Transport {
	t.Helper()
	cfg := testConfig(nil)
	cfg.Identity = func() Identity { return id }
	cfg.CheckPeer = check
	if edit != nil {
		edit(&cfg)
	}
	return startTransport(t, cfg, echo)
}

// acceptRaft accepts b's inbound Raft connections until b closes.
func acceptRaft(t *testing.T, b *Transport) <-chan net.Conn {
	ch := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := b.streamLayer().Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			ch <- c
		}
	}()
	return ch
}

// raftPair dials a Raft connection from a to b (whose inbound connections
// arrive on acc) and returns both ends, or the dial error.
func raftPair(t *testing.T, a, b *Transport, acc <-chan net.Conn) (out, in net.Conn, err error) {
	t.Helper()
	out, err = a.streamLayer().Dial(raftAddr(b), 10*time.Second)
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { out.Close() })
	select {
	case in = <-acc:
	case <-time.After(20 * time.Second):
		t.Fatal("dialed Raft connection not accepted")
	}
	return out, in, nil
}

// expectRaftFlows checks that bytes flow both ways over a Raft connection.
func expectRaftFlows(t *testing.T, out, in net.Conn) {
	t.Helper()
	for _, dir := range []struct{ w, r net.Conn }{{out, in}, {in, out}} {
		msg := raftMsg
		if _, err := dir.w.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		dir.r.SetReadDeadline(time.Now().Add(20 * time.Second))
		if _, err := io.ReadFull(dir.r, got); err != nil || !bytes.Equal(got, msg) {
			t.Fatalf("raft bytes: %q, %v", got, err)
		}
	}
}

// raftMsg is a small well-formed Raft request (RequestVote{Term: 7}): the
// inbound guard (raftguard.go) passes only those.
var raftMsg = []byte{1, 0x81, 0xa4, 'T', 'e', 'r', 'm', 0x07}

// lastRefusal returns tr's newest refusal.
func lastRefusal(t *testing.T, tr *Transport) Refusal {
	t.Helper()
	rs := tr.Refusals()
	if len(rs) == 0 {
		t.Fatal("no refusal recorded")
	}
	return rs[0]
}

// Two nodes of different clusters cannot open RPC or Raft connections in
// either direction; each side records why (Safety I #2, transport side).
func TestIdentityOtherClusterRefused(t *testing.T) {
	a := identityTransport(t, Identity{NodeID: "a", Incarnation: "ia", ClusterID: "c1"}, sameCluster("c1"), nil)
	b := identityTransport(t, Identity{NodeID: "b", Incarnation: "ib", ClusterID: "c2"}, sameCluster("c2"), nil)
	acceptRaft(t, a)
	acceptRaft(t, b)
	for _, d := range []struct {
		name     string
		from, to *Transport
		fromID   string
	}{{"a to b", a, b, "a"}, {"b to a", b, a, "b"}} {
		t.Run(d.name, func(t *testing.T) {
			_, err := d.from.Call(ctxTimeout(t), d.to.Addr(), []byte("x"))
			if !errors.Is(err, errRefused) || !strings.Contains(err.Error(), "is in cluster") {
				t.Fatalf("RPC to another cluster: %v, want errRefused with the reason", err)
			}
			if _, _, err := raftPair(t, d.from, d.to, nil); !errors.Is(err, errRefused) || !strings.Contains(err.Error(), "is in cluster") {
				t.Fatalf("Raft dial to another cluster: %v, want errRefused with the reason", err)
			}
			got := lastRefusal(t, d.to)
			if !got.Inbound || got.ByPeer || got.Peer.NodeID != d.fromID || !strings.Contains(got.Reason, "is in cluster") || got.At.IsZero() {
				t.Fatalf("listener's refusal record: %+v", got)
			}
			got = lastRefusal(t, d.from)
			if got.Inbound || !got.ByPeer || got.Addr != d.to.Addr() || !strings.Contains(got.Reason, "is in cluster") {
				t.Fatalf("dialer's refusal record: %+v", got)
			}
			if rejected(t, d.to, rejectIdentity) < 2 || counterValue(t, d.from.metrics.refusedByPeer) < 2 {
				t.Fatal("refusals not counted")
			}
		})
	}
	if counterValue(t, a.metrics.accepted.WithLabelValues("raft")) != 0 || counterValue(t, b.metrics.accepted.WithLabelValues("rpc")) != 0 {
		t.Fatal("a refused connection was handed over")
	}
}

// The dialer vets the listener too: a node that accepts everybody still
// cannot be reached by a node that refuses it, and learns why.
func TestIdentityDialerRefusesListener(t *testing.T) {
	a := identityTransport(t, Identity{NodeID: "a", ClusterID: "c1"}, sameCluster("c1"), nil)
	var rej <-chan string
	b := identityTransport(t, Identity{NodeID: "b", ClusterID: "c2"}, nil, func(c *Config) { rej = watchRejects(c) })
	acceptRaft(t, b)
	_, err := a.Call(ctxTimeout(t), b.Addr(), nil)
	if !errors.Is(err, errHandshake) || !errors.Is(err, errOtherCluster) {
		t.Fatalf("call to a node this node refuses: %v, want errHandshake and CheckPeer's error", err)
	}
	expectReject(t, b, rej, rejectRefusedByPeer)
	if _, _, err := raftPair(t, a, b, nil); !errors.Is(err, errOtherCluster) {
		t.Fatalf("raft dial to a node this node refuses: %v", err)
	}
	expectReject(t, b, rej, rejectRefusedByPeer)
	got := lastRefusal(t, a)
	if got.Inbound || got.ByPeer || got.Peer != (Identity{NodeID: "b", ClusterID: "c2"}) {
		t.Fatalf("dialer's refusal record: %+v", got)
	}
	got = lastRefusal(t, b)
	if !got.Inbound || !got.ByPeer || got.Peer.NodeID != "a" || !strings.Contains(got.Reason, "is in cluster") {
		t.Fatalf("listener's refusal record: %+v", got)
	}
	if counterValue(t, b.metrics.accepted.WithLabelValues("raft")) != 0 || counterValue(t, b.metrics.accepted.WithLabelValues("rpc")) != 0 {
		t.Fatal("a refused connection was handed over")
	}
}

// A node that belongs to no cluster yet (empty ClusterID) talks to anyone,
// in both directions and over both protocols.
func TestIdentityEmptyClusterAccepted(t *testing.T) {
	a := identityTransport(t, Identity{NodeID: "a"}, sameCluster(""), nil)
	b := identityTransport(t, Identity{NodeID: "b", ClusterID: "c2"}, sameCluster("c2"), nil)
	acc := map[*Transport]<-chan net.Conn{a: acceptRaft(t, a), b: acceptRaft(t, b)}
	for _, d := range []struct{ from, to *Transport }{{a, b}, {b, a}} {
		if resp, err := d.from.Call(ctxTimeout(t), d.to.Addr(), []byte("hi")); err != nil || string(resp) != "echo:hi" {
			t.Fatalf("call: %q, %v", resp, err)
		}
		out, in, err := raftPair(t, d.from, d.to, acc[d.to])
		if err != nil {
			t.Fatal(err)
		}
		expectRaftFlows(t, out, in)
	}
	if len(a.Refusals()) != 0 || len(b.Refusals()) != 0 {
		t.Fatalf("refusals recorded: %v %v", a.Refusals(), b.Refusals())
	}
}

// A node of the previous release (preface version 1, no hello) and a node
// of this one interoperate exactly when AcceptLegacy says so, in both
// directions and over both protocols.
func TestLegacyInterop(t *testing.T) {
	var allow atomic.Bool
	legacyOK := func() bool { return allow.Load() }
	v2 := identityTransport(t, Identity{NodeID: "new", ClusterID: "c1"}, sameCluster("c1"), func(c *Config) { c.AcceptLegacy = legacyOK })
	v1 := startTransport(t, func() Config { c := testConfig(nil); c.legacyV1 = true; return c }(), echo)
	acc1, acc2 := acceptRaft(t, v1), acceptRaft(t, v2)

	allow.Store(false)
	if _, err := v1.Call(ctxTimeout(t), v2.Addr(), nil); !errors.Is(err, errProtocol) || !strings.Contains(err.Error(), "version 1 of protocol 0xa2 refused") {
		t.Fatalf("legacy dialer, legacy refused: %v", err)
	}
	if got := lastRefusal(t, v2); !got.Inbound || got.ByPeer || !strings.Contains(got.Reason, "refused") {
		t.Fatalf("refusal of a legacy dialer not recorded: %+v", got)
	}
	if _, _, err := raftPair(t, v1, v2, nil); !errors.Is(err, errProtocol) {
		t.Fatalf("legacy raft dialer, legacy refused: %v", err)
	}
	if _, err := v2.Call(ctxTimeout(t), v1.Addr(), nil); !errors.Is(err, errProtocol) || !strings.Contains(err.Error(), "unsupported version 2") {
		t.Fatalf("dial of a legacy listener, legacy refused: %v", err)
	}
	if _, _, err := raftPair(t, v2, v1, nil); !errors.Is(err, errProtocol) {
		t.Fatalf("raft dial of a legacy listener, legacy refused: %v", err)
	}

	allow.Store(true)
	if resp, err := v1.Call(ctxTimeout(t), v2.Addr(), []byte("old")); err != nil || string(resp) != "echo:old" {
		t.Fatalf("legacy dialer, legacy admitted: %q, %v", resp, err)
	}
	out, in, err := raftPair(t, v1, v2, acc2)
	if err != nil {
		t.Fatal(err)
	}
	expectRaftFlows(t, out, in)

	refusedBefore := rejected(t, v1, rejectBadVersion)
	if resp, err := v2.Call(ctxTimeout(t), v1.Addr(), []byte("new")); err != nil || string(resp) != "echo:new" {
		t.Fatalf("dial of a legacy listener, legacy admitted: %q, %v", resp, err)
	}
	out, in, err = raftPair(t, v2, v1, acc1)
	if err != nil {
		t.Fatal(err)
	}
	expectRaftFlows(t, out, in)
	// The first dial learnt that the address is legacy; the second went
	// straight to version 1.
	if got := rejected(t, v1, rejectBadVersion) - refusedBefore; got != 1 {
		t.Fatalf("legacy listener refused version 2 %v times, want once (remembered per address)", got)
	}
}

// Probe reports the peer's Identity and, with TLS, its verified chain.
func TestProbe(t *testing.T) {
	ca := newTestCA(t, "ca")
	srvCert := ca.leaf(t, "srv")
	mk := func(id Identity, cert *tls.Certificate, check func(Identity, bool) error) *Transport {
		return identityTransport(t, id, check, func(c *Config) {
			if cert != nil {
				c.TLS = NewMutualTLSConfig(*cert, ca.Pool, "")
			}
		})
	}
	cliCert := ca.leaf(t, "cli")
	srv := mk(Identity{NodeID: "srv", Incarnation: "inc-1", ClusterID: "c1"}, &srvCert, nil)
	cli := mk(Identity{NodeID: "cli"}, &cliCert, nil)
	p, err := cli.Probe(ctxTimeout(t), srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	if p.Identity != (Identity{NodeID: "srv", Incarnation: "inc-1", ClusterID: "c1"}) {
		t.Fatalf("probed identity %+v", p.Identity)
	}
	if len(p.Certificates) < 2 || !bytes.Equal(p.Certificates[0].Raw, srvCert.Certificate[0]) || !p.Certificates[len(p.Certificates)-1].Equal(ca.Cert) {
		t.Fatalf("probed chain of %d certificates is not leaf-first up to the CA", len(p.Certificates))
	}

	plainSrv := mk(Identity{NodeID: "p"}, nil, nil)
	plainCli := mk(Identity{NodeID: "q"}, nil, sameCluster("c9"))
	if p, err := plainCli.Probe(ctxTimeout(t), plainSrv.Addr()); err != nil || p.Identity.NodeID != "p" || p.Certificates != nil {
		t.Fatalf("plaintext probe: %+v, %v", p, err)
	}
	other := mk(Identity{NodeID: "o", ClusterID: "c1"}, nil, nil)
	if p, err := plainCli.Probe(ctxTimeout(t), other.Addr()); !errors.Is(err, errOtherCluster) || p.Identity.NodeID != "o" {
		t.Fatalf("probe refused by CheckPeer: %+v, %v; want the identity and CheckPeer's error", p, err)
	}
	legacy := startTransport(t, func() Config { c := testConfig(nil); c.legacyV1 = true; return c }(), echo)
	if _, err := plainCli.Probe(ctxTimeout(t), legacy.Addr()); !errors.Is(err, errProtocol) {
		t.Fatalf("probe of a legacy node: %v, want errProtocol", err)
	}
}

// Identity values that cannot travel in a hello fail the dial clearly.
func TestIdentityTooLong(t *testing.T) {
	srv := identityTransport(t, Identity{NodeID: "srv"}, nil, nil)
	cli := identityTransport(t, Identity{NodeID: strings.Repeat("n", 256)}, nil, nil)
	if _, err := cli.Call(ctxTimeout(t), srv.Addr(), nil); err == nil || !strings.Contains(err.Error(), "identity NodeID is 256 bytes") {
		t.Fatalf("call with a 256-byte NodeID: %v", err)
	}
}

// A handler learns who dialed: the hello identity and, with TLS, the
// verified chain of the dialer's certificate.
func TestPeerFromContext(t *testing.T) {
	ca := newTestCA(t, "ca")
	srvCert, cliCert := ca.leaf(t, "srv"), ca.leaf(t, "cli")
	got := make(chan Peer, 1)
	h := HandlerFunc(func(ctx context.Context, _ string, req []byte) ([]byte, error) {
		p, ok := PeerFromContext(ctx)
		if !ok {
			return nil, errors.New("no peer in the handler's context")
		}
		got <- p
		return req, nil
	})
	mk := func(id Identity, cert tls.Certificate) *Transport {
		cfg := testConfig(nil)
		cfg.Identity = func() Identity { return id }
		cfg.TLS = NewMutualTLSConfig(cert, ca.Pool, "")
		return startTransport(t, cfg, h)
	}
	srv := mk(Identity{NodeID: "srv"}, srvCert)
	cli := mk(Identity{NodeID: "cli", Incarnation: "i7"}, cliCert)
	if _, err := cli.Call(ctxTimeout(t), srv.Addr(), []byte("hi")); err != nil {
		t.Fatal(err)
	}
	p := <-got
	if p.Identity != (Identity{NodeID: "cli", Incarnation: "i7"}) {
		t.Fatalf("handler saw identity %+v, want the dialer's", p.Identity)
	}
	if len(p.Certificates) == 0 || !bytes.Equal(p.Certificates[0].Raw, cliCert.Certificate[0]) {
		t.Fatalf("handler saw %d certificates, want the dialer's leaf first", len(p.Certificates))
	}
	if _, ok := PeerFromContext(context.Background()); ok {
		t.Fatal("PeerFromContext outside a handler reported a peer")
	}
}
