package node

import (
	"context"
	"fmt"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
)

// Cluster version (see fsm's version.go). The cluster version lives in the
// log: the leader raises it (fsm.SetClusterVersion) once every server of
// the Raft configuration — voters and non-voters — reports, through the
// peer-info RPC, that its binary supports it. Until then the leader writes
// only what the lowest version reads (fsm.Downgrade: no request numbers,
// lock-delays on the version-1 rules), a follower forwards in that format
// too, and commands that need the new version are refused. So during a
// rolling upgrade from the previous release exactly-once, the monotonic
// lock-delay and the quotas are off; they switch on, for the whole
// cluster at one log index, once the last old server is replaced.
//
// Once raised, the version never goes back: a server of an older release
// must not be added to the configuration afterwards (it could not apply
// the log; a new binary halts on what it does not know instead of
// diverging).

// versionCheckInterval is how often a leader whose cluster version is below
// what it supports asks the servers again.
const versionCheckInterval = 2 * time.Second

// maxVersion is the highest cluster version this node supports.
func (n *Node) maxVersion() uint64 {
	if f := n.cfg.hooks.MaxClusterVersion; f != nil {
		if v := f(); v != 0 {
			return min(v, fsm.MaxClusterVersion)
		}
	}
	return fsm.MaxClusterVersion
}

// raiseClusterVersion (leader, after its takeover) raises the cluster
// version as far as every server (this one included) supports, asking again
// every versionCheckInterval until the version is the highest this binary
// knows; it returns then, or when ctx ends. It runs duties at once and
// after every raise, so that what the version in force allows does not
// wait for a version some server does not support yet.
func (n *Node) raiseClusterVersion(ctx context.Context, duties func()) {
	duties()
	for {
		cur := n.fsm.ClusterVersion()
		if cur >= fsm.MaxClusterVersion {
			return
		}
		target, err := n.supportedVersion(ctx)
		switch {
		case err != nil:
			n.log.Debug("cannot raise the cluster version yet", "version", cur, "err", err)
		case target > cur:
			out := n.proposeAsLeader(ctx, fsm.SetClusterVersion{Version: target})
			if out.err == nil && out.result().Status == fsmwire.StatusOK {
				n.log.Info("cluster version raised", "from", cur, "to", target, "index", out.index)
				duties()
				continue
			}
			n.log.Warn("raising the cluster version failed; will retry", "to", target, "err", out.err, "status", out.result().Status)
		default:
			n.log.Debug("a server does not support a higher cluster version yet", "version", cur)
		}
		if sleepCtx(ctx, versionCheckInterval) != nil {
			return
		}
	}
}

// supportedVersion returns the highest cluster version every server of the
// configuration supports (asking each other server for its peer info).
func (n *Node) supportedVersion(ctx context.Context) (uint64, error) {
	others, ok := n.others()
	if !ok {
		return 0, ErrClosed
	}
	v := n.maxVersion()
	for _, s := range others {
		cctx, cancel := context.WithTimeout(ctx, n.cfg.AttemptTimeout)
		info, err := n.peerInfo(cctx, string(s.Address))
		cancel()
		if err != nil {
			return 0, fmt.Errorf("server %s: %w", s.ID, err)
		}
		v = min(v, info.MaxVersion)
	}
	return v, nil
}

// syncLimits (leader) proposes its configured quotas when they differ from
// the state machine's (from cluster version 2 on), as far as the cluster
// version carries them (fsm.Downgrade: the limits of version 4 wait for
// version 4); it retries until they are committed or ctx ends.
func (n *Node) syncLimits(ctx context.Context) {
	for {
		v := n.fsm.ClusterVersion()
		want := fsm.Downgrade(fsm.SetLimits{Limits: n.cfg.Limits}, v).(fsm.SetLimits)
		if v < 2 || n.fsm.Limits() == want.Limits {
			return
		}
		out := n.proposeAsLeader(ctx, want)
		if out.err == nil && out.result().Status == fsmwire.StatusOK {
			n.log.Info("quotas set", "limits", fmt.Sprintf("%+v", want.Limits), "index", out.index)
			return
		}
		n.log.Warn("proposing the quotas failed; will retry", "err", out.err, "status", out.result().Status)
		if sleepCtx(ctx, n.cfg.Timing.HeartbeatTimeout) != nil {
			return
		}
	}
}

// clusterDuties runs the leader's version, cluster id, quota and token
// upkeep after its takeover, until ctx ends: the cluster id and the quotas
// from cluster version 2, the token floor (once per leadership, see
// raiseTokens) from version 3.
func (n *Node) clusterDuties(ctx context.Context) {
	raised := false
	n.raiseClusterVersion(ctx, func() {
		if !raised { // first: the grants before it may carry low tokens
			raised = n.raiseTokens(ctx)
		}
		n.initCluster(ctx)
		n.syncLimits(ctx)
	})
}
