package node

import (
	"context"
	"errors"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
)

// Tokens across a rebuilt cluster (see fsm.RaiseTokens). A fence
// keeps the highest token it accepted per resource; a cluster rebuilt from
// empty data dirs, restored from an older backup or recovered from a lost
// quorum would start its grant counter below it, and the fence would
// refuse every write. So every leader, once its takeover is done and the
// cluster version is 3, proposes fsm.RaiseTokens: the counter rises to at
// least the leader's wall-clock time in microseconds as stamped in that
// entry (deterministic: the stamp is in the log). Doing it at every
// takeover covers bootstrap, restore and recovery without telling them
// apart; on a cluster that kept its state it only moves the counter
// forward.
//
// The bound: the new counter is above every token of the old cluster if
// the old one granted on average fewer than 1,000,000 tokens a second
// since its own last raise, and the new leader's clock is not behind the
// old cluster's last grant by more than the slack that rate leaves. A
// leader whose clock is far ahead moves the counter far ahead — harmless:
// tokens only need to increase, and a uint64 of microseconds lasts.

// raiseTokens proposes RaiseTokens (from cluster version 3) until it is
// committed, and reports whether it was; false below version 3 or when
// ctx ends first.
func (n *Node) raiseTokens(ctx context.Context) bool {
	for n.fsm.ClusterVersion() >= 3 {
		out := n.proposeAsLeader(ctx, fsm.RaiseTokens{})
		if out.err == nil && out.result().Status == fsmwire.StatusOK {
			n.log.Debug("token counter raised to the leader's time", "token", uint64(out.result().Token), "index", out.index)
			return true
		}
		if errors.Is(out.err, errNotLeader) {
			// Leadership moved on: the next leader raises it at its takeover.
			n.log.Debug("token counter not raised: no longer the leader")
			return false
		}
		n.log.Warn("raising the token counter failed; will retry", "err", out.err, "status", out.result().Status)
		if sleepCtx(ctx, n.cfg.Timing.HeartbeatTimeout) != nil {
			return false
		}
	}
	return false
}
