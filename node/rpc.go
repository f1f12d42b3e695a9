package node

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/transport"
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
		err = n.expiry.keepAlive(ctx, id)
		n.metrics.countKeepAlive(err)
		return encodeKeepAliveReply(wireSafe(err)), nil
	case kindKeepAliveBatch:
		ids, err := decodeKeepAliveBatchRequest(req)
		if err != nil {
			return nil, err
		}
		verdicts := make([]error, len(ids))
		if !n.started.Load() {
			for i := range verdicts {
				verdicts[i] = errNotLeader
			}
		} else {
			verdicts = n.expiry.keepAliveMany(ctx, ids)
		}
		for i, v := range verdicts {
			n.metrics.countKeepAlive(v)
			verdicts[i] = wireSafe(v)
		}
		return encodeKeepAliveBatchReply(verdicts), nil
	case kindReadIndex:
		if len(req) != 2 {
			return nil, fmt.Errorf("%w: read-index request with a body", errWire)
		}
		idx, err := n.readIndexLocal(ctx)
		return encodeReadIndexReply(idx, wireSafe(err)), nil
	case kindMembership:
		return n.handleMembership(ctx, req[2:])
	case kindAdmin:
		return n.handleAdmin(ctx, req[2:]) // admin_rpc.go
	case kindGrantNotice:
		grants, err := decodeGrantNotice(req)
		if err != nil {
			return nil, err
		}
		n.events.dispatchEarly(grants)
		return encodeGrantNoticeReply(), nil
	case kindCommitNudge:
		if _, err := decodeNudgeRequest(req); err != nil {
			return nil, err
		}
		if n.started.Load() && n.raft.State() == raft.Leader {
			n.nudges.nudged()
		}
		return encodeNudgeReply(), nil
	case kindSnapshotAsk:
		index, err := decodeSnapshotAsk(req)
		if err != nil {
			return nil, err
		}
		if n.started.Load() && n.raft.State() == raft.Leader {
			n.snapAsks.asked(index) // snapshot_ask.go
		}
		return encodeSnapshotAskReply(), nil
	case kindConfirmTerm:
		return n.answerConfirmTerm(req) // confirm_term.go
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
	origin := originUnknown
	if peer, ok := transport.PeerFromContext(ctx); ok {
		origin = originOf(peer.Identity.NodeID, peer.Identity.Incarnation)
	}
	from := n.requester(ctx)
	ps := make([]*proposal, len(cmds))
	var group []*proposal
	for i, c := range cmds {
		if err := checkClientCommand(c); err != nil {
			outs[i].err = err
			continue
		}
		ps[i] = newProposal(ctx, c)
		ps[i].origin, ps[i].from = origin, from
		group = append(group, ps[i])
	}
	// The handler commits the batch itself when the proposer is idle (it
	// has nobody to return to early: the follower's call waits for the
	// reply either way).
	n.proposer.runInline(group, nil)
	for i, p := range ps {
		if p != nil {
			outs[i] = p.wait()
			outs[i].err = wireSafe(outs[i].err)
		}
	}
	return outs
}

// callLeader sends one request to the current leader.
func (n *Node) callLeader(ctx context.Context, req []byte) ([]byte, error) {
	addr, id := n.raft.LeaderWithID()
	switch {
	case addr == "":
		return nil, errNoLeader
	case string(id) == n.id.raftID:
		return nil, errNotLeader // we became leader: retry locally
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.AttemptTimeout)
	defer cancel()
	reply, err := n.trans.Call(ctx, string(addr), req)
	n.metrics.forwards.WithLabelValues(outcomeLabel(err)).Inc()
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", errForward, id, err)
	}
	return reply, nil
}
