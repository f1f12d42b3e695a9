package node

import (
	"sync"

	"github.com/hashicorp/raft"
)

// voteGuard stands between the Raft transport and Raft: a node grants votes
// (and pre-votes) only while its own Raft id is a voter in its latest
// configuration. Everything else passes through untouched.
//
// Why: hashicorp/raft grants a vote to any candidate when its configuration
// is empty, and never asks whether the voter itself is a voter. A node whose
// data dir was wiped (issue 13 #3) therefore votes with an empty log: with
// the old leader gone, its vote elects a lagging candidate that lacks an
// entry the old voter had acknowledged, and a committed grant is lost. With
// incarnation Raft ids (identity.go) the wiped node's id is not in the
// configuration — its predecessor's is — so the guard keeps it from voting
// until the leader has re-added and promoted it, as a new server that has
// caught up. (Raft itself keeps a node that is not a voter from
// campaigning.) A node being removed stops voting once its configuration no
// longer lists it, which is right too.
type voteGuard struct {
	*raft.NetworkTransport
	self    raft.ServerID
	config  func() (raft.Configuration, bool) // the latest configuration; false until raft runs
	ch      chan raft.RPC
	refused func() // metric hook

	stop chan struct{}
	once sync.Once
	wg   sync.WaitGroup
}

func newVoteGuard(nt *raft.NetworkTransport, self raft.ServerID, config func() (raft.Configuration, bool), refused func()) *voteGuard {
	g := &voteGuard{NetworkTransport: nt, self: self, config: config, ch: make(chan raft.RPC), refused: refused, stop: make(chan struct{})}
	g.wg.Add(1)
	go g.run()
	return g
}

// Consumer implements raft.Transport: the RPCs the guard lets through.
func (g *voteGuard) Consumer() <-chan raft.RPC { return g.ch }

// Close stops the guard and closes the transport.
func (g *voteGuard) Close() error {
	g.halt()
	return g.NetworkTransport.Close()
}

// halt stops the guard's goroutine and waits for it. Idempotent.
func (g *voteGuard) halt() {
	g.once.Do(func() { close(g.stop) })
	g.wg.Wait()
}

// mayVote reports whether this node may grant votes now.
func (g *voteGuard) mayVote() bool {
	conf, ok := g.config()
	if !ok {
		return false
	}
	for _, s := range conf.Servers {
		if s.ID == g.self {
			return s.Suffrage == raft.Voter
		}
	}
	return false
}

func (g *voteGuard) run() {
	defer g.wg.Done()
	in := g.NetworkTransport.Consumer()
	for {
		var rpc raft.RPC
		select {
		case rpc = <-in:
		case <-g.stop:
			return
		}
		switch req := rpc.Command.(type) {
		case *raft.RequestVoteRequest:
			if !g.mayVote() {
				g.refused()
				rpc.Respond(&raft.RequestVoteResponse{Term: req.Term, Granted: false}, nil)
				continue
			}
		case *raft.RequestPreVoteRequest:
			if !g.mayVote() {
				g.refused()
				rpc.Respond(&raft.RequestPreVoteResponse{Term: req.Term, Granted: false}, nil)
				continue
			}
		}
		select {
		case g.ch <- rpc:
		case <-g.stop:
			rpc.Respond(nil, raft.ErrTransportShutdown)
			return
		}
	}
}
