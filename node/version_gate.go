package node

import (
	"context"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
)

// versionGate refuses, before anything is sent, a client command that the
// cluster version cannot carry (a command of version 3 while the cluster
// is at 2). A leader of the previous release could not even decode it, so
// a follower must not forward it — but a follower may only be behind the
// leader's raise: below the version it needs, it first catches up with the
// leader's commit index (Sync, bounded by AttemptTimeout) and judges again.
// Nil when the command may be proposed.
func (n *Node) versionGate(ctx context.Context, cmd fsm.Command) error {
	if versionRefusal(cmd, n.fsm.ClusterVersion()) == nil {
		return nil
	}
	if n.raft.State() != raft.Leader {
		sctx, cancel := context.WithTimeout(ctx, n.cfg.AttemptTimeout)
		_ = n.Sync(sctx) // on failure the local version decides
		cancel()
	}
	return versionRefusal(cmd, n.fsm.ClusterVersion())
}
