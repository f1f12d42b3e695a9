package fsmwire

import "errors"

// Sentinel errors of decoding, validation and results (fsm.Result.Err maps
// statuses to them). Test with errors.Is.
var (
	// ErrInvalidEntry: an entry or snapshot could not be decoded (garbage,
	// unknown version or command type, truncated, oversized). Nothing changed.
	ErrInvalidEntry = errors.New("fsm: invalid entry")
	// ErrUnsupportedVersion: an entry, command or snapshot of a version this
	// binary does not know (wrapped together with ErrInvalidEntry or
	// ErrInvalidSnapshot). Applying one halts the state machine
	// (fsm.ErrHalted).
	ErrUnsupportedVersion = errors.New("fsm: unsupported version")
	// ErrInvalidCommand: a well-formed command with invalid arguments (empty
	// lock name, TTL out of range, zero owner id, ...). Nothing changed.
	ErrInvalidCommand = errors.New("fsm: invalid command")
	// ErrInvalidSnapshot: a snapshot could not be restored. State unchanged.
	ErrInvalidSnapshot = errors.New("fsm: invalid snapshot")
	// ErrLocked: the lock is held by someone else (or in lock-delay) and the
	// caller did not ask to wait.
	ErrLocked = errors.New("fsm: lock is held")
	// ErrNotHolder: the owner neither holds nor waits for the lock.
	ErrNotHolder = errors.New("fsm: not the holder")
	// ErrNoSession: the session does not exist (never opened, closed or expired).
	ErrNoSession = errors.New("fsm: no such session")
	// ErrStale: the request's number is below its session's ack floor: the
	// client already acknowledged it, so this is a delayed duplicate. It
	// was not applied.
	ErrStale = errors.New("fsm: stale request")
	// ErrQuota: a replicated quota refused the command (see fsm.Limits).
	// Nothing changed.
	ErrQuota = errors.New("fsm: quota exceeded")
	// ErrFairShare: the quota that refused the command is a fair share
	// (Quota.String says whose: a node's share of the sessions, locks,
	// bytes or a lock's queue, or a session's share of a lock's queue;
	// see fsm.Limits.NodeShares): the client's node or session used its
	// share, while others still can. Always wrapped with ErrQuota.
	ErrFairShare = errors.New("fsm: fair share used up")
	// ErrConflict: the name is in use as another kind (lock or semaphore)
	// or as a semaphore of another limit. Nothing changed.
	ErrConflict = errors.New("fsm: name in use as another kind or limit")
)
