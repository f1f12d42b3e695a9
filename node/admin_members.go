package node

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/membership"
)

// removalTTL: an operator's removal request the leader has not carried out
// is forgotten after this.
const removalTTL = 5 * time.Minute

type transferMsg struct {
	To string `json:"to"` // node id; "" lets raft pick the most up-to-date voter
}

type removeMsg struct {
	NodeID string `json:"node_id"`
}

// RemovePeer removes a dead server from the Raft configuration now, rather
// than after ReapTimeout: the leader's reconciler removes it as it reaps,
// with the same guards — never while the peer answers the leader's probes
// over Raft/RPC (stop it, or call Leave on it), and never when the voters
// that would remain healthy are fewer than a quorum. It returns once the
// peer is no longer in this node's latest configuration, or an error
// wrapping ErrRefused (not a server, the leader itself, still answering)
// or ErrPeerStays when ctx ends first. If the peer comes back later it is
// added again, as a new non-voter, like any returning member.
func (o *Operator) RemovePeer(ctx context.Context, nodeID string) error {
	n := o.n
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if nodeID == "" {
		return fmt.Errorf("%w: empty node id", ErrInvalidArgument)
	}
	err := n.retry(ctx, false, func(ctx context.Context) error {
		if n.raft.State() == raft.Leader {
			return n.requestRemoval(nodeID)
		}
		body, _ := json.Marshal(removeMsg{NodeID: nodeID})
		_, err := n.callAdmin(ctx, adminRemove, body)
		return err
	})
	if err != nil {
		return err
	}
	for {
		if !n.isServer(nodeID) {
			n.log.Warn("peer removed by an operator", "member", nodeID)
			return nil
		}
		if sleepCtx(ctx, n.cfg.Timing.HeartbeatTimeout/2) != nil {
			return fmt.Errorf("%w: %s is still a server (%v): the leader removes a dead peer only while the voters that stay healthy keep a quorum",
				ErrPeerStays, nodeID, ctx.Err())
		}
	}
}

// isServer reports whether a server of node nodeID is in the latest
// configuration.
func (n *Node) isServer(nodeID string) bool {
	conf, ok := n.latestConfig()
	if !ok {
		return true
	}
	for _, s := range conf.Servers {
		if membership.NodeOf(s.ID) == nodeID {
			return true
		}
	}
	return false
}

// requestRemoval records an operator's removal on the leader.
func (n *Node) requestRemoval(nodeID string) error {
	conf, ok := n.latestConfig()
	if !ok {
		return errNotLeader
	}
	var rid string
	for _, s := range conf.Servers {
		if membership.NodeOf(s.ID) == nodeID {
			rid = string(s.ID)
		}
	}
	r := n.reconciler
	switch {
	case rid == "":
		return fmt.Errorf("%w: %q is not a server of the configuration", ErrRefused, nodeID)
	case rid == n.id.raftID:
		return fmt.Errorf("%w: %q is the leader: transfer leadership first", ErrRefused, nodeID)
	}
	r.mu.Lock()
	reachable := r.health[rid].Reachable
	if !reachable {
		if r.removing == nil {
			r.removing = map[string]time.Time{}
		}
		r.removing[rid] = time.Now()
	}
	r.mu.Unlock()
	if reachable {
		return fmt.Errorf("%w: %q answers the leader's probes: it is not dead (stop it, or call Leave on it)", ErrRefused, nodeID)
	}
	n.wakeReconciler()
	return nil
}

// adminRemovals marks the servers an operator asked to remove as leaving,
// so that the planner removes them under its decommission guard (step 1 of
// membership.PlanMembership) — unless they answer the leader's probes
// again. A server gossip no longer knows is given a dead member record.
func (r *reconciler) adminRemovals(out map[string]membership.Member) {
	conf, ok := r.n.latestConfig()
	r.mu.Lock()
	defer r.mu.Unlock()
	configured := map[string]bool{}
	for _, s := range conf.Servers {
		configured[string(s.ID)] = true
	}
	for rid, since := range r.removing {
		if (ok && !configured[rid]) || time.Since(since) > removalTTL {
			delete(r.removing, rid)
			continue
		}
		if r.health[rid].Reachable {
			continue
		}
		id := membership.NodeOf(raft.ServerID(rid))
		switch m, known := out[id]; {
		case known && m.RaftID == rid:
			m.Leaving = true
			out[id] = m
		case !known:
			out[id] = membership.Member{NodeID: id, RaftID: rid, State: membership.Dead, Since: since, Leaving: true, HasState: true}
		}
	}
}

// TransferLeadership hands leadership to the voter of node to (""
// lets raft pick the most up-to-date voter) and returns the new leader's
// node id. From a follower the request is forwarded to the leader. Errors:
// ErrRefused (to is not a voter), ErrNoQuorum (no leader, or the transfer
// did not finish before ctx ended).
func (o *Operator) TransferLeadership(ctx context.Context, to string) (string, error) {
	n := o.n
	if err := checkCtx(ctx); err != nil {
		return "", err
	}
	_, first := n.raft.LeaderWithID()
	var leader string
	err := n.retry(ctx, false, func(ctx context.Context) error {
		if _, id := n.raft.LeaderWithID(); first != "" && id != "" && id != first {
			leader = membership.NodeOf(id) // moved already (an earlier attempt's reply was lost)
			return nil
		}
		if n.raft.State() == raft.Leader {
			var err error
			leader, err = n.transferLocal(ctx, to)
			return err
		}
		body, _ := json.Marshal(transferMsg{To: to})
		r, err := n.callAdmin(ctx, adminTransfer, body)
		leader = r.NewLeader
		return err
	})
	if err != nil {
		return "", err
	}
	n.log.Info("leadership transferred by an operator", "to", leader)
	return leader, nil
}

// transferLocal runs a leadership transfer on the leader and waits until
// another node leads.
func (n *Node) transferLocal(ctx context.Context, to string) (string, error) {
	var f raft.Future
	if to == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		conf, ok := n.latestConfig()
		if !ok {
			return "", errNotLeader
		}
		var target *raft.Server
		for i, s := range conf.Servers {
			if membership.NodeOf(s.ID) == to && s.Suffrage == raft.Voter {
				target = &conf.Servers[i]
			}
		}
		switch {
		case target == nil:
			return "", fmt.Errorf("%w: %q is not a voter", ErrRefused, to)
		case string(target.ID) == n.id.raftID:
			return to, nil // leads already
		}
		f = n.raft.LeadershipTransferToServer(target.ID, target.Address)
	}
	if err := f.Error(); err != nil {
		return "", fmt.Errorf("%w: leadership transfer: %w", ErrNoQuorum, err)
	}
	for {
		if _, id := n.raft.LeaderWithID(); id != "" && string(id) != n.id.raftID {
			return membership.NodeOf(id), nil
		}
		if err := sleepCtx(ctx, n.cfg.Timing.HeartbeatTimeout/4); err != nil {
			return "", fmt.Errorf("%w: no new leader after the transfer: %w", ErrNoQuorum, err)
		}
	}
}
