package fsmwire

import "fmt"

// Status is the outcome of one command.
type Status uint8

// Command outcomes.
const (
	// StatusOK: the command took effect (sessions, release, tick).
	StatusOK Status = iota + 1
	// StatusGranted: the acquisition holds the lock; Result.Token is its fencing token.
	StatusGranted
	// StatusQueued: the acquisition waits in the lock's FIFO queue at Result.Position.
	StatusQueued
	// StatusLocked: the lock is held (Result.Holder) or in lock-delay
	// (Result.DelayUntil) and the caller did not ask to wait.
	StatusLocked
	// StatusNotHolder: the owner neither holds nor waits for the lock.
	StatusNotHolder
	// StatusNoSession: the session does not exist (any more).
	StatusNoSession
	// StatusInvalid: the command's arguments are invalid (Result.Reason says why).
	StatusInvalid
	// StatusStale: the request number is below its session's ack floor (the
	// client already acknowledged it): a delayed duplicate, not applied.
	StatusStale
	// StatusQuota: a replicated quota refused the command (Result.Quota says
	// which, Result.Reason the figures); nothing changed.
	StatusQuota
	// StatusConflict (cluster version 3): the name is in use as another
	// kind (a lock asked for as a semaphore, or the reverse) or as a
	// semaphore of another limit (Result.Count is its limit, Reason says).
	StatusConflict
	MaxStatus = StatusConflict
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusGranted:
		return "granted"
	case StatusQueued:
		return "queued"
	case StatusLocked:
		return "locked"
	case StatusNotHolder:
		return "not-holder"
	case StatusNoSession:
		return "no-session"
	case StatusInvalid:
		return "invalid"
	case StatusStale:
		return "stale"
	case StatusQuota:
		return "quota"
	case StatusConflict:
		return "conflict"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// EventKind says what happened.
type EventKind uint8

// Event kinds.
const (
	EventSessionOpened  EventKind = iota + 1 // Session
	EventSessionClosed                       // Session (voluntary close)
	EventSessionExpired                      // Session (lease ran out)
	EventGranted                             // Lock, Session, Owner, Token
	EventQueued                              // Lock, Session, Owner
	EventReleased                            // Lock, Session, Owner, Token, Reason; DelayUntil (and from cluster version 2 DelayFor, DelayToken) if lock-delay began
	EventDequeued                            // Lock, Session, Owner, Reason
	EventClusterChanged                      // the cluster id or the cluster version changed (read them from the FSM)
	EventValueSet                            // Lock, Session, Owner, Token, Value (and Shared, Permits): SetValue replaced a grant's value
	EventTokensRaised                        // Token: RaiseTokens raised the grant counter to Token (the next grant takes Token+1); only when it rose
	EventRestored                            // Token: a backup replaced the whole state at Index (RestoreCommit, cluster version 4): every watcher must re-read what it waits for; Token is the restored grant counter
	EventMarker                              // Index: a takeover marker was applied (Takeover, cluster version 4; see Renewed)
)

func (k EventKind) String() string {
	switch k {
	case EventSessionOpened:
		return "session-opened"
	case EventSessionClosed:
		return "session-closed"
	case EventSessionExpired:
		return "session-expired"
	case EventGranted:
		return "granted"
	case EventQueued:
		return "queued"
	case EventReleased:
		return "released"
	case EventDequeued:
		return "dequeued"
	case EventClusterChanged:
		return "cluster-changed"
	case EventValueSet:
		return "value-set"
	case EventTokensRaised:
		return "tokens-raised"
	case EventRestored:
		return "restored"
	case EventMarker:
		return "marker"
	}
	return "unknown"
}

// Reason says why a lock was released or a waiter dequeued.
type Reason uint8

// Reasons.
const (
	ReasonOwner          Reason = iota + 1 // the owner released it (Release command)
	ReasonSessionClosed                    // its session was closed
	ReasonSessionExpired                   // its session expired
	ReasonRevoked        Reason = 40       // an operator revoked the grant (fsm.Revoke)
)

func (r Reason) String() string {
	switch r {
	case ReasonOwner:
		return "owner"
	case ReasonSessionClosed:
		return "session-closed"
	case ReasonSessionExpired:
		return "session-expired"
	case ReasonRevoked:
		return "revoked"
	}
	return "none"
}

// Quota names the quota that refused a command (Result.Quota).
type Quota uint8

// Quotas.
const (
	QuotaLockName     Quota = iota + 1 // Limits.MaxLockNameLen
	QuotaWaiters                       // Limits.MaxWaitersPerLock
	QuotaSessionLocks                  // Limits.MaxLocksPerSession
	QuotaSessions                      // Limits.MaxSessions
	QuotaRequests                      // Limits.RequestWindow

	// Cluster version 4 (fsm's fair shares, fsm.Limits.NodeShares). The quotas of a node, and of a
	// session in a lock's queue, are shares: a refusal by one wraps
	// ErrFairShare as well — the client's node (or session) used its
	// share, while others still can.
	QuotaLocks          // Limits.MaxLocks
	QuotaStateBytes     // Limits.MaxStateBytes
	QuotaNodeSessions   // a node's share of Limits.MaxSessions
	QuotaNodeLocks      // a node's share of Limits.MaxLocks
	QuotaNodeBytes      // a node's share of Limits.MaxStateBytes
	QuotaNodeWaiters    // a node's share of a lock's Limits.MaxWaitersPerLock
	QuotaSessionWaiters // Limits.MaxSessionWaitersPerLock
	MaxQuota            = QuotaSessionWaiters
)

// Quotas lists every quota kind (metrics initialise a series per kind).
func Quotas() []Quota {
	return []Quota{QuotaLockName, QuotaWaiters, QuotaSessionLocks, QuotaSessions, QuotaRequests,
		QuotaLocks, QuotaStateBytes, QuotaNodeSessions, QuotaNodeLocks, QuotaNodeBytes, QuotaNodeWaiters, QuotaSessionWaiters}
}

// Share reports whether q is a fair share (ErrFairShare).
func (q Quota) Share() bool {
	switch q {
	case QuotaNodeSessions, QuotaNodeLocks, QuotaNodeBytes, QuotaNodeWaiters, QuotaSessionWaiters:
		return true
	}
	return false
}

func (q Quota) String() string {
	switch q {
	case QuotaLockName:
		return "lock_name_length"
	case QuotaWaiters:
		return "waiters_per_lock"
	case QuotaSessionLocks:
		return "locks_per_session"
	case QuotaSessions:
		return "sessions"
	case QuotaRequests:
		return "requests_in_flight"
	case QuotaLocks:
		return "locks"
	case QuotaStateBytes:
		return "state_bytes"
	case QuotaNodeSessions:
		return "node_sessions"
	case QuotaNodeLocks:
		return "node_locks"
	case QuotaNodeBytes:
		return "node_state_bytes"
	case QuotaNodeWaiters:
		return "node_waiters_per_lock"
	case QuotaSessionWaiters:
		return "session_waiters_per_lock"
	}
	return fmt.Sprintf("Quota(%d)", uint8(q))
}
