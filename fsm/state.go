package fsm

import (
	"maps"
	"slices"

	"github.com/raftlock/raftlock/internal/lockinfo"
)

// state is the replicated state. Objects reachable from its maps are shared
// with snapshots taken earlier: an object whose gen differs from state.gen
// belongs to a snapshot and must be copied before it is changed (see mutLock
// and mutSession). The maps are copy-on-write too, by shard (cowMap):
// Snapshot therefore costs O(shards), not O(locks), and a lock, a session
// or a shard of a map is copied at most once per snapshot, when first
// changed.
type state struct {
	gen        uint64 // incremented by every snapshot
	index      uint64 // last applied log index
	clock      int64  // version 1: highest leader time applied; version 2: the last entry's time
	sessionSeq uint64 // last session id handed out
	tokenSeq   uint64 // last fencing token handed out (grant counter)
	lockSeq    uint64 // creation counter of lock entries (snapshot order)
	version    uint64 // cluster version (1 until SetClusterVersion)
	clusterID  string // set once by InitCluster
	limits     Limits // replicated quotas (zero: none)
	sessions   *cowMap[lockinfo.SessionID, *session]
	locks      *cowMap[string, *lock]
	delayed    *cowMap[string, int64] // locks in lock-delay → delayUntil
	waiters    int                    // total queue entries, for Stats
	held       int                    // locks with a holder, for Stats
	counts     sharedCounts           // shared grants and semaphores, for Stats (shared.go)
	// nodes and total are the usage of each node and of the cluster, for
	// the fair shares (fairshare.go); derived from the sessions and locks
	// (recount). nodes is private to st: freeze gives the copy its own.
	nodes    map[string]usage
	total    usage
	restores restores // staged and installed restores (RestoreChunk, RestoreCommit)
	// markers are the indices of the takeover markers kept, ascending
	// (cluster version 4, renewed.go). Never changed in place: a frozen
	// copy shares the slice.
	markers []uint64
}

type session struct {
	gen         uint64
	id          lockinfo.SessionID
	ttl         int64
	lockDelay   int64
	description string
	node        string // the node it was opened from (OpenSession.Node, cluster version 4)
	reserved    bool   // opened in its node's reserve (OpenSession.Reserved)
	createdAt   int64
	createdIdx  uint64
	renewedAt   uint64 // index of the entry that last renewed it in the log (renewed.go)
	// acqs holds every acquisition of this session (held or waiting), so
	// that closing or expiring a session touches only its own acquisitions
	// and counting them is O(1). (One owner id may be used on several
	// locks: the key is the pair.)
	acqs map[acqKey]struct{}
	// acqBytes is the accounted size of the acquisitions in acqs
	// (acquisitionBytes each).
	acqBytes int64
	// floor and results are the exactly-once table (see requests.go).
	floor   uint64
	results []executed
}

type acqKey struct {
	lock  string
	owner lockinfo.OwnerID
}

type lock struct {
	gen    uint64
	seq    uint64 // creation order: snapshots list locks by it
	held   bool   // an exclusive holder
	holder holder
	// shared holds the shared grants in grant (token) order (cluster
	// version 3): the readers of a lock, or the holders of a semaphore's
	// permits; nil when there are none (most locks: a pointer keeps them
	// small).
	shared *grants
	limit  int // > 0: a counting semaphore of limit permits
	used   int // a semaphore's permits held
	// waiters is the FIFO queue of every kind of acquisition.
	waiters queue
	// Lock-delay. delayUntil is the leader time at which it ends: at
	// cluster version 1 that decides (Tick); from version 2 it is
	// informational and the delay ends with EndDelay{Lock, delayToken},
	// timed by the leader over delayFor on its monotonic clock.
	delayed    bool
	delayUntil int64
	delayFor   int64          // nanoseconds; version 2
	delayToken lockinfo.Token // token of the grant whose expiry began the delay; version 2
	delayNode  string         // the node of the session whose expiry began the delay (fairshare.go)
}

