package fsm

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// Stats are counters of the current state.
type Stats struct {
	Index     uint64 // last applied log index
	Clock     int64  // highest leader time applied (Unix nanoseconds)
	Sessions  int
	Locks     int // locks with a holder, waiters or a delay
	Held      int // locks with a holder
	Waiters   int // queue entries over all locks
	Delayed   int // locks in lock-delay
	LastToken Token
}

// Stats returns counters of the current state.
func (f *FSM) Stats() Stats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	st := f.st
	return Stats{
		Index: st.index, Clock: st.clock, Sessions: len(st.sessions), Locks: len(st.locks),
		Held: st.held, Waiters: st.waiters, Delayed: len(st.delayed), LastToken: Token(st.tokenSeq),
	}
}

// AppliedIndex returns the index of the last entry applied (or restored).
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.index
}

// Holder returns the current holder of the lock, and false if it is not held.
func (f *FSM) Holder(name string) (Holder, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l := f.st.locks[name]
	if l == nil || !l.held {
		return Holder{}, false
	}
	return f.st.describe(l.holder), true
}

// Lock returns the lock's holder, waiters and delay, and false if the lock
// has none of them.
func (f *FSM) Lock(name string) (LockInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l := f.st.locks[name]
	if l == nil {
		return LockInfo{}, false
	}
	return f.st.lockInfo(name, l), true
}

// Locks returns up to limit locks whose names start with prefix, in name
// order (limit <= 0: all). It sorts every matching name: meant for status
// pages and tools, not hot paths.
func (f *FSM) Locks(prefix string, limit int) []LockInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var names []string
	for name := range f.st.locks {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	if limit > 0 && len(names) > limit {
		names = names[:limit]
	}
	out := make([]LockInfo, len(names))
	for i, name := range names {
		out[i] = f.st.lockInfo(name, f.st.locks[name])
	}
	return out
}

func (st *state) lockInfo(name string, l *lock) LockInfo {
	li := LockInfo{Name: name, Held: l.held, DelayUntil: l.delayUntil}
	if l.held {
		li.Holder = st.describe(l.holder)
	}
	if l.waiters.len() > 0 {
		li.Waiters = make([]Waiter, l.waiters.len())
		for i, w := range l.waiters.items {
			li.Waiters[i] = Waiter{Session: w.session, Owner: w.owner, EnqueuedAt: w.enqueuedAt, EnqueuedIx: w.enqueuedIx}
		}
	}
	return li
}

// OwnerState is where one acquisition stands.
type OwnerState struct {
	Held     bool  // the owner holds the lock
	Token    Token // its fencing token, when Held
	Position int   // its 1-based place in the queue, when waiting; 0 otherwise
}

// Owner returns where the acquisition (name, owner) stands: holding, waiting,
// or neither (zero OwnerState).
func (f *FSM) Owner(name string, owner OwnerID) OwnerState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l := f.st.locks[name]
	switch {
	case l == nil:
		return OwnerState{}
	case l.held && l.holder.owner == owner:
		return OwnerState{Held: true, Token: l.holder.token}
	default:
		return OwnerState{Position: l.waiters.position(owner)}
	}
}

// Session returns a live session, and false if it does not exist.
func (f *FSM) Session(id SessionID) (SessionInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.st.sessions[id]
	if s == nil {
		return SessionInfo{}, false
	}
	return f.st.sessionInfo(s), true
}

// Sessions returns every live session in id order.
func (f *FSM) Sessions() []SessionInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]SessionInfo, 0, len(f.st.sessions))
	for _, id := range slices.Sorted(maps.Keys(f.st.sessions)) {
		out = append(out, f.st.sessionInfo(f.st.sessions[id]))
	}
	return out
}

// SessionLocks returns, in name order, the locks the session holds or waits for.
func (f *FSM) SessionLocks(id SessionID) []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.st.sessions[id]
	if s == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(s.locks))
}

func (st *state) sessionInfo(s *session) SessionInfo {
	n := 0
	for name := range s.locks {
		if l := st.locks[name]; l != nil {
			if l.held && l.holder.session == s.id {
				n++
			}
			for i := range l.waiters.items {
				if l.waiters.items[i].session == s.id {
					n++
				}
			}
		}
	}
	return SessionInfo{
		ID: s.id, TTL: time.Duration(s.ttl), LockDelay: time.Duration(s.lockDelay), Description: s.description,
		CreatedAt: s.createdAt, CreatedIdx: s.createdIdx, Locks: n,
	}
}

// NextDelayEnd returns the earliest end of a lock-delay (leader time, Unix
// nanoseconds), and false if no lock is delayed. The leader proposes a Tick
// once that time has come.
func (f *FSM) NextDelayEnd() (int64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var first int64
	ok := false
	for _, until := range f.st.delayed {
		if !ok || until < first {
			first, ok = until, true
		}
	}
	return first, ok
}
