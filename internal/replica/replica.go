// Package replica is the boundary between lockapi (and admin) and the
// replica they run on: Replica is everything lockapi needs from one —
// commit a command, wait for the local state to reach an index, renew a
// session, follow the events the state machine applies, the local reads of
// lock and session state it decides on, its Raft timeouts and its logger —
// so that none of it is an exported method of node.Node. A *node.Node is a
// Replica through an unexported adapter: lockapi obtains it with Of(n),
// which calls the hook that package node registers in its init function
// (Register). Nothing an application calls names this package.
//
// A client replica (a process that holds sessions and locks without a copy
// of the log, issue 52) implements Replica too, and only Replica:
//
//   - ID, Logger, Timeouts: who it is, where it logs, the Raft timeouts of
//     its cluster (the minimum session TTL and the patience before a
//     failure is reported as no quorum follow from them);
//   - Propose, Apply, WaitApplied, AppliedIndex: commit an fsm.Command on
//     the cluster's leader and get its fsm.Result and log index, then wait
//     until the replica's own view has applied that index;
//   - KeepAlive: renew a session's lease on the leader;
//   - Subscribe: the events the replica's view applies (by owner, session or
//     lock), with the early grants the leader announces;
//   - Holder, Lock, LockAt, Owner, Session, SessionAcquisitions, Sync: the
//     reads of its view that lockapi decides on, and the read barrier.
//
// Server adds what only a full replica (one with the log and the state
// machine) answers — the state's digest and the leader's lease timers — for
// admin, the chaos harness and tests; ServerOf returns it.
package replica

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// ErrSessionExpired is KeepAlive's refusal: the session does not exist any
// more on the leader, or its lease ran out before the keepalive reached the
// leader. lockapi publishes it as lockapi.ErrSessionExpired.
var ErrSessionExpired = errors.New("node: session expired")

// Replica is what lockapi calls on the replica its sessions run on. Errors
// wrap ErrSessionExpired and node's sentinels (ErrNoQuorum, ErrNotProposed,
// ErrClosed, ErrHalted, ErrInvalidArgument) and, when a context ended, its
// error.
type Replica interface {
	// ID returns the replica's node id.
	ID() string
	// Logger returns the replica's logger.
	Logger() *slog.Logger
	// Timeouts returns the Raft heartbeat and election timeouts of the
	// replica's configuration.
	Timeouts() (heartbeat, election time.Duration)

	// Propose commits cmd and returns its result and log index as soon as
	// the leader has committed and applied it; the replica's own view may
	// not show it yet (WaitApplied). Retried until ctx ends while there is
	// no leader; an error wrapping ErrNotProposed means the command can
	// never commit.
	Propose(ctx context.Context, cmd fsm.Command) (fsm.Result, uint64, error)
	// Apply is Propose followed by WaitApplied of its index.
	Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error)
	// WaitApplied returns once the replica's view has applied index, or
	// when ctx ends.
	WaitApplied(ctx context.Context, index uint64) error
	// AppliedIndex returns the index of the last entry the view applied.
	AppliedIndex() uint64
	// KeepAlive renews a session's lease on the leader: nil once the leader
	// moved its deadline; ErrSessionExpired if the session is gone there.
	KeepAlive(ctx context.Context, id lockinfo.SessionID) error
	// Subscribe returns a subscription to the applied events that match f,
	// with a buffer of buf events (at least 1).
	Subscribe(f EventFilter, buf int) (*Subscription, error)

	// Holder returns the exclusive holder of a lock, if any.
	Holder(name string) (lockinfo.Holder, bool)
	// Lock returns a lock's state, and false if nobody holds or waits.
	Lock(name string) (lockinfo.LockInfo, bool)
	// LockAt is Lock with the applied index it was read at.
	LockAt(name string) (lockinfo.LockInfo, uint64, bool)
	// Owner returns where the acquisition (name, owner) stands.
	Owner(name string, owner lockinfo.OwnerID) fsm.OwnerState
	// Session returns a live session, and false if it does not exist.
	Session(id lockinfo.SessionID) (lockinfo.SessionInfo, bool)
	// SessionAcquisitions returns every acquisition of a session, held or
	// waiting, in lock-name order.
	SessionAcquisitions(id lockinfo.SessionID) []fsm.Acquisition
	// Sync waits until the view reflects every command committed before
	// the call (a linearizable read barrier).
	Sync(ctx context.Context) error
}

// Server is a Replica that holds the log and the state machine (a node).
type Server interface {
	Replica
	// Digest returns the applied index and a hash of the state: replicas
	// at the same applied index have the same digest.
	Digest() (uint64, [32]byte)
	// LeasesLeft returns, for each of the sessions given (at most 1024)
	// that the leader times, how long it still lets the session live
	// without a keepalive.
	LeasesLeft(ctx context.Context, ids []lockinfo.SessionID) (map[lockinfo.SessionID]time.Duration, error)
}

// hook is the function node registered: it returns the Server of a
// *node.Node, and nil for anything else.
var hook atomic.Pointer[func(any) Server]

// Register sets the function that turns a replica value (a *node.Node)
// into its Server. Package node calls it from its init function.
func Register(of func(any) Server) { hook.Store(&of) }

// Of returns the Replica of n (a *node.Node), or nil if n is nil or not a
// replica.
func Of(n any) Replica {
	if s := ServerOf(n); s != nil {
		return s
	}
	return nil
}

// ServerOf returns the Server of n (a *node.Node), or nil if n is nil or
// not a full replica.
func ServerOf(n any) Server {
	if of := hook.Load(); of != nil {
		return (*of)(n)
	}
	return nil
}
