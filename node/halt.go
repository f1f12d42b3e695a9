package node

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"
)

// A node whose state machine halted (fsm.ErrHalted: it met a log entry or a
// snapshot of a version this binary does not know) stops serving rather
// than diverge: it is not ready, proposals, keepalives and reads through
// Sync fail with ErrHalted, Status.Halted says why, the halt is logged at
// ERROR and raftlock_node_fsm_halted is 1. Its Raft keeps replicating the
// log to disk, so a restart with a binary that knows the version replays it
// and continues. A halted leader hands leadership to another voter.

// haltErr returns nil, or an error wrapping ErrHalted and the FSM's reason.
func (n *Node) haltErr() error {
	if err := n.fsm.Halted(); err != nil {
		return fmt.Errorf("%w: %w", ErrHalted, err)
	}
	return nil
}

// halted is told by the FSM (on the apply goroutine) that it stopped.
func (n *Node) halted(index uint64, err error) {
	n.log.Error("the state machine halted: this binary cannot apply the replicated log; upgrade it and restart the node",
		"index", index, "err", err)
	if n.started.Load() && n.raft.State() == raft.Leader {
		n.wg.Add(1)
		go n.stepDownHalted()
	}
}

// stepDownHalted hands leadership to a voter whose state machine is not
// halted, retrying while this node leads. (When every replica halted on the
// same entry there is none: the cluster serves nothing until upgraded.)
func (n *Node) stepDownHalted() {
	defer n.wg.Done()
	for n.raft.State() == raft.Leader {
		if target, ok := n.healthyVoter(); ok {
			err := n.raft.LeadershipTransferToServer(raft.ServerID(target.ID), raft.ServerAddress(target.Address)).Error()
			if err != nil {
				n.log.Warn("a halted leader could not hand leadership over; retrying", "to", target.ID, "err", err)
			}
		}
		if sleepCtx(n.ctx, n.cfg.Timing.ElectionTimeout) != nil {
			return
		}
	}
}

// healthyVoter returns another voter that answers peer info and is not
// halted.
func (n *Node) healthyVoter() (raft.Server, bool) {
	others, _ := n.others()
	for _, s := range others {
		if s.Suffrage != raft.Voter {
			continue
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.AttemptTimeout)
		info, err := n.peerInfo(ctx, string(s.Address))
		cancel()
		if err == nil && info.Halted == "" {
			return s, true
		}
	}
	return raft.Server{}, false
}

// haltedReason is Status.Halted.
func (n *Node) haltedReason() string {
	if err := n.fsm.Halted(); err != nil {
		return err.Error()
	}
	return ""
}
