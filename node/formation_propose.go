package node

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/raftlock/raftlock/internal/membership"
)

// The proposer side of formation: rounds of single-decree Paxos until the
// node has Raft state or finds the cluster exists (see formation.go and
// internal/membership/formation.go).

// run takes part in formation until the node has Raft state, a cluster is
// found to exist, or ctx ends.
func (f *formation) run(ctx context.Context) {
	for {
		if f.step(ctx) {
			f.mu.Lock()
			f.over = true
			f.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		case <-time.After(jitterDur(f.interval)):
		}
	}
}

// step runs one round and reports whether formation is over.
func (f *formation) step(ctx context.Context) bool {
	if f.n.hasRaftState() {
		return true
	}
	f.mu.Lock()
	decided := f.acc.Decided
	f.mu.Unlock()
	self := f.self()
	if decided.Names(self.ID, self.Incarnation) {
		return f.bootstrap(decided)
	}
	cands, existing, problem := f.candidates()
	switch {
	case existing != "":
		f.found(existing, "")
		return true
	case problem != "":
		f.setState(problem)
		return false
	case len(cands) < f.quorum:
		f.setState(fmt.Sprintf("waiting for founding nodes: %d visible, %d needed", len(cands), f.quorum))
		return false
	}
	if !f.myTurn(cands) {
		f.setState("waiting for another node's proposal")
		return false
	}
	return f.propose(ctx, cands)
}

// myTurn: the smallest id proposes every round; the others only when no
// proposer has been heard from for a while (longer the higher their rank),
// so that duels are rare.
func (f *formation) myTurn(cands []membership.Candidate) bool {
	ids := make([]string, len(cands))
	for i, c := range cands {
		ids[i] = c.ID
	}
	slices.Sort(ids)
	rank := slices.Index(ids, f.n.cfg.ID)
	if rank <= 0 {
		return true
	}
	f.mu.Lock()
	quiet := time.Since(f.lastPeer)
	f.mu.Unlock()
	return quiet > time.Duration(4*rank)*f.interval
}

// propose runs one ballot; it reports whether formation is over.
func (f *formation) propose(ctx context.Context, cands []membership.Candidate) bool {
	f.mu.Lock()
	b := membership.NextBallot(f.n.cfg.ID, f.maxSeen, f.acc.Promised)
	f.maxSeen = b
	f.mu.Unlock()
	f.setState(fmt.Sprintf("proposing (ballot %d)", b.Round))
	msg := formationMsg{Mode: f.mode, From: f.self(), Ballot: b}

	replies := f.ask(ctx, opPrepare, msg, cands)
	var promises []membership.Promise
	promised := map[string]bool{}
	for _, r := range replies {
		if r.HasState {
			if d := r.Seen.Decided; d.Check() == nil && d.Names(msg.From.ID, msg.From.Incarnation) {
				return f.learn(d)
			}
			f.found(r.From.Addr, r.ClusterID)
			return true
		}
		if r.Refused != "" {
			f.n.refusals.add("formation", r.Refused, r.From.ID)
			continue
		}
		f.seen(r.Seen.Promised)
		promises = append(promises, membership.Promise{From: r.From, OK: r.OK, Seen: r.Seen})
		if r.OK {
			promised[r.From.ID] = true
		}
	}
	v, ok := membership.ChooseValue(promises, f.quorum, f.own)
	if !ok {
		return false
	}
	if f.static && len(v) < len(cands) && !anyAccepted(promises) && time.Since(f.begun) < f.patience {
		// Not every peer answered yet. A majority may found the cluster,
		// but then the others join later as non-voters and the cluster has
		// less redundancy until they are promoted: give late peers a little
		// time first (abandoning a ballot after phase 1 is always safe).
		f.setState(fmt.Sprintf("waiting for the other peers (%d of %d answered)", len(v), len(cands)))
		return false
	}
	msg.Value = v
	var acceptors []membership.Candidate
	for _, c := range cands {
		if promised[c.ID] {
			acceptors = append(acceptors, c)
		}
	}
	var acceptedBy []string
	for _, r := range f.ask(ctx, opAccept, msg, acceptors) {
		f.seen(r.Seen.Promised)
		if r.OK {
			acceptedBy = append(acceptedBy, r.From.ID)
		}
	}
	if !membership.Chosen(acceptedBy, f.quorum) {
		return false
	}
	f.log.Info("founding configuration chosen", "founders", founderIDs(v), "ballot", b.Round, "cluster_id", v.ClusterID())
	var founders []membership.Candidate
	for _, x := range v {
		founders = append(founders, membership.Candidate{ID: x.ID, Addr: x.Addr})
	}
	f.ask(ctx, opDecided, msg, founders)
	f.signal() // this node's own decision, if it is a founder, is handled next round
	return f.n.hasRaftState()
}

