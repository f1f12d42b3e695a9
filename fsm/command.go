package fsm

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Limits on command arguments. Commands outside them are refused with
// ErrInvalidCommand and change nothing.
const (
	MaxLockNameLen    = 512              // bytes
	MaxDescriptionLen = 256              // bytes
	MinTTL            = time.Millisecond // smallest session TTL the state machine accepts
	MaxTTL            = 24 * time.Hour   // largest session TTL
	MaxLockDelay      = time.Hour        // largest lock-delay
	MaxEntryCommands  = 1 << 16          // commands in one entry
	MaxExpireSessions = 1 << 16          // sessions in one ExpireSessions command
)

// Op is the type byte of a command on the wire. Values are part of the log
// format and must never be renumbered.
type Op uint8

// Command types.
const (
	OpOpenSession    Op = 1
	OpCloseSession   Op = 2
	OpExpireSessions Op = 3
	OpAcquire        Op = 4
	OpRelease        Op = 5
	OpTick           Op = 6
	OpNoop           Op = 7
)

func (o Op) String() string {
	switch o {
	case OpOpenSession:
		return "OpenSession"
	case OpCloseSession:
		return "CloseSession"
	case OpExpireSessions:
		return "ExpireSessions"
	case OpAcquire:
		return "Acquire"
	case OpRelease:
		return "Release"
	case OpTick:
		return "Tick"
	case OpNoop:
		return "Noop"
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Command is one state machine command. The concrete types are
// [OpenSession], [CloseSession], [ExpireSessions], [Acquire], [Release],
// [Tick] and [Noop]; the set is closed.
type Command interface {
	// Op returns the command's type byte.
	Op() Op
	// Validate checks the arguments against the limits above. It does not
	// look at the state.
	Validate() error
}

// OpenSession creates a session. Result: StatusOK with the new session id.
type OpenSession struct {
	TTL         time.Duration // how long the session lives without a keepalive
	LockDelay   time.Duration // after expiry, how long its locks stay ungranted (0 = none)
	Description string        // who owns it (node, process, free text)
}

// CloseSession ends a session voluntarily: it releases the locks the session
// holds (with no lock-delay) and drops its waits. Result: StatusOK, or
// StatusNoSession.
type CloseSession struct {
	Session SessionID
}

// ExpireSessions ends sessions whose lease ran out; proposed by the leader.
// Like CloseSession, except that locks held by a session with a lock-delay
// enter that delay instead of passing to their next waiter. Unknown sessions
// are skipped. Result: StatusOK with Count = number of sessions expired.
type ExpireSessions struct {
	Sessions []SessionID
}

// Acquire asks for a lock on behalf of a session. Free → StatusGranted with a
// new token. Held (or in lock-delay) and Wait → StatusQueued at the tail of
// the FIFO queue. Held and not Wait → StatusLocked with the holder.
// Idempotent on (Lock, Owner): a retry returns the current status of that
// acquisition — the same token, or the current queue position — never a
// second grant or a second queue slot.
type Acquire struct {
	Session SessionID
	Lock    string
	Owner   OwnerID
	Wait    bool
}

// Release is a compare-and-delete: if Owner holds Lock the lock is released
// and passed to the next live waiter in the same entry; if Owner waits for
// Lock it is dequeued. Result: StatusOK, or StatusNotHolder if Owner neither
// holds nor waits for Lock.
type Release struct {
	Lock  string
	Owner OwnerID
}

// Tick ends every lock-delay that is over at the entry's time and grants the
// delayed locks to their waiters. Proposed by the leader. Result: StatusOK with
// Count = number of delays ended.
type Tick struct{}

// Noop changes nothing. The leader proposes one to carry a new commit index
// to its followers at once (see node). Result: StatusOK.
type Noop struct{}

// Op implements Command.
func (Noop) Op() Op { return OpNoop }

// Validate implements Command.
func (Noop) Validate() error { return nil }

// Op implements Command.
func (OpenSession) Op() Op { return OpOpenSession }

// Op implements Command.
func (CloseSession) Op() Op { return OpCloseSession }

// Op implements Command.
func (ExpireSessions) Op() Op { return OpExpireSessions }

// Op implements Command.
func (Acquire) Op() Op { return OpAcquire }

// Op implements Command.
func (Release) Op() Op { return OpRelease }

// Op implements Command.
func (Tick) Op() Op { return OpTick }

// Validate implements Command.
func (c OpenSession) Validate() error {
	if c.TTL < MinTTL || c.TTL > MaxTTL {
		return fmt.Errorf("%w: session TTL %v outside [%v, %v]", ErrInvalidCommand, c.TTL, MinTTL, MaxTTL)
	}
	if c.LockDelay < 0 || c.LockDelay > MaxLockDelay {
		return fmt.Errorf("%w: lock-delay %v outside [0, %v]", ErrInvalidCommand, c.LockDelay, MaxLockDelay)
	}
	return ValidateDescription(c.Description)
}

// Validate implements Command.
func (c CloseSession) Validate() error { return validateSession(c.Session) }

// Validate implements Command.
func (c ExpireSessions) Validate() error {
	if len(c.Sessions) > MaxExpireSessions {
		return fmt.Errorf("%w: %d sessions in one ExpireSessions (max %d)", ErrInvalidCommand, len(c.Sessions), MaxExpireSessions)
	}
	for _, s := range c.Sessions {
		if err := validateSession(s); err != nil {
			return err
		}
	}
	return nil
}

// Validate implements Command.
func (c Acquire) Validate() error {
	if err := validateSession(c.Session); err != nil {
		return err
	}
	if err := ValidateLockName(c.Lock); err != nil {
		return err
	}
	return validateOwner(c.Owner)
}

// Validate implements Command.
func (c Release) Validate() error {
	if err := ValidateLockName(c.Lock); err != nil {
		return err
	}
	return validateOwner(c.Owner)
}

// Validate implements Command.
func (Tick) Validate() error { return nil }

// ValidateLockName reports whether name is an acceptable lock name: non-empty,
// at most MaxLockNameLen bytes, valid UTF-8 without NUL bytes.
func ValidateLockName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty lock name", ErrInvalidCommand)
	case len(name) > MaxLockNameLen:
		return fmt.Errorf("%w: lock name of %d bytes (max %d)", ErrInvalidCommand, len(name), MaxLockNameLen)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: lock name is not valid UTF-8", ErrInvalidCommand)
	}
	for i := 0; i < len(name); i++ {
		if name[i] == 0 {
			return fmt.Errorf("%w: lock name contains a NUL byte", ErrInvalidCommand)
		}
	}
	return nil
}

// ValidateDescription reports whether d is an acceptable session description:
// at most MaxDescriptionLen bytes of valid UTF-8.
func ValidateDescription(d string) error {
	if len(d) > MaxDescriptionLen {
		return fmt.Errorf("%w: description of %d bytes (max %d)", ErrInvalidCommand, len(d), MaxDescriptionLen)
	}
	if !utf8.ValidString(d) {
		return fmt.Errorf("%w: description is not valid UTF-8", ErrInvalidCommand)
	}
	return nil
}

func validateSession(s SessionID) error {
	if s == 0 {
		return fmt.Errorf("%w: zero session id", ErrInvalidCommand)
	}
	return nil
}

func validateOwner(o OwnerID) error {
	if o.IsZero() {
		return fmt.Errorf("%w: zero owner id", ErrInvalidCommand)
	}
	return nil
}

// Entry is the payload of one Raft log entry: the leader's timestamp and one or
// more commands, applied in order as if each were its own entry.
type Entry struct {
	At       int64 // leader time when proposed, Unix nanoseconds
	Commands []Command
}
