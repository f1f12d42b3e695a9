package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
)

// handleRPC serves requests forwarded by other replicas. Malformed requests
// get an error (the transport reports it to the caller); nothing changes.
func (n *Node) handleRPC(ctx context.Context, from string, req []byte) ([]byte, error) {
	kind, err := requestKind(req)
	if err != nil {
		return nil, err
	}
	switch kind {
	case kindApply:
		cmds, err := decodeApplyRequest(req)
		if err != nil {
			return nil, err
		}
		return encodeApplyReply(n.applyForwarded(ctx, cmds)), nil
	case kindKeepAlive:
		id, err := decodeKeepAliveRequest(req)
		if err != nil {
			return nil, err
		}
		if !n.started.Load() {
			return encodeKeepAliveReply(errNotLeader), nil
		}
		err = n.lease.keepAlive(ctx, id)
		n.metrics.countKeepAlive(err)
		return encodeKeepAliveReply(wireSafe(err)), nil
	case kindReadIndex:
		if len(req) != 2 {
			return nil, fmt.Errorf("%w: read-index request with a body", errWire)
		}
		idx, err := n.readIndexLocal(ctx)
		return encodeReadIndexReply(idx, wireSafe(err)), nil
	case kindGrantNotice:
		grants, err := decodeGrantNotice(req)
		if err != nil {
			return nil, err
		}
		n.events.dispatchEarly(grants)
		return encodeGrantNoticeReply(), nil
	case kindPeerInfo:
		if len(req) != 2 {
			return nil, fmt.Errorf("%w: peer-info request with a body", errWire)
		}
		return encodePeerInfoReply(n.localPeerInfo()), nil
	}
	return nil, fmt.Errorf("%w: unknown request kind %d", errWire, kind)
}

// applyForwarded proposes commands forwarded by a follower, as one group.
func (n *Node) applyForwarded(ctx context.Context, cmds []fsm.Command) []outcome {
	outs := make([]outcome, len(cmds))
	if !n.started.Load() || n.raft.State() != raft.Leader || n.fsm.Halted() != nil {
		for i := range outs {
			outs[i].err = errNotLeader
		}
		return outs
	}
	ps := make([]*proposal, len(cmds))
	var group []*proposal
	for i, c := range cmds {
		if c.Op().LeaderOnly() {
			outs[i].err = fmt.Errorf("%w: %s is proposed by the leader only", ErrInvalidArgument, c.Op())
			continue
		}
		if err := c.Validate(); err != nil {
			outs[i].err = fmt.Errorf("%w: %w", ErrInvalidArgument, err)
			continue
		}
		ps[i] = newProposal(ctx, c)
		group = append(group, ps[i])
	}
	n.proposer.submit(group...)
	for i, p := range ps {
		if p != nil {
			outs[i] = p.wait()
			outs[i].err = wireSafe(outs[i].err)
		}
	}
	return outs
}

// wireSafe turns "the handler's context ended" into a retryable verdict: the
// follower's retry is safe (exactly-once or idempotent commands). A command
// that never left the leader's batcher stays "not proposed".
func wireSafe(err error) error {
	var unknown errUnknown
	switch {
	case errors.Is(err, ErrNotProposed):
		return err
	case errors.As(err, &unknown), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %v", ErrNoQuorum, err)
	}
	return err
}

// KeepAlive renews a session's lease. The leader refuses it with
// ErrSessionExpired if the session's deadline passed before the keepalive
// arrived; otherwise, after confirming its leadership, it moves the deadline
// to (arrival + TTL). Keepalives are not written to the log. On a follower
// the keepalive is forwarded; without a leader it is retried until ctx ends
// (then the error wraps ErrNoQuorum). A nil ctx → ErrInvalidArgument; a
// halted node → ErrHalted.
func (n *Node) KeepAlive(ctx context.Context, id fsm.SessionID) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if id == 0 {
		return fmt.Errorf("%w: zero session id", ErrInvalidArgument)
	}
	err := n.retry(ctx, false, func(ctx context.Context) error {
		if n.raft.State() == raft.Leader {
			return n.lease.keepAlive(ctx, id)
		}
		reply, err := n.callLeader(ctx, encodeKeepAliveRequest(id))
		if err != nil {
			return err
		}
		verdict, err := decodeKeepAliveReply(reply)
		if err != nil {
			return fmt.Errorf("%w: %w", errForward, err)
		}
		return verdict
	})
	n.metrics.countKeepAlive(err)
	return err
}

// callLeader sends one request to the current leader.
func (n *Node) callLeader(ctx context.Context, req []byte) ([]byte, error) {
	addr, id := n.raft.LeaderWithID()
	switch {
	case addr == "":
		return nil, errNoLeader
	case string(id) == n.cfg.ID:
		return nil, errNotLeader // we became leader: retry locally
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ForwardTimeout)
	defer cancel()
	reply, err := n.trans.Call(ctx, string(addr), req)
	n.metrics.forwards.WithLabelValues(outcomeLabel(err)).Inc()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errForward, id, err)
	}
	return reply, nil
}

// Sync waits until this node's FSM reflects every command committed before
// Sync was called (a linearizable read barrier, like ZooKeeper's sync): the
// leader confirms its leadership and reports its commit index, and Sync
// waits for the local FSM to apply it. Reads through the node after Sync
// returns are linearizable with respect to Sync's start. Without a leader
// it retries until ctx ends (ErrNoQuorum); a nil ctx → ErrInvalidArgument;
// a halted node → ErrHalted.
func (n *Node) Sync(ctx context.Context) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	var idx uint64
	err := n.retry(ctx, false, func(ctx context.Context) error {
		var err error
		if n.raft.State() == raft.Leader {
			idx, err = n.readIndexLocal(ctx)
			return err
		}
		reply, err := n.callLeader(ctx, encodeReadIndexRequest())
		if err != nil {
			return err
		}
		var verdict error
		if idx, verdict, err = decodeReadIndexReply(reply); err != nil {
			return fmt.Errorf("%w: %w", errForward, err)
		}
		return verdict
	})
	if err != nil {
		return err
	}
	if err := n.applied.wait(ctx, idx); err != nil {
		return fmt.Errorf("node: sync: %w", err)
	}
	return nil
}

// readIndexLocal: on the leader, once leadership is confirmed, raft's own
// commit index — every entry anybody can have observed: the leader's FSM
// applies an entry (and wakes local waiters) only once it is committed,
// before the proposer hears of it. Valid after the new leader's takeover
// barrier has been applied: from then on the commit index covers every
// entry of earlier terms and points at entries the FSM sees (the barrier is
// an FSM command; configuration changes reach the FSM too).
func (n *Node) readIndexLocal(ctx context.Context) (uint64, error) {
	if !n.started.Load() || !n.lease.isLeading() || n.fsm.Halted() != nil {
		return 0, errNotLeader
	}
	idx := n.raft.CommitIndex()
	if err := n.verifier.confirm(ctx); err != nil {
		return 0, leadershipErr(err)
	}
	return idx, nil
}
