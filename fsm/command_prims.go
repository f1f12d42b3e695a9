package fsm

import (
	"fmt"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// SetValue replaces the value of the grant of Owner on Lock (the exclusive
// holder, a reader or a semaphore holder of Session). Result: StatusOK with
// the grant's Token, StatusNotHolder if Owner holds no grant of Lock for
// Session (a waiter has no grant yet), StatusNoSession, or StatusQuota
// when a longer value would pass Limits.MaxStateBytes or the node's share
// of it. Exactly-once with Seq, like every session command. Cluster
// version 3.
type SetValue struct {
	Session  SessionID
	Lock     string
	Owner    OwnerID
	Value    string // at most MaxValueLen bytes
	Seq      uint64 // request number; 0: none
	AckBelow uint64 // every request of the session below it is finished
}

// RaiseTokens raises the grant counter to at least the entry's leader time
// in microseconds (see "Tokens across a rebuilt cluster"); a counter
// already above it is unchanged. Proposed by the leader. Result: StatusOK
// with Token = the counter after the command. Cluster version 3.
type RaiseTokens struct{}

// Op implements Command.
func (SetValue) Op() fsmwire.Op { return fsmwire.OpSetValue }

// Op implements Command.
func (RaiseTokens) Op() fsmwire.Op { return fsmwire.OpRaiseTokens }

// Validate implements Command.
func (c SetValue) Validate() error {
	if err := validateAcquisitionOf(c.Session, c.Lock, c.Owner); err != nil {
		return err
	}
	if err := fsmwire.ValidateValue(c.Value); err != nil {
		return err
	}
	return validateRequest(c.Seq, c.AckBelow)
}

// Validate implements Command.
func (RaiseTokens) Validate() error { return nil }

// validateKind checks the primitive fields of an Acquire.
func (c Acquire) validateKind() error {
	if err := fsmwire.ValidateValue(c.Value); err != nil {
		return err
	}
	switch {
	case c.Limit == 0 && c.Permits == 0:
		return nil
	case c.Shared:
		return fmt.Errorf("%w: a shared acquisition of a semaphore", fsmwire.ErrInvalidCommand)
	}
	return fsmwire.ValidateSemaphore(c.Limit, c.Permits)
}

// primitive reports whether an Acquire uses a field of cluster version 3.
func (c Acquire) primitive() bool {
	return c.Shared || c.Limit != 0 || c.Permits != 0 || c.Value != ""
}
