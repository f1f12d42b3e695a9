package fsm

import (
	"fmt"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Result is the outcome of one command. Which fields are set depends on
// Status; the others are zero.
type Result struct {
	Status     fsmwire.Status
	Session    lockinfo.SessionID // OpenSession: the new id
	Token      lockinfo.Token     // Granted: the fencing token
	Position   int                // Queued: 1-based place in the FIFO queue
	Holder     lockinfo.Holder    // Locked: the current exclusive holder (zero while in lock-delay without one, or held shared)
	DelayUntil int64              // Locked: end of the lock-delay, if that is why
	Count      int                // ExpireSessions: sessions expired; Tick, EndDelay: delays ended; Locked (semaphore): permits free; Conflict: the limit in force
	Reason     string             // Invalid, Quota: what is wrong
	Quota      fsmwire.Quota      // Quota: which quota refused the command
}

// Err maps the status to a sentinel error: nil for OK, Granted and Queued;
// ErrLocked, ErrNotHolder, ErrNoSession, ErrInvalidCommand, ErrStale,
// ErrQuota (and ErrFairShare for a share) or ErrConflict otherwise.
func (r Result) Err() error {
	switch r.Status {
	case fsmwire.StatusOK, fsmwire.StatusGranted, fsmwire.StatusQueued:
		return nil
	case fsmwire.StatusLocked:
		switch {
		case r.Holder.Session != 0:
		case r.DelayUntil != 0:
			return fmt.Errorf("%w: in lock-delay", fsmwire.ErrLocked)
		default:
			return fmt.Errorf("%w: held shared, or not enough permits free (%d)", fsmwire.ErrLocked, r.Count)
		}
		return fmt.Errorf("%w by session %d (%q) with token %d", fsmwire.ErrLocked, r.Holder.Session, r.Holder.Description, r.Holder.Token)
	case fsmwire.StatusNotHolder:
		return fsmwire.ErrNotHolder
	case fsmwire.StatusNoSession:
		return fsmwire.ErrNoSession
	case fsmwire.StatusInvalid:
		return fmt.Errorf("%w: %s", fsmwire.ErrInvalidCommand, r.Reason)
	case fsmwire.StatusStale:
		return fsmwire.ErrStale
	case fsmwire.StatusQuota:
		if r.Quota.Share() {
			return fmt.Errorf("%w: %w: %s: %s", fsmwire.ErrQuota, fsmwire.ErrFairShare, r.Quota, r.Reason)
		}
		return fmt.Errorf("%w: %s: %s", fsmwire.ErrQuota, r.Quota, r.Reason)
	case fsmwire.StatusConflict:
		return fmt.Errorf("%w: %s", fsmwire.ErrConflict, r.Reason)
	}
	return fmt.Errorf("%w: unknown status %d", fsmwire.ErrInvalidCommand, r.Status)
}

// Response is what Apply returns for one log entry: one Result per command, in
// order. Err is set (wrapping ErrInvalidEntry) when the entry could not be
// decoded; then Results is nil and nothing changed.
type Response struct {
	Index   uint64
	Results []Result
	Err     error

	one [1]Result // backing array of Results for single-command entries
}
