package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"
	"github.com/raftlock/raftlock/internal/membership"
	"github.com/raftlock/raftlock/transport"
)

// ErrNotRemoved: Leave stopped the node, but the leader had not removed it
// from the Raft configuration (the voters that would remain healthy were
// fewer than a quorum, or no leader could be reached before ctx ended). The
// node is still a member: start it again on its data dir to restore the
// cluster's redundancy, and Leave again once the cluster is healthy.
var ErrNotRemoved = errors.New("node: leave: not removed from the Raft configuration")

// leaveMsg asks the leader to remove the sender for good (opLeave).
type leaveMsg struct {
	RaftID string `json:"raft_id"`
}

// Leave decommissions the node: it asks the leader to remove it from the
// Raft configuration for good — the leader does so only while the voters
// that remain healthy keep a quorum, as for reaping — waits until it is
// removed or ctx ends, and then stops like Close. It returns nil once the
// node was removed and stopped, or an error wrapping ErrNotRemoved. A
// leader first hands leadership over. Once removed, the data dir is marked:
// a later Start on it fails with ErrDecommissioned (like a removed etcd
// member); start the node with an empty data dir instead (it joins as a new
// member).
func (n *Node) Leave(ctx context.Context) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if n.isClosed() {
		return ErrClosed
	}
	removed := n.decommission(ctx)
	if removed {
		n.markLeft()
	}
	cctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(context.Background(), 10*n.cfg.Timing.ElectionTimeout)
		defer cancel()
	}
	if err := n.Close(cctx); err != nil {
		return err
	}
	if !removed {
		return fmt.Errorf("%w (ctx: %v)", ErrNotRemoved, ctx.Err())
	}
	return nil
}

// decommission announces that this node leaves and waits until its Raft id
// is no longer in its latest configuration (or ctx ends).
func (n *Node) decommission(ctx context.Context) bool {
	rid := n.ident().RaftID
	n.log.Info("leaving the cluster for good (decommission)")
	if n.members != nil {
		n.members.AnnounceLeaving()
	}
	poll := n.cfg.Timing.HeartbeatTimeout / 2
	lastAsk := time.Time{}
	for {
		conf, ok := n.latestConfig()
		if !ok {
			return false
		}
		inConf, voters := false, 0
		for _, s := range conf.Servers {
			if string(s.ID) == rid {
				inConf = true
			} else if s.Suffrage == raft.Voter {
				voters++
			}
		}
		if !inConf {
			n.log.Info("removed from the Raft configuration")
			return true
		}
		if voters == 0 {
			n.log.Warn("the last voter cannot leave its own cluster; stopping without removal")
			return false
		}
		if n.raft.State() == raft.Leader {
			// Hand leadership over: a new leader removes this node.
			if err := n.raft.LeadershipTransfer().Error(); err != nil {
				n.log.Debug("leadership transfer while leaving", "err", err)
			}
		} else if time.Since(lastAsk) > 4*n.cfg.Timing.HeartbeatTimeout {
			lastAsk = time.Now()
			if n.askLeave(ctx, rid, conf) {
				// The entry that removed this node may never arrive: the
				// leader stops replicating to a removed server after one
				// best-effort AppendEntries, which can be lost.
				n.log.Info("removed from the Raft configuration (a member's committed configuration no longer lists this node)")
				return true
			}
		}
		if sleepCtx(ctx, poll) != nil {
			n.log.Warn("stopping before the leader removed this node from the Raft configuration")
			return false
		}
	}
}

// markLeft records in the stable store that this data dir's node left its
// cluster (keyLeft). A failure is logged: the node is removed either way,
// and a restart on the data dir then finds itself outside its
// configuration and idle instead of refused.
func (n *Node) markLeft() {
	v := time.Now().UTC().Format(time.RFC3339) + " " + n.ident().ClusterID
	if err := n.store.Stable.Set(keyLeft, []byte(v)); err != nil {
		n.log.Error("could not mark the data dir as decommissioned: do not start this node on it again", "err", err)
	}
}

