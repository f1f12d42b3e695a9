package fsmwire

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Hard limits on command arguments. Commands outside them are refused with
// ErrInvalidCommand and change nothing. (The replicated quotas of
// fsm.Limits are stricter, configurable bounds within these.)
const (
	MaxLockNameLen    = 512              // bytes
	MaxDescriptionLen = 256              // bytes
	MinTTL            = time.Millisecond // smallest session TTL the state machine accepts
	MaxTTL            = 24 * time.Hour   // largest session TTL
	MaxLockDelay      = time.Hour        // largest lock-delay
	MaxEntryCommands  = 1 << 16          // commands in one entry
	MaxExpireSessions = 1 << 16          // sessions in one ExpireSessions command (and locks in one EndDelay)
	MaxSemaphoreLimit = 1 << 20          // permits of one semaphore
	MaxValueLen       = 1024             // bytes of a grant's value
	MaxClusterIDLen   = 128              // bytes of a cluster id
	MaxReasonLen      = 1024             // bytes of a result's reason on the wire
	MaxGrants         = 4096             // grants in one encoded grant list
	// MaxRestoreStaged bounds the bytes staged for one restore: a backup
	// larger than this cannot be restored (a held lock takes about 60
	// bytes of a backup: about four million locks).
	MaxRestoreStaged = 256 << 20
)

// Defaults of fsm.DefaultLimits, and the hard bound of the request window.
const (
	DefaultMaxWaitersPerLock  = 10_000
	DefaultMaxLocksPerSession = 10_000
	DefaultMaxSessions        = 100_000
	DefaultRequestWindow      = 1024
	MaxRequestWindow          = 1 << 16
)

// ValidateLockName reports whether name is an acceptable lock name: non-empty,
// at most MaxLockNameLen bytes, valid UTF-8 without NUL bytes. These are the
// state machine's rules, applied to every entry and snapshot, so they stay
// as they were: a name that passed them once must apply the same way
// forever.
//
// Control characters (Unicode category Cc: C0, DEL, C1) are therefore
// accepted here, but refused in new names where callers ask for them — the
// lockapi acquisitions (ErrInvalidArgument) and the admin API's acquire
// (400) — because names are shown on operators' terminals, where ESC
// sequences act. Names already in the table (written by an older release,
// or through node.Apply) stay readable and revocable; the raftlock command
// shows them, and descriptions and reasons, with those characters escaped,
// and slog's text format quotes them in logs.
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

// ValidateClusterID reports whether id is an acceptable cluster id: 1 to
// MaxClusterIDLen bytes of printable ASCII.
func ValidateClusterID(id string) error {
	if id == "" || len(id) > MaxClusterIDLen || !utf8.ValidString(id) {
		return fmt.Errorf("%w: cluster id of %d bytes (want 1..%d)", ErrInvalidCommand, len(id), MaxClusterIDLen)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return fmt.Errorf("%w: cluster id %q is not printable ASCII", ErrInvalidCommand, id)
		}
	}
	return nil
}
