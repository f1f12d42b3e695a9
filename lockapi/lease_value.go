package lockapi

import (
	"context"
	"fmt"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
)

// Shared reports whether the lease is a read grant (RLock).
func (l *Lease) Shared() bool { return l.shared }

// Permits returns the semaphore permits the lease holds (Acquire); 0 for a
// lock.
func (l *Lease) Permits() int { return l.permits }

// Value returns the value attached to the grant (WithValue, or the last
// SetValue that succeeded through this lease).
func (l *Lease) Value() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.value
}

// SetValue replaces the value attached to the grant (etcd's Proclaim):
// once it returns nil every replica reads the new value with the holder
// (after it applied the change). It fails with an error wrapping
// ErrNotHolder if the lease has ended (or the cluster no longer knows the
// grant), ErrNoQuorum if the cluster cannot commit before ctx ends, and
// ErrInvalidArgument for a value over fsm.MaxValueLen bytes (or before
// cluster version 3).
func (l *Lease) SetValue(ctx context.Context, v string) error {
	if err := fsmwire.ValidateValue(v); err != nil {
		return invalid("value: %v", err)
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("lockapi: set value of %s %q: %w: %w", l.kindName(), l.name, ErrNotHolder, err)
	}
	r, err := l.s.apply(ctx, fsm.SetValue{Lock: l.name, Owner: l.owner, Value: v})
	switch {
	case err != nil:
		return fmt.Errorf("lockapi: set value of %s %q: %w", l.kindName(), l.name, err)
	case r.Status == fsmwire.StatusNotHolder || r.Status == fsmwire.StatusNoSession:
		return fmt.Errorf("lockapi: set value of %s %q: %w", l.kindName(), l.name, ErrNotHolder)
	case r.Status != fsmwire.StatusOK:
		return fmt.Errorf("lockapi: set value of %s %q: %w", l.kindName(), l.name, r.Err())
	}
	l.mu.Lock()
	l.value = v
	l.mu.Unlock()
	return nil
}