// checkLeft refuses a data dir marked by Leave (ErrDecommissioned), unless
// Recover is set: then the mark is cleared.
func (n *Node) checkLeft() error {
	v, err := n.store.Stable.Get(keyLeft)
	if err != nil && err.Error() != "not found" { // raft-boltdb's and the memory store's "not found"
		return fmt.Errorf("node: read %s: %w", keyLeft, err)
	}
	if len(v) == 0 {
		return nil
	}
	if n.cfg.Recover {
		n.log.Warn("recovering from a data dir that had left its cluster", "left", string(v))
		if err := n.store.Stable.Set(keyLeft, nil); err != nil {
			return fmt.Errorf("node: recover: clear the decommission mark: %w", err)
		}
		return nil
	}
	return fmt.Errorf("%w (Leave removed it at %s): start with an empty data dir to join as a new member", ErrDecommissioned, v)
}

// askLeave sends opLeave to the leader — or, while this node knows no
// leader (a removed node stops hearing one), to each other server of its
// configuration conf in turn, following a "not the leader" answer once. It
// reports whether a member answered that this node is already removed.
func (n *Node) askLeave(ctx context.Context, rid string, conf raft.Configuration) (removed bool) {
	var targets []string
	if addr, _ := n.raft.LeaderWithID(); addr != "" {
		targets = append(targets, string(addr))
	}
	for _, s := range conf.Servers {
		if string(s.ID) != rid && !slices.Contains(targets, string(s.Address)) {
			targets = append(targets, string(s.Address))
		}
	}
	ask := func(addr string) joinReply {
		cctx, cancel := context.WithTimeout(ctx, n.cfg.AttemptTimeout)
		defer cancel()
		var r joinReply
		if err := n.callMembership(cctx, addr, opLeave, leaveMsg{RaftID: rid}, &r); err != nil {
			n.log.Debug("asking to be removed from the cluster", "addr", addr, "err", err)
		}
		return r
	}
	for _, addr := range targets {
		if ctx.Err() != nil {
			return false
		}
		r := ask(addr)
		if !r.OK && !r.Removed && r.Leader != "" && r.Leader != addr {
			r = ask(r.Leader)
		}
		switch {
		case r.Removed:
			return true
		case r.OK:
			return false // the leader recorded the request
		}
	}
	return false
}

// handleLeave serves opLeave on the leader: only a node's own request
// decommissions it (callerIs). The leader records the request, or answers
// Removed when the removal is already committed (removalCommitted); a
// follower names the leader.
func (n *Node) handleLeave(ctx context.Context, m leaveMsg) joinReply {
	if err := n.callerIs(ctx, membership.NodeOf(raft.ServerID(m.RaftID))); err != nil {
		n.log.Warn("refusing a request to decommission another node", "raft_id", m.RaftID, "err", err)
		return joinReply{Reason: "refused: " + err.Error()}
	}
	if n.raft.State() != raft.Leader {
		addr, _ := n.raft.LeaderWithID()
		return joinReply{Leader: string(addr), Reason: "not the leader"}
	}
	if n.removalCommitted(m.RaftID) {
		return joinReply{OK: true, Removed: true}
	}
	n.reconciler.requestLeave(m.RaftID)
	return joinReply{OK: true}
}

// removalCommitted reports, on the leader, whether raftID's removal from
// the Raft configuration is committed: raftID is not in the latest
// configuration, and either this leader committed its removal itself
// (reconciler.removedByUs) or the leader's whole log is committed — a
// leader's log only grows during its term, so with the term and leadership
// unchanged across the reads, the configuration read first comes from an
// entry at or below the last index read after it. A committed entry is
// never undone: the answer holds under every later leader.
func (n *Node) removalCommitted(raftID string) bool {
	term := n.raft.CurrentTerm()
	conf, ok := n.latestConfig()
	if !ok || hasServer(conf, raftID) || !hasServer(conf, n.id.raftID) {
		return false
	}
	if n.reconciler.removedByUs(raftID) {
		return true
	}
	last := n.raft.LastIndex()
	return n.raft.CommitIndex() >= last && n.raft.State() == raft.Leader && n.raft.CurrentTerm() == term
}

// callerIs checks that the RPC in ctx comes from node id: its hello names
// it and, with TLS, so does its verified certificate (the proof; a hello is
// only a claim).
func (n *Node) callerIs(ctx context.Context, id string) error {
	p, ok := transport.PeerFromContext(ctx)
	switch {
	case !ok:
		return errors.New("the caller is unknown")
	case p.Identity.NodeID != id:
		return fmt.Errorf("node %q may not speak for %q", p.Identity.NodeID, id)
	case n.cfg.TLS != nil && (len(p.Certificates) == 0 || !certNames(p.Certificates[0], id)):
		return fmt.Errorf("the caller's certificate does not name %q", id)
	}
	return nil
}
