package node

import "errors"

// Sentinel errors. Test with errors.Is: returned errors wrap them with detail
// (and, when a context ended, the context's error too).
var (
	// ErrNoQuorum: the cluster could not commit or confirm leadership in time
	// (no leader, or the leader cannot reach a quorum). Nothing was granted or
	// renewed by this call — or, for an ambiguous failure, the call is safe to
	// retry with the same owner id.
	ErrNoQuorum = errors.New("node: no quorum")
	// ErrClosed: the node is shut down (or shutting down).
	ErrClosed = errors.New("node: closed")
	// ErrInvalidArgument: a command or argument was refused before it was
	// proposed; nothing changed.
	ErrInvalidArgument = errors.New("node: invalid argument")
	// ErrInvalidConfig: Config.Validate found a problem.
	ErrInvalidConfig = errors.New("node: invalid config")
	// ErrNotProposed: the command never left this node — it was not
	// appended to the log of any leader — so it can never commit: the
	// caller may forget it at once. Wrapped together with ErrNoQuorum when
	// the reason was that the cluster could not take it in time.
	ErrNotProposed = errors.New("node: not proposed")
	// ErrHalted: this node's state machine met a log entry or snapshot of a
	// version this binary does not know and stopped applying; the node
	// serves nothing (Status.Halted says why) until it is restarted with a
	// binary that knows the version.
	ErrHalted = errors.New("node: state machine halted")

	// ErrDecommissioned: Start was given a data dir whose node left its
	// cluster for good (Leave removed it from the Raft configuration).
	// Nothing was started. To bring the node back, start it with an empty
	// data dir: it joins as a new member (a new incarnation of its id). Only
	// Recover (disaster recovery, when this data dir is the last copy of
	// the cluster's state) starts on it anyway.
	ErrDecommissioned = errors.New("node: the data dir left its cluster")

	// errNotLeader: this node is not the leader (internal, retried).
	errNotLeader = errors.New("node: not the leader")
	// errNoLeader: no leader is known (internal, retried).
	errNoLeader = errors.New("node: no leader known")
)
