package lockapi

import (
	"errors"
	"fmt"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/textsafe"
)

// What the acquisitions of every kind share: options, argument checks and
// the conflict error. The kinds are Lock/TryLock (exclusive, lock.go),
// RLock/TryRLock (shared, rwlock.go) and Acquire/TryAcquire (permits of a
// semaphore, semaphore.go). They need cluster version 3 (except a plain
// Lock); before it they fail with an error wrapping ErrInvalidArgument.

// ErrConflict: the name is in use as another kind (a lock asked for as a
// semaphore, or the reverse) or as a semaphore of another limit. The error
// is a *ConflictError.
var ErrConflict = errors.New("lockapi: name in use as another kind or limit")

// ConflictError is returned when a name is in use as another kind, or as a
// semaphore of another limit. It wraps ErrConflict.
type ConflictError struct {
	Name   string
	Limit  int    // the semaphore's limit in force (0: the name is a lock)
	Reason string // the cluster's explanation
}

func (e *ConflictError) Error() string { return "lockapi: " + e.Reason }

// Unwrap makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Unwrap() error { return ErrConflict }

// AcquireOption configures one acquisition (Lock, RLock, Acquire and their
// Try forms). Options are opaque: only this package's With functions make
// them, and they set the acquisition's options, never what the call itself
// decides (the lock's name, shared or exclusive, a semaphore's limit and
// permits, waiting).
type AcquireOption func(*acquireOptions)

// acquireOptions is what AcquireOptions may set.
type acquireOptions struct {
	value string // WithValue
}

// WithValue attaches a value to the grant: every replica reads it with the
// holder (fsm.Holder.Value, Election.Leader, Lease.Value) until the grant
// ends or Lease.SetValue replaces it. At most fsm.MaxValueLen bytes; any
// content. A waiting acquisition carries it into its grant.
func WithValue(v string) AcquireOption { return func(o *acquireOptions) { o.value = v } }

// acquisition builds the command of an exclusive acquisition.
func acquisition(name string, wait bool, opts []AcquireOption) fsm.Acquire {
	var o acquireOptions
	for _, opt := range opts {
		opt(&o)
	}
	return fsm.Acquire{Lock: name, Wait: wait, Value: o.value}
}

// validateAcquisition checks what the caller chose, before anything is
// sent.
func validateAcquisition(a fsm.Acquire) error {
	if err := validateNewLockName(a.Lock); err != nil {
		return err
	}
	if err := fsmwire.ValidateValue(a.Value); err != nil {
		return invalid("value: %v", err)
	}
	if a.Limit != 0 || a.Permits != 0 {
		if err := fsmwire.ValidateSemaphore(a.Limit, a.Permits); err != nil {
			return invalid("semaphore %q: %v", a.Lock, err)
		}
	}
	return nil
}

// validateNewLockName checks a name a caller asks for: the state
// machine's rules (fsm.ValidateLockName) and no control characters, which
// the state machine still accepts for the entries already written.
func validateNewLockName(name string) error {
	if err := fsmwire.ValidateLockName(name); err != nil {
		return invalid("lock name: %v", err)
	}
	if r, at, ok := textsafe.Control(name); ok {
		return invalid("lock name %q: control character %U at byte %d (new names may not contain control characters)", name, r, at)
	}
	return nil
}

// kindName names what a lease holds, for errors and logs.
func (l *Lease) kindName() string {
	switch {
	case l.shared:
		return "read lock"
	case l.permits > 0:
		return fmt.Sprintf("%d permits of semaphore", l.permits)
	}
	return "lock"
}
