package fsm

import "fmt"

// Limits of the primitives' arguments.
const (
	MaxSemaphoreLimit = 1 << 20 // permits of one semaphore
	MaxValueLen       = 1024    // bytes of a grant's value
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
func (SetValue) Op() Op { return OpSetValue }

// Op implements Command.
func (RaiseTokens) Op() Op { return OpRaiseTokens }

// Validate implements Command.
func (c SetValue) Validate() error {
	if err := validateAcquisitionOf(c.Session, c.Lock, c.Owner); err != nil {
		return err
	}
	if err := ValidateValue(c.Value); err != nil {
		return err
	}
	return validateRequest(c.Seq, c.AckBelow)
}

// Validate implements Command.
func (RaiseTokens) Validate() error { return nil }

// ValidateValue reports whether v is an acceptable grant value: at most
// MaxValueLen bytes (of any content).
func ValidateValue(v string) error {
	if len(v) > MaxValueLen {
		return fmt.Errorf("%w: value of %d bytes (max %d)", ErrInvalidCommand, len(v), MaxValueLen)
	}
	return nil
}

// ValidateSemaphore reports whether permits of a semaphore of limit can be
// asked for: 1 <= permits <= limit <= MaxSemaphoreLimit.
func ValidateSemaphore(limit, permits int) error {
	switch {
	case limit < 1 || limit > MaxSemaphoreLimit:
		return fmt.Errorf("%w: semaphore limit %d outside [1, %d]", ErrInvalidCommand, limit, MaxSemaphoreLimit)
	case permits < 1 || permits > limit:
		return fmt.Errorf("%w: %d permits of a semaphore of %d", ErrInvalidCommand, permits, limit)
	}
	return nil
}

// validateKind checks the primitive fields of an Acquire.
func (c Acquire) validateKind() error {
	if err := ValidateValue(c.Value); err != nil {
		return err
	}
	switch {
	case c.Limit == 0 && c.Permits == 0:
		return nil
	case c.Shared:
		return fmt.Errorf("%w: a shared acquisition of a semaphore", ErrInvalidCommand)
	}
	return ValidateSemaphore(c.Limit, c.Permits)
}

// primitive reports whether an Acquire uses a field of cluster version 3.
func (c Acquire) primitive() bool {
	return c.Shared || c.Limit != 0 || c.Permits != 0 || c.Value != ""
}
