package fsm

import "fmt"

// Status is the outcome of one command.
type Status uint8

// Command outcomes.
const (
	// StatusOK: the command took effect (sessions, release, tick).
	StatusOK Status = iota + 1
	// StatusGranted: the acquisition holds the lock; Result.Token is its fencing token.
	StatusGranted
	// StatusQueued: the acquisition waits in the lock's FIFO queue at Result.Position.
	StatusQueued
	// StatusLocked: the lock is held (Result.Holder) or in lock-delay
	// (Result.DelayUntil) and the caller did not ask to wait.
	StatusLocked
	// StatusNotHolder: the owner neither holds nor waits for the lock.
	StatusNotHolder
	// StatusNoSession: the session does not exist (any more).
	StatusNoSession
	// StatusInvalid: the command's arguments are invalid (Result.Reason says why).
	StatusInvalid
	// StatusStale: the request number is below its session's ack floor (the
	// client already acknowledged it): a delayed duplicate, not applied.
	StatusStale
	// StatusQuota: a replicated quota refused the command (Result.Quota says
	// which, Result.Reason the figures); nothing changed.
	StatusQuota
	// StatusConflict (cluster version 3): the name is in use as another
	// kind (a lock asked for as a semaphore, or the reverse) or as a
	// semaphore of another limit (Result.Count is its limit, Reason says).
	StatusConflict
	maxStatus = StatusConflict
)

func (s Status) String() string {
	switch s {
	case StatusOK:
		return "ok"
	case StatusGranted:
		return "granted"
	case StatusQueued:
		return "queued"
	case StatusLocked:
		return "locked"
	case StatusNotHolder:
		return "not-holder"
	case StatusNoSession:
		return "no-session"
	case StatusInvalid:
		return "invalid"
	case StatusStale:
		return "stale"
	case StatusQuota:
		return "quota"
	case StatusConflict:
		return "conflict"
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// Result is the outcome of one command. Which fields are set depends on
// Status; the others are zero.
type Result struct {
	Status     Status
	Session    SessionID // OpenSession: the new id
	Token      Token     // Granted: the fencing token
	Position   int       // Queued: 1-based place in the FIFO queue
	Holder     Holder    // Locked: the current exclusive holder (zero while in lock-delay without one, or held shared)
	DelayUntil int64     // Locked: end of the lock-delay, if that is why
	Count      int       // ExpireSessions: sessions expired; Tick, EndDelay: delays ended; Locked (semaphore): permits free; Conflict: the limit in force
	Reason     string    // Invalid, Quota: what is wrong
	Quota      Quota     // Quota: which quota refused the command
}

// Err maps the status to a sentinel error: nil for OK, Granted and Queued;
// ErrLocked, ErrNotHolder, ErrNoSession, ErrInvalidCommand, ErrStale,
// ErrQuota (and ErrFairShare for a share) or ErrConflict otherwise.
func (r Result) Err() error {
	switch r.Status {
	case StatusOK, StatusGranted, StatusQueued:
		return nil
	case StatusLocked:
		switch {
		case r.Holder.Session != 0:
		case r.DelayUntil != 0:
			return fmt.Errorf("%w: in lock-delay", ErrLocked)
		default:
			return fmt.Errorf("%w: held shared, or not enough permits free (%d)", ErrLocked, r.Count)
		}
		return fmt.Errorf("%w by session %d (%q) with token %d", ErrLocked, r.Holder.Session, r.Holder.Description, r.Holder.Token)
	case StatusNotHolder:
		return ErrNotHolder
	case StatusNoSession:
		return ErrNoSession
	case StatusInvalid:
		return fmt.Errorf("%w: %s", ErrInvalidCommand, r.Reason)
	case StatusStale:
		return ErrStale
	case StatusQuota:
		if r.Quota.share() {
			return fmt.Errorf("%w: %w: %s: %s", ErrQuota, ErrFairShare, r.Quota, r.Reason)
		}
		return fmt.Errorf("%w: %s: %s", ErrQuota, r.Quota, r.Reason)
	case StatusConflict:
		return fmt.Errorf("%w: %s", ErrConflict, r.Reason)
	}
	return fmt.Errorf("%w: unknown status %d", ErrInvalidCommand, r.Status)
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
