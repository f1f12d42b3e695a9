package node

import (
	"context"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/transport"
)

// Who a session belongs to, for the state machine's fair shares (see
// fsm.Limits' NodeShares): the leader stamps every OpenSession it commits with
// the node the request came from — this node for its own callers, the
// forwarding peer for a forwarded request — replacing whatever the client
// put in OpenSession.Node, so that an application cannot charge its
// sessions to another node.

// requester returns the node a forwarded request came from: the node id
// the connection's hello named; with TLS, "?" before it when the peer's
// certificate does not name that node (a claim without proof gets a share
// of its own, not the named node's); "?" when the peer named no node (a
// peer of the previous release).
func (n *Node) requester(ctx context.Context) string {
	p, ok := transport.PeerFromContext(ctx)
	switch {
	case !ok || p.Identity.NodeID == "":
		return "?"
	case n.cfg.TLS != nil && (len(p.Certificates) == 0 || !certNames(p.Certificates[0], p.Identity.NodeID)):
		return "?" + p.Identity.NodeID
	}
	return p.Identity.NodeID
}

// stamp returns cmd as the leader commits it at cluster version v: an
// OpenSession carries the node it came from (from; "" for this node) once
// the cluster version carries it.
func (n *Node) stamp(cmd fsm.Command, from string, v uint64) fsm.Command {
	o, ok := cmd.(fsm.OpenSession)
	if !ok {
		return cmd
	}
	if from == "" {
		from = n.ident().NodeID
	}
	o.Node = from
	if fsm.NeedsVersion(o) > v {
		return cmd
	}
	return o
}
