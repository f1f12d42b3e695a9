package node

import "errors"

// Operator is the operator's surface of a node: the actions an operator
// takes on a running cluster, through an admin API such as package admin or
// the raftlock command, and none of an application's normal work.
//
//   - on the lock table: Revoke (force-release one grant), EndSession;
//   - on the state: Backup, Restore, Snapshot (a Raft snapshot now);
//   - on the members: RemovePeer (a dead server now rather than after
//     ReapTimeout), TransferLeadership.
//
// Every action can be called on any replica: what must run on the leader is
// forwarded to it (admin_rpc.go). Their errors are ErrNotHeld,
// ErrNoSuchSession, ErrRefused and ErrPeerStays below, and the node's
// common ones (ErrInvalidArgument, ErrNoQuorum, ErrClosed, ErrHalted).
// An Operator is safe for concurrent use.
type Operator struct{ n *Node }

// Operator returns n's operator actions.
func (n *Node) Operator() *Operator { return &Operator{n} }

// Errors of the operator actions.
var (
	// ErrNotHeld: Revoke found no grant with that token holding the lock
	// (released, expired or revoked already). Nothing changed.
	ErrNotHeld = errors.New("node: the lock is not held by that grant")
	// ErrNoSuchSession: EndSession found no such session. Nothing changed.
	ErrNoSuchSession = errors.New("node: no such session")
	// ErrRefused: the leader refused an operator action (RemovePeer of a
	// peer that answers, a restore whose staging a later restore replaced,
	// below cluster version 4 one larger than a forward can carry, ...);
	// the error says why. Nothing changed.
	ErrRefused = errors.New("node: admin operation refused")
	// ErrPeerStays: RemovePeer's ctx ended while the peer was still a
	// server (the leader removes it only while the voters that stay
	// healthy keep a quorum, and never while it answers the leader's
	// probes).
	ErrPeerStays = errors.New("node: peer not removed")
)
