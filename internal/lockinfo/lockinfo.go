// Package lockinfo holds the values the lock state machine (package fsm)
// reports about sessions, locks, their holders and waiters — what node's
// local reads return and what lockapi and admin convert for their users.
// It imports nothing of raftlock.
package lockinfo

import (
	"encoding/hex"
	"time"
)

// SessionID identifies a session. IDs come from a counter in the replicated
// state: they start at 1, are unique and are never reused. The zero value means
// "no session".
type SessionID uint64

// Token is a fencing token: the value of the state machine's grant counter at
// the moment a lock was granted. Every grant of any lock increments it, so
// tokens strictly increase per lock and globally. The zero value is never
// granted. It is an alias of uint64 so that a token passes to a resource
// fence (package fence, which takes uint64 and imports nothing of
// raftlock) without a conversion.
type Token = uint64

// OwnerID identifies one acquisition of one lock. Callers choose it at random
// (128 bits) for every Lock call; retries of the same acquisition reuse it,
// which makes acquire and release idempotent. The zero value is invalid.
type OwnerID [16]byte

// String returns the owner id in hexadecimal.
func (o OwnerID) String() string { return hex.EncodeToString(o[:]) }

// IsZero reports whether o is the zero (invalid) owner id.
func (o OwnerID) IsZero() bool { return o == OwnerID{} }

// Holder describes one grant: the exclusive holder of a lock, one of its
// readers (Shared), or a holder of a semaphore's permits (Permits > 0).
type Holder struct {
	Session     SessionID
	Owner       OwnerID
	Token       Token
	AcquiredAt  int64  // leader time of the grant, Unix nanoseconds
	AcquiredIdx uint64 // log index of the grant
	Description string // the holder session's owner description
	Shared      bool   // a read grant of a lock (cluster version 3)
	Permits     int    // a semaphore's permits held by the grant; 0 for locks
	Value       string // the value attached to the grant (fsm.Acquire.Value, fsm.SetValue)
}

// Waiter describes one entry of a lock's FIFO wait queue.
type Waiter struct {
	Session    SessionID
	Owner      OwnerID
	EnqueuedAt int64  // leader time of the enqueue, Unix nanoseconds
	EnqueuedIx uint64 // log index of the enqueue
	Shared     bool   // waits for a read grant
	Permits    int    // waits for this many of a semaphore's permits; 0 for locks
	Value      string // the value the grant will carry
}

// SessionInfo describes a live session.
type SessionInfo struct {
	ID          SessionID
	TTL         time.Duration
	LockDelay   time.Duration
	Description string
	CreatedAt   int64  // leader time, Unix nanoseconds
	CreatedIdx  uint64 // log index of the OpenSession command
	Locks       int    // number of locks it holds or waits for (counting each owner)
	Node        string // the node it was opened through (fsm.OpenSession.Node; "" before cluster version 4)
	Reserved    bool   // opened in its node's reserve (fsm.OpenSession.Reserved)
}

// LockInfo describes one lock or semaphore: its exclusive holder (if any),
// its first shared grants, its first waiters in FIFO order and its
// lock-delay. How many of the shared grants and waiters it lists depends on
// the read (fsm.FSM.Lock: up to 1,000 of each; fsm.FSM.Locks: up to 8); WaiterCount
// and SharedCount are the totals, and fsm.FSM.Waiters and fsm.FSM.SharedGrants page
// through all of them.
type LockInfo struct {
	Name   string
	Held   bool   // an exclusive holder (never for a semaphore)
	Holder Holder // the exclusive holder, when Held
	// Shared are the first shared grants in grant (token) order: the
	// readers of a lock, or the holders of a semaphore's permits.
	Shared      []Holder
	SharedCount int // shared grants in all
	// Limit is a semaphore's number of permits (0: a lock); Used the
	// permits its holders hold.
	Limit       int
	Used        int
	Waiters     []Waiter // the first waiters, in FIFO order
	WaiterCount int      // waiters in all
	// Delayed is set while the lock is in lock-delay. DelayUntil is the
	// leader time at which the delay ends (at cluster version 1 that
	// decides; from version 2 it is informational: the leader ends the
	// delay DelayFor after it applied the expiry, or after its takeover).
	Delayed    bool
	DelayUntil int64         // Unix nanoseconds, leader time
	DelayFor   time.Duration // cluster version 2
	DelayToken Token         // cluster version 2: names the delay in EndDelay
}
