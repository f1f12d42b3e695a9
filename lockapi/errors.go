package lockapi

import (
	"errors"
	"fmt"

	"github.com/raftlock/raftlock/fence"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/node"
)

// Errors. Test with errors.Is; returned errors wrap them with detail.
var (
	// ErrLocked: TryLock found the lock held (or in lock-delay). The error is
	// a *LockedError naming the holder.
	ErrLocked = errors.New("lockapi: lock is held")
	// ErrNotHolder: Unlock of a lease that had already been lost (its lock may
	// meanwhile belong to someone else).
	ErrNotHolder = errors.New("lockapi: not the holder")
	// ErrSessionExpired: the session's lease ended — its keepalives did not
	// succeed before its deadline, or the leader expired it. Identical to
	// replica.ErrSessionExpired.
	ErrSessionExpired = replica.ErrSessionExpired
	// ErrNoQuorum: the cluster cannot commit or confirm now. Identical to
	// node.ErrNoQuorum.
	ErrNoQuorum = node.ErrNoQuorum
	// ErrSessionClosed: the session was closed by Close.
	ErrSessionClosed = errors.New("lockapi: session closed")
	// ErrLeaseLost: a lease ended other than by Unlock; the error also wraps
	// the cause (ErrSessionExpired, ErrSessionClosed, ...).
	ErrLeaseLost = errors.New("lockapi: lease lost")
	// ErrUnlocked: the lease ended because Unlock was called.
	ErrUnlocked = errors.New("lockapi: unlocked")
	// ErrAlreadyHeld: the session already holds a grant of the name that the
	// acquisition would wait for — Lock of a lock the session holds
	// (exclusively or for reading), RLock of one it holds exclusively, more
	// permits of a semaphore than its limit leaves beside the session's own.
	// Locks are not reentrant; nothing was sent to the cluster (see Lock).
	ErrAlreadyHeld = errors.New("lockapi: already held by this session")
	// ErrInvalidArgument: a bad argument (lock name, TTL, option); nothing
	// was sent to the cluster.
	ErrInvalidArgument = errors.New("lockapi: invalid argument")
	// ErrStaleToken: a fence refused a write with a stale token. Identical to
	// fence.ErrStaleToken.
	ErrStaleToken = fence.ErrStaleToken
	// ErrClosed: the node is closed (or closing); nothing more can be done
	// through it. Identical to node.ErrClosed.
	ErrClosed = node.ErrClosed
	// ErrQuota: a cluster quota refused the command (locks and waits per
	// session, waiters per lock, sessions, the session's requests in flight,
	// the cluster's locks and bytes; see fsm.Limits); nothing changed.
	// Identical to fsm.ErrQuota.
	ErrQuota = fsmwire.ErrQuota
	// ErrFairShare: the quota that refused the command is a fair share —
	// this node's share of the cluster's sessions, locks or bytes or of a
	// lock's queue, or this session's share of a lock's queue: this client
	// used its share, while others still can (wait for yours to drain,
	// release, close sessions). Always wraps ErrQuota too. Identical to
	// fsm.ErrFairShare.
	ErrFairShare = fsmwire.ErrFairShare
)

// LockedError is returned by TryLock when the lock is held. It wraps
// ErrLocked.
type LockedError struct {
	Lock       string
	Holder     Holder // zero while the lock is in lock-delay without a holder, or held by readers
	DelayUntil int64  // end of the lock-delay (Unix nanoseconds, leader time), if any
	Free       int    // a semaphore: the permits free (too few, or others wait first)
}

func (e *LockedError) Error() string {
	switch {
	case e.Holder.Session != 0:
	case e.DelayUntil != 0:
		return fmt.Sprintf("lockapi: lock %q is in lock-delay", e.Lock)
	default:
		return fmt.Sprintf("lockapi: %q is held shared, or has too few permits free (%d) or others waiting", e.Lock, e.Free)
	}
	return fmt.Sprintf("lockapi: lock %q is held by %q (session %d, token %d)", e.Lock, e.Holder.Description, e.Holder.Session, e.Holder.Token)
}

// Unwrap makes errors.Is(err, ErrLocked) true.
func (e *LockedError) Unwrap() error { return ErrLocked }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}
