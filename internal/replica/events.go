package replica

import (
	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// EventFilter chooses the events a Subscription receives: those of one
// owner id, one session or one lock, or all of them. Exactly one of Owner,
// Session, Lock or All must be set.
//
// EarlyGrants (with Owner or Session only) also delivers the hand-off grants
// that the leader announces as soon as it has applied them — before this
// replica applies them, which on a follower can take a replication round
// longer. An announced grant is committed, but it arrives out of apply
// order and arrives again when this replica applies it: a subscriber that
// sets EarlyGrants must treat an EventGranted idempotently and must not
// expect the local reads to show it yet. The leader announces a grant to the
// replica that sent it the waiter's queued Acquire — the one the waiter's
// session lives on — or, when it does not know that replica (it became leader
// after the Acquire), to every replica; a subscription on another replica
// gets the grant when it applies it. Announcements are best effort; the
// applied event always follows.
//
// OnEarlyGrant (with EarlyGrants only), when set, takes the announced grants
// instead of C: it is called with each one on the goroutine that received
// the announcement, after the replica has released its own locks, and must
// not block. A subscriber whose waiters wait on channels of their own hands
// an announced grant to its waiter there, one goroutine hand-off sooner than
// through C and the subscriber's goroutine. The applied EventGranted still
// arrives on C.
type EventFilter struct {
	Owner        lockinfo.OwnerID
	Session      lockinfo.SessionID
	Lock         string
	All          bool
	EarlyGrants  bool
	OnEarlyGrant func(fsm.Event)
}

// Subscription receives the events the replica applies that match its
// filter, in apply order. Delivery never blocks the replica: if C is full
// when an event arrives, the event is dropped, counted, and Resync is
// signalled — as it is after a snapshot restore replaced the state. A
// subscriber that sees Resync must re-read the state it cares about.
//
// Receive from C and Resync from one goroutine; Close from any.
type Subscription struct {
	C      <-chan fsm.Event
	Resync <-chan struct{}
	stop   func()
}

// NewSubscription returns the subscription a replica implementation hands
// out: events on c, resyncs on resync, and stop called by Close (at least
// once; stop must tolerate more).
func NewSubscription(c <-chan fsm.Event, resync <-chan struct{}, stop func()) Subscription {
	return Subscription{C: c, Resync: resync, stop: stop}
}

// Close stops delivery. C is not closed (a concurrent send could race);
// after Close nothing more is sent on it. Safe to call more than once.
func (s *Subscription) Close() { s.stop() }
