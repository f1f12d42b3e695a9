package fsm

import (
	"time"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Event is something an applied command did. Events are produced in apply
// order, identical on every replica.
type Event struct {
	Kind       fsmwire.EventKind
	Index      uint64 // log index of the entry
	At         int64  // the entry's effective leader time (Unix nanoseconds)
	Session    lockinfo.SessionID
	Lock       string
	Owner      lockinfo.OwnerID
	Token      lockinfo.Token
	Reason     fsmwire.Reason
	DelayUntil int64
	// DelayFor and DelayToken (cluster version 2, EventReleased into
	// lock-delay): how long the delay lasts, and the token that names it
	// in the EndDelay that will end it.
	DelayFor   time.Duration
	DelayToken lockinfo.Token
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

// Observer receives what the state machine does. It may also have the
// methods of haltObserver (Halted: told when the state machine halts) and
// refusalObserver (RestoreRefused: told when Restore refused an older
// snapshot), which the state machine calls when present.
//
// Both methods of Observer are called on the Raft apply goroutine after the state has been updated and the FSM's
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

// haltObserver is an Observer that also wants to know when the state
// machine halts (see ErrHalted). Halted is called once, on the Raft apply
// goroutine, with the index of the entry that could not be applied (0 for
// a snapshot) and the error that Halted returns from then on. Nothing is
// applied, and Applied is not called, after it.
type haltObserver interface {
	Observer
	Halted(index uint64, err error)
}

// refusalObserver is an Observer that also wants to know when Restore
// refused a snapshot older than the applied state (ErrOlderSnapshot).
// RestoreRefused is called on the Raft apply goroutine, after the refusal,
// with the snapshot's index and the applied index; it must not block.
type refusalObserver interface {
	Observer
	RestoreRefused(snapshotIndex, applied uint64)
}
