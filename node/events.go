package node

import (
	"sync"
	"sync/atomic"

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
// the announcement, after the node has released its own locks, and must not
// block. A subscriber whose waiters wait on channels of their own hands an
// announced grant to its waiter there, one goroutine hand-off sooner than
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

// Subscription receives the events the local FSM applies that match its
// filter, in apply order. Delivery never blocks the FSM: if C is full when an
// event arrives, the event is dropped, counted, and Resync is signalled — as
// it is after a snapshot restore replaced the state. A subscriber that sees
// Resync must re-read the state it cares about from the node.
//
// Receive from C and Resync from one goroutine; Close from any.
type Subscription struct {
	C      <-chan fsm.Event
	Resync <-chan struct{}

	c      chan fsm.Event
	resync chan struct{}
	hub    *eventHub
	filter EventFilter
	once   sync.Once
}

// Close stops delivery. C is not closed (a concurrent send could race); after
// Close nothing more is sent on it. Safe to call more than once.
func (s *Subscription) Close() { s.once.Do(func() { s.hub.remove(s) }) }

func (s *Subscription) deliver(e fsm.Event) bool {
	select {
	case s.c <- e:
		return true
	default:
		s.signalResync()
		return false
	}
}

func (s *Subscription) signalResync() {
	select {
	case s.resync <- struct{}{}:
	default:
	}
}

// eventHub fans events out to subscriptions, indexed by filter key.
type eventHub struct {
	mu        sync.RWMutex
	byOwner   map[lockinfo.OwnerID][]*Subscription
	bySession map[lockinfo.SessionID][]*Subscription
	byLock    map[string][]*Subscription
	all       []*Subscription
	dropped   func() // metric hook
	// afterDispatch, when set (tests), is called on the apply goroutine once
	// an entry's events have been delivered, before the entry is counted
	// as applied.
	afterDispatch atomic.Pointer[func(events []fsm.Event)]
	// beforeResync, when set (tests), is called by resyncAll before it
	// signals the subscriptions.
	beforeResync atomic.Pointer[func()]
}

func newEventHub(dropped func()) *eventHub {
	return &eventHub{
		byOwner:   map[lockinfo.OwnerID][]*Subscription{},
		bySession: map[lockinfo.SessionID][]*Subscription{},
		byLock:    map[string][]*Subscription{},
		dropped:   dropped,
	}
}

func (h *eventHub) add(f EventFilter, buf int) *Subscription {
	s := &Subscription{c: make(chan fsm.Event, buf), resync: make(chan struct{}, 1), hub: h, filter: f}
	s.C, s.Resync = s.c, s.resync
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case f.All:
		h.all = append(h.all, s)
	case !f.Owner.IsZero():
		h.byOwner[f.Owner] = append(h.byOwner[f.Owner], s)
	case f.Session != 0:
		h.bySession[f.Session] = append(h.bySession[f.Session], s)
	default:
		h.byLock[f.Lock] = append(h.byLock[f.Lock], s)
	}
	return s
}

func without(list []*Subscription, s *Subscription) []*Subscription {
	for i, x := range list {
		if x == s {
			list[i] = list[len(list)-1]
			list[len(list)-1] = nil
			return list[:len(list)-1]
		}
	}
	return list
}

func (h *eventHub) remove(s *Subscription) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := s.filter
	switch {
	case f.All:
		h.all = without(h.all, s)
	case !f.Owner.IsZero():
		if h.byOwner[f.Owner] = without(h.byOwner[f.Owner], s); len(h.byOwner[f.Owner]) == 0 {
			delete(h.byOwner, f.Owner)
		}
	case f.Session != 0:
		if h.bySession[f.Session] = without(h.bySession[f.Session], s); len(h.bySession[f.Session]) == 0 {
			delete(h.bySession, f.Session)
		}
	default:
		if h.byLock[f.Lock] = without(h.byLock[f.Lock], s); len(h.byLock[f.Lock]) == 0 {
			delete(h.byLock, f.Lock)
		}
	}
}

// dispatch delivers events; called on the FSM goroutine, never blocks.
func (h *eventHub) dispatch(events []fsm.Event) {
	if len(events) == 0 {
		return
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, e := range events {
		h.send(h.all, e)
		if !e.Owner.IsZero() {
			h.send(h.byOwner[e.Owner], e)
		}
		if e.Session != 0 {
			h.send(h.bySession[e.Session], e)
		}
		if e.Lock != "" {
			h.send(h.byLock[e.Lock], e)
		}
	}
	if f := h.afterDispatch.Load(); f != nil {
		(*f)(events)
	}
}

// dispatchEarly delivers announced grants to the Owner and Session
// subscriptions that asked for them: on C, or to OnEarlyGrant once the hub's
// lock is released (so that a hook may take locks of its own that are held
// around Subscribe or Close). Never blocks unless a hook does.
func (h *eventHub) dispatchEarly(grants []fsm.Event) {
	type call struct {
		hook func(fsm.Event)
		e    fsm.Event
	}
	var buf [4]call // an announcement carries a grant or two: no allocation
	calls := buf[:0]
	h.mu.RLock()
	for _, e := range grants {
		for _, list := range [2][]*Subscription{h.byOwner[e.Owner], h.bySession[e.Session]} {
			for _, s := range list {
				switch {
				case !s.filter.EarlyGrants:
				case s.filter.OnEarlyGrant != nil:
					calls = append(calls, call{s.filter.OnEarlyGrant, e})
				case !s.deliver(e) && h.dropped != nil:
					h.dropped()
				}
			}
		}
	}
	h.mu.RUnlock()
	for _, c := range calls {
		c.hook(c.e)
	}
}

// resyncAll tells every subscription to re-read the state (after a restore).
func (h *eventHub) resyncAll() {
	if f := h.beforeResync.Load(); f != nil {
		(*f)()
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, s := range h.all {
		s.signalResync()
	}
	for _, list := range h.byOwner {
		resync(list)
	}
	for _, list := range h.bySession {
		resync(list)
	}
	for _, list := range h.byLock {
		resync(list)
	}
}

func resync(list []*Subscription) {
	for _, s := range list {
		s.signalResync()
	}
}

// send delivers e to the subscriptions of list, counting drops.
func (h *eventHub) send(list []*Subscription, e fsm.Event) {
	for _, s := range list {
		if !s.deliver(e) && h.dropped != nil {
			h.dropped()
		}
	}
}
