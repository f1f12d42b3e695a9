package node

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/membership"
)

// Role of a server in the Raft configuration.
type Role string

// Roles.
const (
	RoleVoter    Role = "voter"
	RoleNonvoter Role = "nonvoter"
)

// Server is one member of the Raft configuration.
type Server struct {
	ID     string // node id
	RaftID string // Raft server id: node id and incarnation
	Addr   string
	Role   Role
	Leader bool
}

// Status describes the node and the cluster as this node sees it.
type Status struct {
	ID           string
	RaftID       string // this node's Raft server id (node id and incarnation)
	Incarnation  string // its data dir's incarnation
	ClusterID    string // its cluster's id ("" before it belongs to one)
	Addr         string
	State        string // "leader", "follower", "candidate" or "shutdown"
	LeaderID     string // node id of the leader; empty when no leader is known
	LeaderAddr   string
	Term         uint64
	LastIndex    uint64
	CommitIndex  uint64
	AppliedIndex uint64        // of the local FSM
	LastContact  time.Duration // since the leader was last heard (followers); 0 on the leader
	Ready        bool
	Servers      []Server
	FSM          fsm.Stats
	// State machine versions (see ErrHalted and fsm's version.go).
	ClusterVersion    uint64     // in force in the log this node applied
	MaxClusterVersion uint64     // what this binary supports
	Halted            string     // why the state machine halted (the node serves nothing); "" when fine
	Limits            fsm.Limits // the replicated quotas in force

	// Voter: this node's incarnation is a voter of its configuration (it
	// grants votes only then).
	Voter bool
	// Formation: while this node takes part in founding a cluster, what it
	// is waiting for; "" otherwise.
	Formation string
	// Refusals: recent reasons this node was refused by others (a leader's
	// notice, a formation peer) or refused others (gossip members of another
	// cluster, conflicts), newest first.
	Refusals []Refusal
	// JoinErr, with static membership (Peers without Bootstrap, or a node
	// not yet in the configuration): why its requests to be added fail —
	// "no peer answered the join: tried …" (each peer and why) while no
	// peer answers; "" when fine.
	JoinErr string

	// With gossip (Config.Gossip) only:
	GossipAddr string   // this node's advertised gossip address
	GossipErr  string   // why the node is not in the gossip cluster: "no seed reachable: tried …" (each seed and why) while it sees no other member, or an id conflict; "" when fine
	Members    []Member // gossip members and Raft servers, by ID, as this node sees them
}

// Status returns the node's current status. It does not block on the network.
func (n *Node) Status() Status {
	r := n.raft
	laddr, lid := r.LeaderWithID()
	id := n.ident()
	st := Status{
		ID: n.cfg.ID, RaftID: id.RaftID, Incarnation: id.Incarnation, ClusterID: id.ClusterID, Addr: n.trans.Addr(),
		State:    stateName(r.State()),
		LeaderID: membership.NodeOf(lid), LeaderAddr: string(laddr),
		Term: r.CurrentTerm(), LastIndex: r.LastIndex(), CommitIndex: r.CommitIndex(),
		AppliedIndex: n.applied.get(),
		FSM:          n.fsm.Stats(),

		ClusterVersion: n.fsm.ClusterVersion(), MaxClusterVersion: n.maxVersion(), Halted: n.haltedReason(),
		Limits: n.fsm.Limits(),
	}
	if st.State == "follower" {
		if lc := r.LastContact(); !lc.IsZero() {
			st.LastContact = time.Since(lc)
		}
	}
	select {
	case <-n.ready:
		st.Ready = st.Halted == ""
	default:
	}
	if conf, ok := n.latestConfig(); ok {
		for _, s := range conf.Servers {
			role := RoleVoter
			if s.Suffrage != raft.Voter {
				role = RoleNonvoter
			}
			st.Servers = append(st.Servers, Server{ID: membership.NodeOf(s.ID), RaftID: string(s.ID), Addr: string(s.Address), Role: role, Leader: s.ID == lid})
			if string(s.ID) == id.RaftID && s.Suffrage == raft.Voter {
				st.Voter = true
			}
		}
	}
	if n.formation != nil {
		st.Formation = n.formation.status()
	}
	st.Refusals = n.refusals.get()
	if why := n.joinErr.Load(); why != nil {
		st.JoinErr = *why
	}
	for _, r := range n.trans.Refusals() {
		who := "refused " + r.Addr
		if r.ByPeer {
			who = "refused by " + r.Addr
		}
		peer := r.Peer.NodeID
		if peer == "" {
			peer = r.Addr
		}
		st.Refusals = append(st.Refusals, Refusal{Reason: "transport_" + r.Reason, Detail: who + ": " + r.Reason, Peer: peer, Last: r.At, Count: 1})
	}
	if n.members != nil {
		n.gossipStatus(&st)
	}
	return st
}
