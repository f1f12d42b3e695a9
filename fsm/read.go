package fsm

import (
	"slices"
	"strings"
	"time"

	"github.com/raftlock/raftlock/internal/lockinfo"
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
	LastToken lockinfo.Token
	// Cluster version 3: read grants and semaphores.
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
		Held: st.held, Waiters: st.waiters, Delayed: st.delayed.len(), LastToken: lockinfo.Token(st.tokenSeq),
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
func (f *FSM) Holder(name string) (lockinfo.Holder, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l := f.st.locks.get(name)
	if l == nil || !l.held {
		return lockinfo.Holder{}, false
	}
	return f.st.describe(l.holder), true
}

// Lock returns the lock's holder, its first waiters and shared grants (at
// most 1,000 of each: LockInfo.WaiterCount and SharedCount are the totals,
// Waiters pages the whole queue) and its delay, and false if the lock has
// none of them.
func (f *FSM) Lock(name string) (lockinfo.LockInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	l := f.st.locks.get(name)
	if l == nil {
		return lockinfo.LockInfo{}, false
	}
	return f.st.lockInfo(name, l, maxPage), true
}

// lockInfo describes l with at most detail of its waiters and of its shared
// grants (the first ones): O(detail).
func (st *state) lockInfo(name string, l *lock, detail int) lockinfo.LockInfo {
	li := lockinfo.LockInfo{Name: name, Held: l.held, Delayed: l.delayed, DelayUntil: l.delayUntil,
		DelayFor: time.Duration(l.delayFor), DelayToken: l.delayToken, Limit: l.limit, Used: l.used,
		WaiterCount: l.waiters.len(), SharedCount: l.shared.len()}
	if l.held {
		li.Holder = st.describe(l.holder)
	}
	if n := min(l.shared.len(), detail); n > 0 {
		li.Shared = make([]lockinfo.Holder, 0, n)
		for h := range l.shared.all() {
			if len(li.Shared) == n {
				break
			}
			li.Shared = append(li.Shared, st.describeShared(l, h))
		}
	}
	if n := min(l.waiters.len(), detail); n > 0 {
		li.Waiters = make([]lockinfo.Waiter, 0, n)
		for w := range l.waiters.all() {
			if len(li.Waiters) == n {
				break
			}
			li.Waiters = append(li.Waiters, w.info())
		}
	}
	return li
}

// describeShared describes h, a shared grant of l.
func (st *state) describeShared(l *lock, h holder) lockinfo.Holder {
	d := st.describe(h)
	d.Shared = l.limit == 0
	return d
}

func (w waiter) info() lockinfo.Waiter {
	return lockinfo.Waiter{Session: w.session, Owner: w.owner, EnqueuedAt: w.enqueuedAt, EnqueuedIx: w.enqueuedIx,
		Shared: w.shared, Permits: w.permits, Value: w.value}
}

// OwnerState is where one acquisition stands.
type OwnerState struct {
	Held     bool           // the owner holds a grant of the lock (exclusive or shared)
	Token    lockinfo.Token // its fencing token, when Held
	Position int            // its 1-based place in the queue, when waiting; 0 otherwise
}

// Owner returns where the acquisition (name, owner) stands: holding, waiting,
// or neither (zero OwnerState).
func (f *FSM) Owner(name string, owner lockinfo.OwnerID) OwnerState {
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
func (f *FSM) Session(id lockinfo.SessionID) (lockinfo.SessionInfo, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	s := f.st.sessions.get(id)
	if s == nil {
		return lockinfo.SessionInfo{}, false
	}
	return s.info(), true
}

// SessionLocks returns, in name order, the locks the session holds or
// waits for. It holds the state's read lock for O(k) in the session's
// acquisitions (at most Limits.MaxLocksPerSession) and sorts them after.
func (f *FSM) SessionLocks(id lockinfo.SessionID) []string {
	f.mu.RLock()
	s := f.st.sessions.get(id)
	var names []string
	if s != nil {
		names = make([]string, 0, len(s.acqs))
		for k := range s.acqs {
			names = append(names, k.lock)
		}
	}
	f.mu.RUnlock()
	slices.Sort(names)
	return slices.Compact(names)
}

func (s *session) info() lockinfo.SessionInfo {
	return lockinfo.SessionInfo{
		ID: s.id, TTL: time.Duration(s.ttl), LockDelay: time.Duration(s.lockDelay), Description: s.description,
		CreatedAt: s.createdAt, CreatedIdx: s.createdIdx, Locks: len(s.acqs), Node: s.node, Reserved: s.reserved,
	}
}

func cmpID(a, b lockinfo.SessionID) int {
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
// the leader needs to time and end the delay (cluster version 2). It holds
// the state's read lock for O(d) in the delayed locks and sorts them after
// (the leader reads them once per leadership, not per request).
func (f *FSM) DelayedLocks() []DelayInfo {
	f.mu.RLock()
	out := make([]DelayInfo, 0, f.st.delayed.len())
	for name := range f.st.delayed.keys() {
		if l := f.st.locks.get(name); l != nil && l.delayed {
			out = append(out, DelayInfo{DelayRef: DelayRef{Lock: name, Token: l.delayToken}, For: time.Duration(l.delayFor)})
		}
	}
	f.mu.RUnlock()
	slices.SortFunc(out, func(a, b DelayInfo) int { return strings.Compare(a.Lock, b.Lock) })
	return out
}
