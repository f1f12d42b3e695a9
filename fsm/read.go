package fsm

import (
	"slices"
	"strings"
	"time"
)

// Stats are counters of the current state.
type Stats struct {
	Index     uint64 // last applied log index
	Clock     int64  // cluster version 1: highest leader time applied; 2: the last entry's (Unix nanoseconds)
	Sessions  int
	Locks     int // locks with a holder, waiters or a delay
	Held      int // locks with a holder
	Waiters   int // queue entries over all locks
	Delayed   int // locks in lock-delay
	LastToken Token
	// Cluster version 3 (see command_prims.go).
	Readers          int // read grants of locks
	Semaphores       int // semaphores in use (held or waited for)
	SemaphoreHolders int // grants of semaphores
	PermitsHeld      int // permits held over all semaphores
}

// Stats returns counters of the current state.
func (f *FSM) Stats() Stats {
	f.mu.RLock()
	defer f.mu.RUnlock()
	st := f.st
	return Stats{
		Index: st.index, Clock: st.clock, Sessions: st.sessions.len(), Locks: st.locks.len(),
		Held: st.held, Waiters: st.waiters, Delayed: st.delayed.len(), LastToken: Token(st.tokenSeq),
		Readers: st.counts.readers, Semaphores: st.counts.semaphores, SemaphoreHolders: st.counts.semHolders,
		PermitsHeld: st.counts.permits,
	}
}

// AppliedIndex returns the index of the last entry applied (or restored).
func (f *FSM) AppliedIndex() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.index
}

// ClusterVersion returns the cluster version in force (1 until a
// SetClusterVersion raised it).
func (f *FSM) ClusterVersion() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.version
}

// ClusterID returns the cluster id set by InitCluster ("" until then).
func (f *FSM) ClusterID() string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.clusterID
}

// Limits returns the replicated quotas in force.
func (f *FSM) Limits() Limits {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.limits
}

// Holder returns the current holder of the lock, and false if it is not held.
func (f *FSM) Holder(name string) (Holder, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l := f.st.locks.get(name)
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
	l := f.st.locks.get(name)
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
	for name := range f.st.locks.all() {
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
		out[i] = f.st.lockInfo(name, f.st.locks.get(name))
	}
	return out
}

func (st *state) lockInfo(name string, l *lock) LockInfo {
	li := LockInfo{Name: name, Held: l.held, Delayed: l.delayed, DelayUntil: l.delayUntil,
		DelayFor: time.Duration(l.delayFor), DelayToken: l.delayToken, Limit: l.limit, Used: l.used}
	if l.held {
		li.Holder = st.describe(l.holder)
	}
	if len(l.shared) > 0 {
		li.Shared = make([]Holder, 0, len(l.shared))
		for _, h := range l.sharedByToken(nil) {
			d := st.describe(h)
			d.Shared = l.limit == 0
			li.Shared = append(li.Shared, d)
		}
	}
	if l.waiters.len() > 0 {
		li.Waiters = make([]Waiter, 0, l.waiters.len())
		for w := range l.waiters.all() {
			li.Waiters = append(li.Waiters, Waiter{Session: w.session, Owner: w.owner, EnqueuedAt: w.enqueuedAt, EnqueuedIx: w.enqueuedIx,
				Shared: w.shared, Permits: w.permits, Value: w.value})
		}
	}
	return li
}

// OwnerState is where one acquisition stands.
type OwnerState struct {
	Held     bool  // the owner holds a grant of the lock (exclusive or shared)
	Token    Token // its fencing token, when Held
	Position int   // its 1-based place in the queue, when waiting; 0 otherwise
}

// Owner returns where the acquisition (name, owner) stands: holding, waiting,
// or neither (zero OwnerState).
func (f *FSM) Owner(name string, owner OwnerID) OwnerState {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l := f.st.locks.get(name)
	if l == nil {
		return OwnerState{}
	}
	if h, ok := l.grantOf(owner); ok {
		return OwnerState{Held: true, Token: h.token}
	}
	return OwnerState{Position: l.waiters.position(owner)}
}

// WouldQueue reports whether c, applied to the current state, would join
// the lock's queue: c waits (Wait), the lock exists with the same limit, c's
// owner neither holds nor waits for it, and the lock has waiters or cannot
// admit c now. It is a hint for scheduling proposals (the leader holds such
// an Acquire back for company, node's batcher): the state may change before
// c is applied, and nothing may depend on the answer for correctness.
func (f *FSM) WouldQueue(c Acquire) bool {
	if !c.Wait {
		return false
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	l := f.st.locks.get(c.Lock)
	if l == nil || l.limit != c.Limit {
		return false
	}
	if _, ok := l.grantOf(c.Owner); ok || l.waiters.find(c.Owner) >= 0 {
		return false
	}
	return l.waiters.len() > 0 || !l.admits(waiter{owner: c.Owner, shared: c.Shared, permits: c.Permits})
}

// Session returns a live session, and false if it does not exist.
func (f *FSM) Session(id SessionID) (SessionInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.st.sessions.get(id)
	if s == nil {
		return SessionInfo{}, false
	}
	return s.info(), true
}

// Sessions returns every live session in id order. O(n log n) in the
// sessions, whatever they hold.
func (f *FSM) Sessions() []SessionInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]SessionInfo, 0, f.st.sessions.len())
	for _, s := range f.st.sessions.all() {
		out = append(out, s.info())
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return cmpID(a.ID, b.ID) })
	return out
}

// SessionTTLs returns the id, TTL and origin marker of every live session,
// in no particular order: what a new leader needs to arm their deadlines,
// O(n).
func (f *FSM) SessionTTLs() []SessionTTL {
	f.mu.RLock()
	defer f.mu.RUnlock()
	st := f.st
	out := make([]SessionTTL, 0, st.sessions.len())
	for id, s := range st.sessions.all() {
		t := SessionTTL{ID: id, TTL: time.Duration(s.ttl)}
		if len(st.markers) > 0 {
			t.Origin = st.origin(s.renewedAt)
		}
		out = append(out, t)
	}
	return out
}

// SessionLocks returns, in name order, the locks the session holds or waits for.
func (f *FSM) SessionLocks(id SessionID) []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.st.sessions.get(id)
	if s == nil {
		return nil
	}
	return s.lockNames()
}

func (s *session) info() SessionInfo {
	return SessionInfo{
		ID: s.id, TTL: time.Duration(s.ttl), LockDelay: time.Duration(s.lockDelay), Description: s.description,
		CreatedAt: s.createdAt, CreatedIdx: s.createdIdx, Locks: len(s.acqs), Node: s.node, Reserved: s.reserved,
	}
}

func cmpID(a, b SessionID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// NextDelayEnd returns the earliest end of a lock-delay (leader time, Unix
// nanoseconds), and false if no lock is delayed. At cluster version 1 the
// leader proposes a Tick once that time has come.
func (f *FSM) NextDelayEnd() (int64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var first int64
	ok := false
	for _, until := range f.st.delayed.all() {
		if !ok || until < first {
			first, ok = until, true
		}
	}
	return first, ok
}

// DelayedLocks returns every lock in lock-delay, in name order, with what
// the leader needs to time and end the delay (cluster version 2).
func (f *FSM) DelayedLocks() []DelayInfo {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]DelayInfo, 0, f.st.delayed.len())
	for _, name := range slices.Sorted(f.st.delayed.keys()) {
		if l := f.st.locks.get(name); l != nil && l.delayed {
			out = append(out, DelayInfo{DelayRef: DelayRef{Lock: name, Token: l.delayToken}, For: time.Duration(l.delayFor)})
		}
	}
	return out
}
