package node

import (
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
)

// The read accessors below read this node's FSM: they are fast, never block
// on the network, and may be stale on a follower (by its replication lag) or
// on a partitioned node. Call Sync first for a linearizable read.

// Holder returns the current holder of a lock, and false if it is free.
func (n *Node) Holder(name string) (fsm.Holder, bool) { return n.fsm.Holder(name) }

// Lock returns a lock's holder, FIFO waiters and lock-delay, and false if it
// has none.
func (n *Node) Lock(name string) (fsm.LockInfo, bool) { return n.fsm.Lock(name) }

// Locks returns up to limit locks whose names start with prefix, in name
// order (limit <= 0: all).
func (n *Node) Locks(prefix string, limit int) []fsm.LockInfo { return n.fsm.Locks(prefix, limit) }

// Owner returns where the acquisition (name, owner) stands.
func (n *Node) Owner(name string, owner fsm.OwnerID) fsm.OwnerState { return n.fsm.Owner(name, owner) }

// Session returns a live session, and false if it does not exist.
func (n *Node) Session(id fsm.SessionID) (fsm.SessionInfo, bool) { return n.fsm.Session(id) }

// Sessions returns every live session in id order.
func (n *Node) Sessions() []fsm.SessionInfo { return n.fsm.Sessions() }

// SessionLocks returns the locks a session holds or waits for, in name order.
func (n *Node) SessionLocks(id fsm.SessionID) []string { return n.fsm.SessionLocks(id) }

// Stats returns counters of the local FSM.
func (n *Node) Stats() fsm.Stats { return n.fsm.Stats() }

// Digest returns the applied index and a hash of the FSM state: replicas at
// the same applied index have the same digest.
func (n *Node) Digest() (uint64, [32]byte) { return n.fsm.Digest() }

// Subscribe returns a subscription to the events the local FSM applies that
// match f, with a buffer of buf events (at least 1). Close it when done.
func (n *Node) Subscribe(f EventFilter, buf int) (*Subscription, error) {
	set := 0
	for _, b := range []bool{f.All, !f.Owner.IsZero(), f.Session != 0, f.Lock != ""} {
		if b {
			set++
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("%w: event filter must set exactly one of Owner, Session, Lock, All", ErrInvalidArgument)
	}
	if f.EarlyGrants && f.Owner.IsZero() && f.Session == 0 {
		return nil, fmt.Errorf("%w: EarlyGrants needs an Owner or Session filter", ErrInvalidArgument)
	}
	return n.events.add(f, max(buf, 1)), nil
}

// Role of a server in the Raft configuration.
type Role string

// Roles.
const (
	RoleVoter    Role = "voter"
	RoleNonvoter Role = "nonvoter"
)

// Server is one member of the Raft configuration.
type Server struct {
	ID     string
	Addr   string
	Role   Role
	Leader bool
}

// Status describes the node and the cluster as this node sees it.
type Status struct {
	ID           string
	Addr         string
	State        string // "leader", "follower", "candidate" or "shutdown"
	LeaderID     string // empty when no leader is known
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

	// With gossip (Config.GossipAddr) only:
	GossipAddr string   // this node's advertised gossip address
	GossipErr  string   // why the node is not in the gossip cluster (last join error, id conflict); "" when fine
	Members    []Member // gossip members and Raft servers, by ID, as this node sees them
}

// Status returns the node's current status. It does not block on the network.
func (n *Node) Status() Status {
	r := n.raft
	laddr, lid := r.LeaderWithID()
	st := Status{
		ID: n.cfg.ID, Addr: n.trans.Addr(),
		State:    stateName(r.State()),
		LeaderID: string(lid), LeaderAddr: string(laddr),
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
	if f := r.GetConfiguration(); f.Error() == nil {
		for _, s := range f.Configuration().Servers {
			role := RoleVoter
			if s.Suffrage != raft.Voter {
				role = RoleNonvoter
			}
			st.Servers = append(st.Servers, Server{ID: string(s.ID), Addr: string(s.Address), Role: role, Leader: s.ID == lid})
		}
	}
	if n.members != nil {
		n.members.status(&st)
	}
	return st
}

// GossipAddr returns the node's advertised gossip address ("" without gossip).
func (n *Node) GossipAddr() string {
	if n.members == nil {
		return ""
	}
	return n.members.addr
}

// IsLeader reports whether this node is the Raft leader now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

func stateName(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	}
	return "shutdown"
}
