package transport

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"
)

// errRefused: the peer refused this node's identity; the error's message
// carries the peer's reason.
var errRefused = errors.New("transport: refused by peer")

// Refusal is one connection refused during the hello, by this node or by
// its peer.
type Refusal struct {
	// Addr is the dialed address (outbound) or the remote address of the
	// accepted connection (inbound).
	Addr string
	// Inbound: the peer dialed this node. Otherwise this node dialed.
	Inbound bool
	// ByPeer: the peer refused this node. Otherwise this node refused the
	// peer (CheckPeer returned an error, or the peer spoke a refused
	// version).
	ByPeer bool
	// Peer is the Identity the peer sent; zero if it sent none (a legacy
	// peer, or a refusal before its hello).
	Peer Identity
	// Reason is the refusal's text (what CheckPeer returned, bounded).
	Reason string
	// At is when it happened (wall clock, for display).
	At time.Time
}

// maxRefusals bounds Refusals; maxWarned bounds the (peer, reason) pairs
// remembered for logging each one once.
const (
	maxRefusals = 32
	maxWarned   = 1024
)

// refusals keeps the most recent refusals and which (peer, reason) pairs
// were logged. Safe for concurrent use; the zero value is ready.
type refusals struct {
	mu     sync.Mutex
	recent []Refusal // oldest first, at most maxRefusals
	warned map[string]struct{}
}

// add records r; it reports whether its (peer, reason) pair is new, i.e.
// should be logged at Warn.
func (rs *refusals) add(r Refusal) bool {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if len(rs.recent) == maxRefusals {
		rs.recent = slices.Delete(rs.recent, 0, 1)
	}
	rs.recent = append(rs.recent, r)
	key := fmt.Sprintf("%s\x00%s\x00%t\x00%s", peerHost(r.Addr, r.Inbound), r.Peer.NodeID, r.ByPeer, r.Reason)
	if _, ok := rs.warned[key]; ok {
		return false
	}
	if rs.warned == nil || len(rs.warned) >= maxWarned {
		rs.warned = make(map[string]struct{})
	}
	rs.warned[key] = struct{}{}
	return true
}

// list returns the recorded refusals, newest first.
func (rs *refusals) list() []Refusal {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	out := slices.Clone(rs.recent)
	slices.Reverse(out)
	return out
}

// peerHost is the part of addr that names the peer: the host of an inbound
// connection (its port is ephemeral), the whole dialed address otherwise.
func peerHost(addr string, inbound bool) string {
	if !inbound {
		return addr
	}
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// Refusals returns the most recent refusals of this node by its peers and
// of peers by this node (at most 32), newest first. Safe for concurrent
// use.
func (t *Transport) Refusals() []Refusal { return t.refusals.list() }

// refuse records, counts and logs a refusal. byPeer: the peer refused us.
func (t *Transport) refuse(addr string, inbound, byPeer bool, peer Identity, reason string) {
	r := Refusal{Addr: addr, Inbound: inbound, ByPeer: byPeer, Peer: peer, Reason: reason, At: wallClock()}
	if byPeer {
		t.metrics.refusedByPeer.Inc()
	} else if !inbound {
		// Inbound refusals are counted by reject, with the other
		// handshake failures.
		t.metrics.rejected.WithLabelValues(rejectIdentity).Inc()
	}
	if !t.refusals.add(r) {
		return
	}
	dir := "outbound"
	if inbound {
		dir = "inbound"
	}
	if byPeer {
		t.log.Warn("transport: refused by peer", "addr", addr, "direction", dir, "peer_id", peer.NodeID, "peer_cluster", peer.ClusterID, "reason", reason)
	} else {
		t.log.Warn("transport: refused peer", "addr", addr, "direction", dir, "peer_id", peer.NodeID, "peer_cluster", peer.ClusterID, "reason", reason)
	}
}
