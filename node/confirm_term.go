package node

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/hashicorp/raft"
)

// Leadership confirmation by fresh evidence (cluster version 4).
//
// A keepalive is acknowledged once the leader has confirmed that it still
// leads (expiryManager.keepAliveMany; a leadership round of the verifier).
// raft's VerifyLeader (hashicorp/raft v1.7.3) does not confirm that: it
// counts, as a follower's vote, the first successful reply it processes
// after the verify registered — from the heartbeat goroutine
// (followerReplication.notifyAll) or the replication goroutine
// (updateLastAppended) — also a reply to a request the follower processed
// before the keepalive arrived, and before it voted for a new leader. With
// replies delayed, and the leader lease kept by such replies, a deposed
// leader confirms keepalives that arrive after the next election (the
// lease model's stale-evidence check, internal/testing/model/lease: up to about
// 4·LeaderLeaseTimeout − H of staleness, where H is 0 after a leadership
// transfer) — and the client then counts a lease that the new leader's
// takeover grace does not cover.
//
// So from cluster version 4 a round is raftlock's own: the leader sends
// ConfirmTerm{term} to every other voter of its latest configuration, a
// voter answers with raft's current term (and whether it leads), and the
// round confirms once a quorum of voters — the leader counting itself, if
// it still leads in that term at the end — answered with the leader's
// term. A voter that answered term T after the round began had not voted in
// a later term then, and every later election needs a vote from that
// quorum: every later leader is elected after the round began, so after
// every keepalive the round serves. The request/response pairing of the RPC
// is the round counter. A round costs what a VerifyLeader round costs in
// messages — one request and one reply per other voter (VerifyLeader makes
// raft heartbeat each follower at once) — and returns as soon as a quorum
// answered.
//
// Below version 4 (and so while a server of the previous release, which
// answers the unknown kind with an error, may be a voter) rounds are
// VerifyLeader, as before; the takeover grace's ElectionTimeout covers part
// of their staleness (the model's threshold), not all of it.
//
//	confirm-term request: v, kindConfirmTerm, term
//	confirm-term reply:   v, kindConfirmTerm, term, leader (0 or 1)
const kindConfirmTerm byte = 9

// versionConfirmTerm is the cluster version from which leadership rounds
// are ConfirmTerm rounds.
const versionConfirmTerm uint64 = 4

// confirmLeadership is one leadership round of the verifier: ConfirmTerm
// from cluster version 4, VerifyLeader below.
func (n *Node) confirmLeadership() error {
	if n.fsm.ClusterVersion() < versionConfirmTerm {
		return n.raft.VerifyLeader().Error()
	}
	return n.confirmTerm()
}

// errNotConfirmed: too few voters answered with the leader's term before
// the round's deadline.
var errNotConfirmed = fmt.Errorf("%w: leadership not confirmed by a quorum of voters", ErrNoQuorum)

// confirmTerm runs one ConfirmTerm round (see above). It returns nil once
// a quorum confirmed, raft.ErrNotLeader if this node does not lead in the
// term it started with (or a voter answered a later term), and
// errNotConfirmed if no quorum answered within a heartbeat timeout.
func (n *Node) confirmTerm() error {
	term := n.raft.CurrentTerm()
	if n.raft.State() != raft.Leader {
		return raft.ErrNotLeader
	}
	conf, ok := n.latestConfig()
	if !ok {
		return raft.ErrNotLeader
	}
	var peers []raft.Server
	voters, got := 0, 0
	for _, s := range conf.Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		voters++
		if string(s.ID) == n.id.raftID {
			got++ // the leader's own vote, checked at the end
		} else {
			peers = append(peers, s)
		}
	}
	need := voters/2 + 1
	later := false
	if got < need {
		var asked int
		asked, later = n.askTerm(peers, term, need-got)
		got += asked
	}
	switch {
	case later, n.raft.State() != raft.Leader, n.raft.CurrentTerm() != term:
		return raft.ErrNotLeader // the own vote, read after every answer, is gone
	case got < need:
		return errNotConfirmed
	}
	return nil
}

// askTerm sends ConfirmTerm{term} to peers and returns how many answered
// with term, not leading (it stops waiting once want did), and whether one
// answered a later term. It waits at most a heartbeat timeout, and for
// every request it sent to end.
func (n *Node) askTerm(peers []raft.Server, term uint64, want int) (got int, later bool) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.Timing.HeartbeatTimeout)
	type answer struct {
		term   uint64
		leader bool
		err    error
	}
	answers := make(chan answer, len(peers))
	var wg sync.WaitGroup
	req := encodeConfirmTermRequest(term)
	for _, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			reply, err := n.trans.Call(ctx, string(p.Address), req)
			var a answer
			if a.err = err; err == nil {
				a.term, a.leader, a.err = decodeConfirmTermReply(reply)
			}
			answers <- a
		}()
	}
	defer func() {
		cancel() // the requests still out end at once
		wg.Wait()
	}()
	for range peers {
		a := <-answers
		switch {
		case a.err != nil:
		case a.term > term:
			return got, true
		case a.term == term && !a.leader:
			if got++; got >= want {
				return got, false
			}
		}
	}
	return got, false
}

// answerConfirmTerm is a voter's side: its current term, and whether it
// leads (term 0 before raft runs: never a leader's term).
func (n *Node) answerConfirmTerm(req []byte) ([]byte, error) {
	if _, err := decodeConfirmTermRequest(req); err != nil {
		return nil, err
	}
	if !n.started.Load() {
		return encodeConfirmTermReply(0, false), nil
	}
	return encodeConfirmTermReply(n.raft.CurrentTerm(), n.raft.State() == raft.Leader), nil
}

func encodeConfirmTermRequest(term uint64) []byte {
	return binary.AppendUvarint([]byte{wireVersion, kindConfirmTerm}, term)
}

func decodeConfirmTermRequest(b []byte) (uint64, error) {
	r := reader{b: b}
	r.header(kindConfirmTerm)
	term := r.uvarint()
	return term, r.end()
}

func encodeConfirmTermReply(term uint64, leader bool) []byte {
	b := binary.AppendUvarint([]byte{wireVersion, kindConfirmTerm}, term)
	if leader {
		return append(b, 1)
	}
	return append(b, 0)
}

func decodeConfirmTermReply(b []byte) (term uint64, leader bool, err error) {
	r := reader{b: b}
	r.header(kindConfirmTerm)
	term = r.uvarint()
	flag := r.byte()
	if r.err == nil && flag > 1 {
		r.err = fmt.Errorf("%w: confirm-term leader flag %d", errWire, flag)
	}
	if err := r.end(); err != nil {
		return 0, false, err
	}
	return term, flag == 1, nil
}
