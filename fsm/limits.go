package fsm

import "fmt"

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
}

// Defaults of DefaultLimits, and hard bounds.
const (
	DefaultMaxWaitersPerLock  = 10_000
	DefaultMaxLocksPerSession = 10_000
	DefaultMaxSessions        = 100_000
	DefaultRequestWindow      = 1024
	MaxRequestWindow          = 1 << 16
	maxQuota                  = 1 << 30
)

// DefaultLimits returns the quotas a node proposes unless configured
// otherwise: lock names of up to 512 bytes, 10,000 waiters per lock,
// 10,000 locks and waits per session, 100,000 sessions, 1,024 requests in
// flight per session.
func DefaultLimits() Limits {
	return Limits{
		MaxLockNameLen:     MaxLockNameLen,
		MaxWaitersPerLock:  DefaultMaxWaitersPerLock,
		MaxLocksPerSession: DefaultMaxLocksPerSession,
		MaxSessions:        DefaultMaxSessions,
		RequestWindow:      DefaultRequestWindow,
	}
}

// Validate reports whether every limit is within its hard bound.
func (l Limits) Validate() error {
	bad := func(name string, v, hi int) error {
		return fmt.Errorf("%w: limit %s = %d outside [0, %d]", ErrInvalidCommand, name, v, hi)
	}
	switch {
	case l.MaxLockNameLen < 0 || l.MaxLockNameLen > MaxLockNameLen:
		return bad("MaxLockNameLen", l.MaxLockNameLen, MaxLockNameLen)
	case l.MaxWaitersPerLock < 0 || l.MaxWaitersPerLock > maxQuota:
		return bad("MaxWaitersPerLock", l.MaxWaitersPerLock, maxQuota)
	case l.MaxLocksPerSession < 0 || l.MaxLocksPerSession > maxQuota:
		return bad("MaxLocksPerSession", l.MaxLocksPerSession, maxQuota)
	case l.MaxSessions < 0 || l.MaxSessions > maxQuota:
		return bad("MaxSessions", l.MaxSessions, maxQuota)
	case l.RequestWindow < 0 || l.RequestWindow > MaxRequestWindow:
		return bad("RequestWindow", l.RequestWindow, MaxRequestWindow)
	}
	return nil
}

// window is the effective request window.
func (l Limits) window() uint64 {
	if l.RequestWindow == 0 {
		return DefaultRequestWindow
	}
	return uint64(l.RequestWindow)
}

// Quota names the quota that refused a command (Result.Quota).
type Quota uint8

// Quotas.
const (
	QuotaLockName     Quota = iota + 1 // Limits.MaxLockNameLen
	QuotaWaiters                       // Limits.MaxWaitersPerLock
	QuotaSessionLocks                  // Limits.MaxLocksPerSession
	QuotaSessions                      // Limits.MaxSessions
	QuotaRequests                      // Limits.RequestWindow
	maxQuotaKind      = QuotaRequests
)

// Quotas lists every quota kind (metrics initialise a series per kind).
func Quotas() []Quota {
	return []Quota{QuotaLockName, QuotaWaiters, QuotaSessionLocks, QuotaSessions, QuotaRequests}
}

func (q Quota) String() string {
	switch q {
	case QuotaLockName:
		return "lock_name_length"
	case QuotaWaiters:
		return "waiters_per_lock"
	case QuotaSessionLocks:
		return "locks_per_session"
	case QuotaSessions:
		return "sessions"
	case QuotaRequests:
		return "requests_in_flight"
	}
	return fmt.Sprintf("Quota(%d)", uint8(q))
}

func quotaResult(q Quota, format string, args ...any) Result {
	return Result{Status: StatusQuota, Quota: q, Reason: fmt.Sprintf(format, args...)}
}