// learn records a decided value that names this node (from a founder that
// bootstrapped it) and bootstraps it.
func (f *formation) learn(v membership.Value) bool {
	f.mu.Lock()
	if f.acc.Decided == nil {
		old := f.acc
		f.acc.Decided = v
		if err := f.persistLocked(); err != nil {
			f.acc = old
			f.mu.Unlock()
			f.log.Warn("cannot record the founding decision; will retry", "err", err)
			return false
		}
	}
	d := f.acc.Decided
	f.mu.Unlock()
	return f.bootstrap(d)
}

// seen raises the highest ballot seen.
func (f *formation) seen(b membership.Ballot) {
	f.mu.Lock()
	if b.Compare(f.maxSeen) > 0 {
		f.maxSeen = b
	}
	f.mu.Unlock()
}

// ask sends one request to every candidate at once (this node's own
// acceptor directly) and returns the answers that came back in time, each
// checked to come from the node it was sent to.
func (f *formation) ask(ctx context.Context, op byte, m formationMsg, cands []membership.Candidate) []formationReply {
	ctx, cancel := context.WithTimeout(ctx, 2*f.n.cfg.Timing.ElectionTimeout+f.interval)
	defer cancel()
	out := make([]formationReply, len(cands))
	got := make([]bool, len(cands))
	var wg sync.WaitGroup
	for i, c := range cands {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var r formationReply
			var err error
			if c.ID == f.n.cfg.ID {
				r, err = f.handle(op, m)
			} else {
				err = f.n.callMembership(ctx, c.Addr, op, m, &r)
			}
			if err != nil {
				f.log.Debug("formation request failed", "to", c.ID, "addr", c.Addr, "err", err)
				return
			}
			if r.From.ID != c.ID || (r.From.Addr != c.Addr && c.ID != f.n.cfg.ID) {
				f.log.Warn("formation answer from an unexpected node: ignored", "asked", c.ID, "at", c.Addr, "answered", r.From.ID, "from", r.From.Addr)
				return
			}
			out[i], got[i] = r, true
		}()
	}
	wg.Wait()
	var replies []formationReply
	for i := range out {
		if got[i] {
			replies = append(replies, out[i])
		}
	}
	return replies
}

// found: a cluster exists already (someone has Raft state). This node
// never founds now; it joins.
func (f *formation) found(addr, clusterID string) {
	f.mu.Lock()
	f.joinAddr = addr
	f.mu.Unlock()
	f.setState("a cluster exists: joining it as a new member")
	f.log.Info("found an existing cluster; not founding: this node joins it as a new member", "member", addr, "cluster_id", clusterID)
}

// bootstrap bootstraps Raft with the decided value, which names this node.
func (f *formation) bootstrap(v membership.Value) bool {
	var conf raft.Configuration
	for _, x := range v {
		conf.Servers = append(conf.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(membership.RaftIDFor(x.ID, x.Incarnation)), Address: raft.ServerAddress(x.Addr)})
	}
	if err := f.n.id.setCluster(v.ClusterID()); err != nil {
		f.log.Error("cannot record the cluster id: not bootstrapping", "err", err)
		return false
	}
	err := f.n.raft.BootstrapCluster(conf).Error()
	switch {
	case err == nil:
		f.log.Info("bootstrapped a new cluster", "founders", founderIDs(v), "cluster_id", v.ClusterID())
	case errors.Is(err, raft.ErrCantBootstrap):
		f.log.Info("not bootstrapping: Raft state appeared meanwhile (the cluster reached this node)")
	case errors.Is(err, raft.ErrRaftShutdown):
		return true
	default:
		f.log.Warn("bootstrap failed; will retry", "err", err)
		return false
	}
	f.setState("")
	return true
}

func founderIDs(v membership.Value) string {
	ids := make([]string, len(v))
	for i, x := range v {
		ids[i] = x.ID
	}
	return strings.Join(ids, ",")
}

// jitterDur returns d ± 10%.
func jitterDur(d time.Duration) time.Duration {
	return d - d/10 + rand.N(d/5+1)
}

// anyAccepted reports whether a promise carries an accepted value (which
// must then be proposed, whatever its size).
func anyAccepted(promises []membership.Promise) bool {
	for _, p := range promises {
		if p.OK && len(p.Seen.Accepted) > 0 {
			return true
		}
	}
	return false
}
