package fsm

import (
	"fmt"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// Limits are the replicated quotas. The state machine enforces them
// deterministically, so they are part of the replicated state: the leader
// proposes its configured limits (SetLimits) when they differ. A command a
// quota refuses returns StatusQuota (Result.Quota says which, Result.Err
// wraps ErrQuota) and changes nothing.
//
// A zero field means "no quota" (only the hard limits apply), except
// RequestWindow, where 0 means DefaultRequestWindow. A new state machine
// has the zero Limits until the first SetLimits (as every state machine of
// cluster version 1 does). Lowering a limit does not touch state already
// beyond it: it refuses what would add to it.
type Limits struct {
	// MaxLockNameLen bounds lock names, in bytes (at most the hard
	// MaxLockNameLen = 512).
	MaxLockNameLen int
	// MaxWaitersPerLock bounds the FIFO queue of one lock.
	MaxWaitersPerLock int
	// MaxLocksPerSession bounds the acquisitions of one session: locks it
	// holds plus waits it has queued.
	MaxLocksPerSession int
	// MaxSessions bounds the live sessions of the cluster.
	MaxSessions int
	// RequestWindow bounds the exactly-once requests of one session that
	// may be outstanding (executed but not acknowledged, or not yet
	// executed): a request number at or beyond floor + RequestWindow is
	// refused. It bounds the results kept per session. At most
	// MaxRequestWindow.
	RequestWindow int

	// Cluster version 4: the state's bounds and fair shares (see
	// fairshare.go). Until the cluster version is 4 the leader proposes
	// them as zero (Downgrade), and a SetLimits that sets one needs
	// version 4.

	// MaxLocks bounds the locks of the cluster: every grant (an exclusive
	// holder, a reader, a semaphore's holder), every waiter and every lock
	// in lock-delay counts one. (Lock names in use are never more: a name
	// is forgotten once nothing holds it, waits for it or delays it.)
	MaxLocks int
	// MaxStateBytes bounds the state's accounted size: every session,
	// grant, waiter and lock-delay is charged its strings (lock name,
	// value, description, node) and a fixed part that covers its measured
	// heap (sessionCharge, acquisitionCharge, delayCharge). At most 2^40.
	MaxStateBytes int64
	// NodeShares is the number of nodes guaranteed a fair share of every
	// cluster-wide bound — MaxSessions, MaxLocks, MaxStateBytes and each
	// lock's MaxWaitersPerLock — counted per node that opened the
	// sessions (OpenSession.Node): a node holding more than bound /
	// (4 × NodeShares) may add more only while the cluster (or the
	// lock's queue) uses less than three quarters of the bound. 0: no
	// shares (first come, first served). At most 1,024.
	NodeShares int
	// MaxSessionWaitersPerLock bounds the waiters of one session in one
	// lock's queue (its share of the queue).
	MaxSessionWaitersPerLock int
}

// Defaults of DefaultLimits, and hard bounds.
const (
	maxQuota = 1 << 30

	defaultMaxLocks                 = 2_000_000
	defaultMaxStateBytes            = 1 << 30
	defaultNodeShares               = 8
	defaultMaxSessionWaitersPerLock = 1_000
	maxStateBytes                   = 1 << 40
	maxNodeShares                   = 1 << 10
)

// DefaultLimits returns the quotas a node proposes unless configured
// otherwise: lock names of up to 512 bytes, 10,000 waiters per lock,
// 10,000 locks and waits per session, 100,000 sessions, 1,024 requests in
// flight per session; from cluster version 4 two million locks, 1 GiB of
// accounted state, 1,000 waiters of one session in one lock's queue, and
// fair shares for 8 nodes (each guaranteed 3,125 sessions, 62,500 locks,
// 32 MiB and 312 waiters in each lock's queue).
func DefaultLimits() Limits {
	return Limits{
		MaxLockNameLen:           fsmwire.MaxLockNameLen,
		MaxWaitersPerLock:        fsmwire.DefaultMaxWaitersPerLock,
		MaxLocksPerSession:       fsmwire.DefaultMaxLocksPerSession,
		MaxSessions:              fsmwire.DefaultMaxSessions,
		RequestWindow:            fsmwire.DefaultRequestWindow,
		MaxLocks:                 defaultMaxLocks,
		MaxStateBytes:            defaultMaxStateBytes,
		NodeShares:               defaultNodeShares,
		MaxSessionWaitersPerLock: defaultMaxSessionWaitersPerLock,
	}
}

// Validate reports whether every limit is within its hard bound.
func (l Limits) Validate() error {
	bad := func(name string, v, hi int) error {
		return fmt.Errorf("%w: limit %s = %d outside [0, %d]", fsmwire.ErrInvalidCommand, name, v, hi)
	}
	switch {
	case l.MaxLockNameLen < 0 || l.MaxLockNameLen > fsmwire.MaxLockNameLen:
		return bad("MaxLockNameLen", l.MaxLockNameLen, fsmwire.MaxLockNameLen)
	case l.MaxWaitersPerLock < 0 || l.MaxWaitersPerLock > maxQuota:
		return bad("MaxWaitersPerLock", l.MaxWaitersPerLock, maxQuota)
	case l.MaxLocksPerSession < 0 || l.MaxLocksPerSession > maxQuota:
		return bad("MaxLocksPerSession", l.MaxLocksPerSession, maxQuota)
	case l.MaxSessions < 0 || l.MaxSessions > maxQuota:
		return bad("MaxSessions", l.MaxSessions, maxQuota)
	case l.RequestWindow < 0 || l.RequestWindow > fsmwire.MaxRequestWindow:
		return bad("RequestWindow", l.RequestWindow, fsmwire.MaxRequestWindow)
	case l.MaxLocks < 0 || l.MaxLocks > maxQuota:
		return bad("MaxLocks", l.MaxLocks, maxQuota)
	case l.MaxStateBytes < 0 || l.MaxStateBytes > maxStateBytes:
		return fmt.Errorf("%w: limit MaxStateBytes = %d outside [0, %d]", fsmwire.ErrInvalidCommand, l.MaxStateBytes, int64(maxStateBytes))
	case l.NodeShares < 0 || l.NodeShares > maxNodeShares:
		return bad("NodeShares", l.NodeShares, maxNodeShares)
	case l.MaxSessionWaitersPerLock < 0 || l.MaxSessionWaitersPerLock > maxQuota:
		return bad("MaxSessionWaitersPerLock", l.MaxSessionWaitersPerLock, maxQuota)
	}
	return nil
}

// fair reports whether l sets a limit of cluster version 4.
func (l Limits) fair() bool {
	return l.MaxLocks != 0 || l.MaxStateBytes != 0 || l.NodeShares != 0 || l.MaxSessionWaitersPerLock != 0
}

// withoutFair returns l without the limits of cluster version 4.
func (l Limits) withoutFair() Limits {
	l.MaxLocks, l.MaxStateBytes, l.NodeShares, l.MaxSessionWaitersPerLock = 0, 0, 0, 0
	return l
}

// window is the effective request window.
func (l Limits) window() uint64 {
	if l.RequestWindow == 0 {
		return fsmwire.DefaultRequestWindow
	}
	return uint64(l.RequestWindow)
}

func quotaResult(q fsmwire.Quota, format string, args ...any) Result {
	return Result{Status: fsmwire.StatusQuota, Quota: q, Reason: fmt.Sprintf(format, args...)}
}
