package node

import (
	"sync"
	"sync/atomic"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
)

// subscription is one subscription of the hub: view is the
// replica.Subscription its subscriber holds (Node.subscribe returns it), c
// and resync the channels behind view's C and Resync.
type subscription struct {
	view   replica.Subscription
	c      chan fsm.Event
	resync chan struct{}
	hub    *eventHub
	filter replica.EventFilter
	once   sync.Once
}

// close stops delivery (replica.Subscription.Close). Safe to call more than
// once.
func (s *subscription) close() { s.once.Do(func() { s.hub.remove(s) }) }

func (s *subscription) deliver(e fsm.Event) bool {
	select {
	case s.c <- e:
		return true
	default:
		s.signalResync()
		return false
	}
}

func (s *subscription) signalResync() {
	select {
	case s.resync <- struct{}{}:
	default:
	}
}

// eventHub fans events out to subscriptions, indexed by filter key.
type eventHub struct {
	mu        sync.RWMutex
	byOwner   map[lockinfo.OwnerID][]*subscription
	bySession map[lockinfo.SessionID][]*subscription
	byLock    map[string][]*subscription
	all       []*subscription
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
		byOwner:   map[lockinfo.OwnerID][]*subscription{},
		bySession: map[lockinfo.SessionID][]*subscription{},
		byLock:    map[string][]*subscription{},
		dropped:   dropped,
	}
}

func (h *eventHub) add(f replica.EventFilter, buf int) *subscription {
	s := &subscription{c: make(chan fsm.Event, buf), resync: make(chan struct{}, 1), hub: h, filter: f}
	s.view = replica.NewSubscription(s.c, s.resync, s.close)
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

func without(list []*subscription, s *subscription) []*subscription {
	for i, x := range list {
		if x == s {
			list[i] = list[len(list)-1]
			list[len(list)-1] = nil
			return list[:len(list)-1]
		}
	}
	return list
}

func (h *eventHub) remove(s *subscription) {
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
		for _, list := range [2][]*subscription{h.byOwner[e.Owner], h.bySession[e.Session]} {
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

func resync(list []*subscription) {
	for _, s := range list {
		s.signalResync()
	}
}

// send delivers e to the subscriptions of list, counting drops.
func (h *eventHub) send(list []*subscription, e fsm.Event) {
	for _, s := range list {
		if !s.deliver(e) && h.dropped != nil {
			h.dropped()
		}
	}
}
