package fsm

import "fmt"

// Primitives beyond the mutex (cluster version 3): read-write locks,
// counting semaphores, values on grants, and a token floor for rebuilt
// clusters.
//
// # One name space, three kinds of grant
//
// A name is either a lock or a counting semaphore, fixed by the first
// acquisition while the name is in use (held or waited for) and forgotten
// once it is idle. A lock has at most one exclusive holder (Acquire, the
// mutex of earlier versions — the writer of a read-write lock) or any
// number of shared holders (Acquire with Shared: readers), never both. A
// semaphore of Limit permits (Acquire with Limit > 0) has holders of
// Permits each, at most Limit permits in all. An acquisition of another
// kind, or of a semaphore with another limit, gets StatusConflict: the
// contenders of a semaphore must agree on its limit.
//
// # FIFO without starvation
//
// Every name has one FIFO queue. A new acquisition is granted only if the
// queue is empty and the name admits it: exclusive — nothing held and no
// lock-delay; shared — no exclusive holder and no lock-delay; semaphore —
// the permits fit (used + Permits <= Limit). Otherwise it waits at the tail
// (or, without Wait, gets StatusLocked). Whenever a grant ends or a waiter
// leaves, the head of the queue is granted while the name admits it — the
// readers at the head together, up to the next writer. A waiting writer
// thus stops later readers (no writer starvation), and a large semaphore
// request at the head stops smaller ones behind it (no starvation of large
// requests).
//
// # Tokens
//
// Every grant of any kind takes the next value of the one grant counter,
// so tokens strictly increase across every grant of a name, whatever its
// kind. A writer's token is greater than the token of every reader granted
// before it and smaller than that of every reader granted after it; a
// reader's token is, likewise, between the writers before and after it. A
// resource can therefore check a read against the newest write it
// accepted (write token <= read token: no later writer has written yet),
// but readers must not record their tokens in a write fence: concurrent
// readers would reject each other.
//
// # Sessions, lock-delay
//
// Every grant belongs to its session and ends with it. Only the expiry of
// an exclusive holder starts a lock-delay (as before); the shared grants
// and the permits of an ended session are free at once.
//
// # Values
//
// An acquisition may attach a Value (at most MaxValueLen bytes) that its
// grant carries: every replica reads it with the holder (Holder.Value,
// events). SetValue replaces the value of a grant (etcd's Proclaim).
//
// # Tokens across a rebuilt cluster
//
// RaiseTokens (leader-only) raises the grant counter to at least the
// entry's leader time in microseconds. The leader proposes it at every
// takeover once the cluster version is 3. A cluster rebuilt from empty data
// dirs, restored from an older backup or recovered from a lost quorum
// thus continues above every token the old cluster can have granted, as
// long as the old cluster granted on average fewer than one token per
// microsecond since its own last raise and the new leader's clock is not
// behind the time the old cluster's last token was granted. The value is
// deterministic: the stamp is in the log.

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
