package fsm

import (
	"maps"
)

// state is the replicated state. Objects reachable from its maps are shared
// with snapshots taken earlier: an object whose gen differs from state.gen
// belongs to a snapshot and must be copied before it is changed (see mutLock
// and mutSession). Snapshot therefore costs two shallow map copies, and a
// lock or session is copied at most once per snapshot, when first changed.
type state struct {
	gen        uint64 // incremented by every snapshot
	index      uint64 // last applied log index
	clock      int64  // highest leader time applied (time never goes back)
	sessionSeq uint64 // last session id handed out
	tokenSeq   uint64 // last fencing token handed out (grant counter)
	lockSeq    uint64 // creation counter of lock entries (snapshot order)
	sessions   map[SessionID]*session
	locks      map[string]*lock
	delayed    map[string]int64 // locks in lock-delay → delay end
	waiters    int              // total queue entries, for Stats
	held       int              // locks with a holder, for Stats
}

type session struct {
	gen         uint64
	id          SessionID
	ttl         int64
	lockDelay   int64
	description string
	createdAt   int64
	createdIdx  uint64
	// locks is the set of locks this session holds or waits for, so that
	// closing or expiring a session touches only its own locks.
	locks map[string]struct{}
}

type lock struct {
	gen        uint64
	seq        uint64 // creation order: snapshots list locks by it
	held       bool
	holder     holder
	waiters    queue
	delayUntil int64
}

type holder struct {
	session     SessionID
	owner       OwnerID
	token       Token
	acquiredAt  int64
	acquiredIdx uint64
}

type waiter struct {
	session    SessionID
	owner      OwnerID
	enqueuedAt int64
	enqueuedIx uint64
}

func newState() *state {
	return &state{
		sessions: make(map[SessionID]*session),
		locks:    make(map[string]*lock),
		delayed:  make(map[string]int64),
	}
}

// freeze makes every object reachable from st immutable for the returned
// copy: the copy shares them, st copies them before its next change.
func (st *state) freeze() *state {
	c := *st
	c.sessions = maps.Clone(st.sessions)
	c.locks = maps.Clone(st.locks)
	c.delayed = maps.Clone(st.delayed)
	st.gen++
	return &c
}

// mutLock returns the lock named name, private to st so that it can be
// changed, or nil if there is no such lock.
func (st *state) mutLock(name string) *lock {
	l := st.locks[name]
	if l != nil && l.gen != st.gen {
		c := *l
		c.gen = st.gen
		c.waiters = l.waiters.clone()
		l = &c
		st.locks[name] = l
	}
	return l
}

// mutSession is mutLock for sessions.
func (st *state) mutSession(id SessionID) *session {
	s := st.sessions[id]
	if s != nil && s.gen != st.gen {
		c := *s
		c.gen = st.gen
		c.locks = maps.Clone(s.locks)
		s = &c
		st.sessions[id] = s
	}
	return s
}

// involve records that session id holds or waits for lock name.
func (st *state) involve(id SessionID, name string) {
	s := st.mutSession(id)
	if s == nil {
		return
	}
	if s.locks == nil {
		s.locks = make(map[string]struct{})
	}
	s.locks[name] = struct{}{}
}

// uninvolve forgets lock name for session id unless the session still holds
// or waits for it (through another acquisition).
func (st *state) uninvolve(id SessionID, name string, l *lock) {
	if l.involves(id) {
		return
	}
	if s := st.mutSession(id); s != nil {
		delete(s.locks, name)
	}
}

// involves reports whether session id holds or waits for the lock.
func (l *lock) involves(id SessionID) bool {
	if l.held && l.holder.session == id {
		return true
	}
	for i := range l.waiters.items {
		if l.waiters.items[i].session == id {
			return true
		}
	}
	return false
}

// dropIfIdle forgets a lock that has no holder, no waiters and no delay.
func (st *state) dropIfIdle(name string, l *lock) {
	if !l.held && l.waiters.len() == 0 && l.delayUntil == 0 {
		delete(st.locks, name)
	}
}