type holder struct {
	session     lockinfo.SessionID
	owner       lockinfo.OwnerID
	token       lockinfo.Token
	acquiredAt  int64
	acquiredIdx uint64
	permits     int // semaphore grants
	value       string
}

// waiter is a queued acquisition; it is also what a grant is made from.
type waiter struct {
	session    lockinfo.SessionID
	owner      lockinfo.OwnerID
	enqueuedAt int64
	enqueuedIx uint64
	shared     bool // a read grant of a lock
	permits    int  // permits of a semaphore
	value      string
	node       string // its session's node (the queue counts waiters by node)
}

func newState() *state {
	return &state{
		version:  1,
		sessions: newSessionMap(),
		locks:    newLockMap(),
		delayed:  newDelayMap(),
	}
}

// freeze makes every object reachable from st immutable for the returned
// copy: the copy shares them, st copies them before its next change.
func (st *state) freeze() *state {
	c := *st
	c.sessions = st.sessions.freeze()
	c.locks = st.locks.freeze()
	c.delayed = st.delayed.freeze()
	c.nodes = maps.Clone(st.nodes)
	st.gen++
	return &c
}

// mutLock returns the lock named name, private to st so that it can be
// changed, or nil if there is no such lock.
func (st *state) mutLock(name string) *lock {
	l := st.locks.get(name)
	if l != nil && l.gen != st.gen {
		c := *l
		c.gen = st.gen
		c.waiters = l.waiters.clone()
		c.shared = cloneGrants(l.shared)
		l = &c
		st.locks.set(name, l)
	}
	return l
}

// mutSession is mutLock for sessions.
func (st *state) mutSession(id lockinfo.SessionID) *session {
	s := st.sessions.get(id)
	if s != nil && s.gen != st.gen {
		c := *s
		c.gen = st.gen
		c.acqs = maps.Clone(s.acqs)
		c.results = slices.Clone(s.results)
		s = &c
		st.sessions.set(id, s)
	}
	return s
}

// involve records that session id holds or waits for lock name as owner,
// with value, and charges it to the session's node.
func (st *state) involve(id lockinfo.SessionID, owner lockinfo.OwnerID, name, value string) {
	s := st.mutSession(id)
	if s == nil {
		return
	}
	if s.acqs == nil {
		s.acqs = make(map[acqKey]struct{})
	}
	s.acqs[acqKey{name, owner}] = struct{}{}
	n := acquisitionBytes(name, value)
	s.acqBytes += n
	st.use(s.node, usage{locks: 1, bytes: n})
}

// uninvolve forgets the acquisition (name, owner) of session id, whose
// value was value.
func (st *state) uninvolve(id lockinfo.SessionID, owner lockinfo.OwnerID, name, value string) {
	s := st.mutSession(id)
	if s == nil {
		return
	}
	if _, ok := s.acqs[acqKey{name, owner}]; !ok {
		return
	}
	delete(s.acqs, acqKey{name, owner})
	n := acquisitionBytes(name, value)
	s.acqBytes -= n
	st.use(s.node, usage{locks: -1, bytes: -n})
}

// lockNames returns the names of the locks session s holds or waits for,
// sorted.
func (s *session) lockNames() []string {
	names := make([]string, 0, len(s.acqs))
	for k := range s.acqs {
		names = append(names, k.lock)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// dropIfIdle forgets a lock (or semaphore) that has no holder, no
// waiters and no delay.
func (st *state) dropIfIdle(name string, l *lock) {
	if !l.held && l.shared.len() == 0 && l.waiters.len() == 0 && !l.delayed {
		if l.limit > 0 {
			st.counts.semaphores--
		}
		st.locks.del(name)
	}
}

// clearDelay ends the lock's delay (the caller grants the lock).
func (st *state) clearDelay(name string, l *lock) {
	if l.delayed {
		st.use(l.delayNode, usage{locks: -1, bytes: -delayBytes(name)})
	}
	l.delayed, l.delayUntil, l.delayFor, l.delayToken, l.delayNode = false, 0, 0, 0, ""
	st.delayed.del(name)
}
