package cluster

import (
	"github.com/hashicorp/raft"
)

// VoteGuard is the vote policy: a node grants votes (and pre-votes) only
// while its own Raft id is a voter in its latest configuration. The
// transport enforces it (Allow) before raft sees a vote request.
//
// Why: hashicorp/raft grants a vote to any candidate when its configuration
// is empty, and never asks whether the voter itself is a voter. A node whose
// data dir was wiped (issue 13 #3) therefore votes with an empty log: with
// the old leader gone, its vote elects a lagging candidate that lacks an
// entry the old voter had acknowledged, and a committed grant is lost. With
// incarnation Raft ids (membership.RaftIDFor) the wiped node's id is not in the
// configuration — its predecessor's is — so the guard keeps it from voting
// until the leader has re-added and promoted it, as a new server that has
// caught up. (Raft itself keeps a node that is not a voter from
// campaigning.) A node being removed stops voting once its configuration no
// longer lists it, which is right too.
type VoteGuard struct {
	Self    raft.ServerID
	Config  func() (raft.Configuration, bool) // the latest configuration; false until raft runs
	Refused func()                            // metric hook
}

// Allow is the transport's vote gate (transport.Config.RaftVoteGate),
// asked on the connection's reader goroutine for every inbound
// RequestVote and RequestPreVote before raft reads it. While it returns
// false the transport closes that connection with the request unread: the
// candidate's raft counts the failed RPC as a vote not granted (and logs a
// warning naming this node). Every other RPC reaches raft untouched, on
// raft's own consumer channel: the guard adds no hop to replication.
// (A goroutine relaying every RPC between the transport and raft would
// add a goroutine wake-up to every AppendEntries on every follower.)
func (g *VoteGuard) Allow() bool {
	if g.mayVote() {
		return true
	}
	g.Refused()
	return false
}

// mayVote reports whether this node may grant votes now.
func (g *VoteGuard) mayVote() bool {
	conf, ok := g.Config()
	if !ok {
		return false
	}
	for _, s := range conf.Servers {
		if s.ID == g.Self {
			return s.Suffrage == raft.Voter
		}
	}
	return false
}
