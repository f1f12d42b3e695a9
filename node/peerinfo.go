package node

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/transport"
)

// peerInfo is what a server tells about itself through the peer-info RPC
// (kindPeerInfo): who it is, what its binary supports and where its Raft
// and state machine stand. The leader raises the cluster version once every
// server reports support for it; membership health checks read the rest.
type peerInfo struct {
	// Legacy: the server could not answer (a server of the previous
	// release answers the unknown request with an error); only MaxVersion
	// (1) is meaningful then.
	Legacy bool

	NodeID      string // Config.ID
	RaftID      string // its Raft server id
	Incarnation string // its data dir's incarnation id ("" if unknown)
	ClusterID   string // the cluster it belongs to ("" before it belongs to one)

	MaxVersion     uint64 // highest cluster version its binary supports
	ClusterVersion uint64 // cluster version its state machine has applied
	Halted         string // why its state machine halted; "" when it is fine

	State        string        // Raft state: leader, follower, candidate, shutdown
	Term         uint64        // current Raft term
	LastIndex    uint64        // last index in its log
	CommitIndex  uint64        // its commit index
	AppliedIndex uint64        // index its state machine has applied
	LastContact  time.Duration // since it last heard from the leader (0 on the leader, or never)
}

// localPeerInfo describes this node.
func (n *Node) localPeerInfo() peerInfo {
	id := n.ident()
	p := peerInfo{
		NodeID: id.NodeID, RaftID: id.RaftID, Incarnation: id.Incarnation, ClusterID: id.ClusterID,
		MaxVersion: n.maxVersion(), ClusterVersion: n.fsm.ClusterVersion(), Halted: n.haltedReason(),
		AppliedIndex: n.applied.get(), State: "shutdown",
	}
	if n.started.Load() {
		r := n.raft
		p.State, p.Term, p.LastIndex, p.CommitIndex = stateName(r.State()), r.CurrentTerm(), r.LastIndex(), r.CommitIndex()
		if lc := r.LastContact(); !lc.IsZero() && r.State() != raft.Leader {
			p.LastContact = time.Since(lc)
		}
	}
	return p
}

// peerInfo asks the server at addr (its Raft/RPC address) about itself. A
// server of the previous release, which does not know the request, yields
// Legacy with MaxVersion 1 (and no error). Other failures (unreachable,
// ctx) are errors.
func (n *Node) peerInfo(ctx context.Context, addr string) (peerInfo, error) {
	reply, err := n.trans.Call(ctx, addr, encodePeerInfoRequest())
	switch {
	case errors.Is(err, transport.ErrRemote):
		return peerInfo{Legacy: true, MaxVersion: 1}, nil
	case err != nil:
		return peerInfo{}, fmt.Errorf("node: peer info from %s: %w", addr, err)
	}
	p, err := decodePeerInfoReply(reply)
	if err != nil {
		return peerInfo{}, fmt.Errorf("node: peer info from %s: %w", addr, err)
	}
	return p, nil
}

// Peer-info messages (see wire.go for the framing):
//
//	peer-info request: v, kindPeerInfo
//	peer-info reply:   v, kindPeerInfo, nodeID, raftID, incarnation, clusterID,
//	                   maxVersion, clusterVersion, halted, state, term,
//	                   lastIndex, commitIndex, appliedIndex, lastContact (ns)
//
// (strings as in wire.go, at most 1024 bytes; integers uvarints.)
const kindPeerInfo byte = 5

func encodePeerInfoRequest() []byte { return []byte{wireVersion, kindPeerInfo} }

func encodePeerInfoReply(p peerInfo) []byte {
	b := []byte{wireVersion, kindPeerInfo}
	for _, s := range []string{p.NodeID, p.RaftID, p.Incarnation, p.ClusterID} {
		b = appendString(b, truncateString(s, 1024))
	}
	b = binary.AppendUvarint(b, p.MaxVersion)
	b = binary.AppendUvarint(b, p.ClusterVersion)
	b = appendString(b, truncateString(p.Halted, 1024))
	b = appendString(b, p.State)
	for _, x := range []uint64{p.Term, p.LastIndex, p.CommitIndex, p.AppliedIndex, uint64(max(p.LastContact, 0))} {
		b = binary.AppendUvarint(b, x)
	}
	return b
}

func decodePeerInfoReply(b []byte) (peerInfo, error) {
	r := reader{b: b}
	r.header(kindPeerInfo)
	var p peerInfo
	p.NodeID, p.RaftID, p.Incarnation, p.ClusterID = r.string(), r.string(), r.string(), r.string()
	p.MaxVersion, p.ClusterVersion = r.uvarint(), r.uvarint()
	p.Halted, p.State = r.string(), r.string()
	p.Term, p.LastIndex, p.CommitIndex, p.AppliedIndex = r.uvarint(), r.uvarint(), r.uvarint(), r.uvarint()
	lc := r.uvarint()
	if r.err == nil && (p.MaxVersion == 0 || lc > 1<<62) {
		return peerInfo{}, fmt.Errorf("%w: implausible peer info", errWire)
	}
	p.LastContact = time.Duration(lc)
	if err := r.end(); err != nil {
		return peerInfo{}, err
	}
	return p, nil
}

func truncateString(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
