package fsm

import "time"

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

// Event is something an applied command did. Events are produced in apply
// order, identical on every replica.
type Event struct {
	Kind       EventKind
	Index      uint64 // log index of the entry
	At         int64  // the entry's effective leader time (Unix nanoseconds)
	Session    SessionID
	Lock       string
	Owner      OwnerID
	Token      Token
	Reason     Reason
	DelayUntil int64
	// DelayFor and DelayToken (cluster version 2, EventReleased into
	// lock-delay): how long the delay lasts, and the token that names it
	// in the EndDelay that will end it.
	DelayFor   time.Duration
	DelayToken Token
	// FromQueue is set on EventGranted when the lock went to a waiter (a
	// hand-off by a release, an expiry or the end of a lock-delay) rather
	// than to the Acquire of the same command.
	FromQueue bool
	// Shared (a read grant of a lock), Permits (a grant of a semaphore's
	// permits) and Value (the grant's value) describe the acquisition of
	// EventGranted, EventQueued (Shared, Permits), EventReleased (Shared,
	// Permits) and EventValueSet. Cluster version 3.
	Shared  bool
	Permits int
	Value   string
}

// Observer receives what the state machine does. Both methods are called on
// the Raft apply goroutine after the state has been updated and the FSM's
// lock released, so they may call the FSM's read accessors. They must not
// block: a slow observer stalls the whole replica. The events slice is only
// valid during the call.
type Observer interface {
	// Applied is called once per applied log entry (also when it produced no
	// events, and for entries that were rejected), with its index.
	Applied(index uint64, events []Event)
	// Restored is called after a snapshot replaced the whole state: every
	// watcher must re-read what it waits for.
	Restored(index uint64)
}

// HaltObserver is an Observer that also wants to know when the state
// machine halts (see ErrHalted). Halted is called once, on the Raft apply
// goroutine, with the index of the entry that could not be applied (0 for
// a snapshot) and the error that Halted returns from then on. Nothing is
// applied, and Applied is not called, after it.
type HaltObserver interface {
	Observer
	Halted(index uint64, err error)
}

// RefusalObserver is an Observer that also wants to know when Restore
// refused a snapshot older than the applied state (ErrOlderSnapshot).
// RestoreRefused is called on the Raft apply goroutine, after the refusal,
// with the snapshot's index and the applied index; it must not block.
type RefusalObserver interface {
	Observer
	RestoreRefused(snapshotIndex, applied uint64)
}
