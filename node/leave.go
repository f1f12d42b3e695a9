package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
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
// leader first hands leadership over. A node that left must not be started
// again on the same data dir; start a new one (it joins as a new member).
func (n *Node) Leave(ctx context.Context) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if n.isClosed() {
		return ErrClosed
	}
	removed := n.decommission(ctx)
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
		n.members.announceLeaving()
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
			n.askLeave(ctx, rid)
		}
		if sleepCtx(ctx, poll) != nil {
			n.log.Warn("stopping before the leader removed this node from the Raft configuration")
			return false
		}
	}
}

// askLeave sends opLeave to the leader.
func (n *Node) askLeave(ctx context.Context, rid string) {
	addr, _ := n.raft.LeaderWithID()
	if addr == "" {
		return
	}
	cctx, cancel := context.WithTimeout(ctx, n.cfg.AttemptTimeout)
	defer cancel()
	var r joinReply
	if err := n.callMembership(cctx, string(addr), opLeave, leaveMsg{RaftID: rid}, &r); err != nil {
		n.log.Debug("asking the leader to remove this node", "err", err)
	}
}

// handleLeave serves opLeave on the leader.
func (n *Node) handleLeave(m leaveMsg) joinReply {
	if n.raft.State() != raft.Leader {
		addr, _ := n.raft.LeaderWithID()
		return joinReply{Leader: string(addr), Reason: "not the leader"}
	}
	n.reconciler.requestLeave(m.RaftID)
	return joinReply{OK: true}
}
