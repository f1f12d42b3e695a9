package node

import (
	"errors"
	"time"
)

// ErrDuplicateID: another live member of the gossip cluster already uses this
// node's ID. A node without Raft state that finds one refuses to take part:
// Start fails with it (or, when the duplicate is found later, gossip stops
// and Status.GossipErr says why).
var ErrDuplicateID = errors.New("node: duplicate node id")

// MemberState is the state of a member as this node's gossip layer sees it.
type MemberState string

// Member states.
const (
	// MemberAlive: the member answers.
	MemberAlive MemberState = "alive"
	// MemberSuspect: gossip still counts the member alive, but this node has
	// had no direct probe answer from it for several probe cycles. (This is
	// this node's own view: memberlist does not expose its suspicion.)
	MemberSuspect MemberState = "suspect"
	// MemberDead: the member failed (it stopped answering without leaving).
	MemberDead MemberState = "dead"
	// MemberLeft: the member left, or announced that it is leaving,
	// gracefully (Close).
	MemberLeft MemberState = "left"
	// MemberUnknown: in the Raft configuration, never seen by gossip here.
	MemberUnknown MemberState = "unknown"
)

// Member is one member of the cluster: a gossip member, a server of the Raft
// configuration, or both.
type Member struct {
	ID         string
	Addr       string // Raft/RPC address
	GossipAddr string // empty for MemberUnknown
	State      MemberState
	Since      time.Time // when this node saw State begin; zero for MemberUnknown
	Role       Role      // empty when not in the Raft configuration
	Leader     bool
}
