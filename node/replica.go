package node

import (
	"context"
	"log/slog"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
)

// What lockapi and admin call on a node is no method of Node's: they reach
// it through replica.Of(n), which returns n as a nodeReplica — the same
// pointer under another type, so the conversion costs nothing and the calls
// allocate nothing more than Node's own methods.
func init() {
	replica.Register(func(v any) replica.Server {
		if n, ok := v.(*Node); ok && n != nil {
			return (*nodeReplica)(n)
		}
		return nil
	})
}

// nodeReplica is a Node as a replica.Server.
type nodeReplica Node

var _ replica.Server = (*nodeReplica)(nil)

func (r *nodeReplica) node() *Node { return (*Node)(r) }

func (r *nodeReplica) ID() string           { return r.node().ID() }
func (r *nodeReplica) Logger() *slog.Logger { return r.node().logger() }
func (r *nodeReplica) Timeouts() (heartbeat, election time.Duration) {
	t := r.node().Timing()
	return t.HeartbeatTimeout, t.ElectionTimeout
}

func (r *nodeReplica) Propose(ctx context.Context, cmd fsm.Command) (fsm.Result, uint64, error) {
	return r.node().propose(ctx, cmd)
}

func (r *nodeReplica) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	return r.node().apply(ctx, cmd)
}

func (r *nodeReplica) WaitApplied(ctx context.Context, index uint64) error {
	return r.node().waitApplied(ctx, index)
}

func (r *nodeReplica) AppliedIndex() uint64 { return r.node().appliedIndex() }

func (r *nodeReplica) KeepAlive(ctx context.Context, id lockinfo.SessionID) error {
	return r.node().keepAlive(ctx, id)
}

func (r *nodeReplica) Subscribe(f replica.EventFilter, buf int) (*replica.Subscription, error) {
	return r.node().subscribe(f, buf)
}

func (r *nodeReplica) Holder(name string) (lockinfo.Holder, bool) { return r.node().Holder(name) }
func (r *nodeReplica) Lock(name string) (lockinfo.LockInfo, bool) { return r.node().Lock(name) }
func (r *nodeReplica) LockAt(name string) (lockinfo.LockInfo, uint64, bool) {
	return r.node().lockAt(name)
}

func (r *nodeReplica) Owner(name string, owner lockinfo.OwnerID) fsm.OwnerState {
	return r.node().owner(name, owner)
}

func (r *nodeReplica) Session(id lockinfo.SessionID) (lockinfo.SessionInfo, bool) {
	return r.node().Session(id)
}

func (r *nodeReplica) SessionAcquisitions(id lockinfo.SessionID) []fsm.Acquisition {
	return r.node().sessionAcquisitions(id)
}

func (r *nodeReplica) Sync(ctx context.Context) error { return r.node().Sync(ctx) }

func (r *nodeReplica) Digest() (uint64, [32]byte) { return r.node().digest() }

func (r *nodeReplica) LeasesLeft(ctx context.Context, ids []lockinfo.SessionID) (map[lockinfo.SessionID]time.Duration, error) {
	return r.node().leasesLeft(ctx, ids)
}
