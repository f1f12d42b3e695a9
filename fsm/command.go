package fsm

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Limits on command arguments. Commands outside them are refused with
// ErrInvalidCommand and change nothing. (The replicated quotas of [Limits]
// are stricter, configurable bounds within these.)
const (
	MaxLockNameLen    = 512              // bytes
	MaxDescriptionLen = 256              // bytes
	MinTTL            = time.Millisecond // smallest session TTL the state machine accepts
	MaxTTL            = 24 * time.Hour   // largest session TTL
	MaxLockDelay      = time.Hour        // largest lock-delay
	MaxEntryCommands  = 1 << 16          // commands in one entry
	MaxExpireSessions = 1 << 16          // sessions in one ExpireSessions command (and locks in one EndDelay)
)

// Op is the type byte of a command on the wire. Values are part of the log
// format and must never be renumbered.
type Op uint8

// Command types. Ops 1-7 exist since entry version 1; 8-11 need entry
// version 2 (cluster version 2); 12-13 and OpRevoke (40, revoke.go) need
// entry version 3 (cluster version 3); 41-43 (the restore commands:
// RestoreChunk, RestoreCommit, RestoreAbort), 44-45 (the lapsed forms of
// CloseSession and Release, lapse.go), 46-47 (the forms of SetLimits and
// OpenSession of the fair shares, fairshare_codec.go; their Op is still
// OpSetLimits and OpOpenSession) and 48-49 (Renewed, Takeover, renewed.go)
// need entry version 4 (cluster version 4).
const (
	OpOpenSession       Op = 1
	OpCloseSession      Op = 2
	OpExpireSessions    Op = 3
	OpAcquire           Op = 4
	OpRelease           Op = 5
	OpTick              Op = 6
	OpNoop              Op = 7
	OpEndDelay          Op = 8
	OpSetLimits         Op = 9
	OpSetClusterVersion Op = 10
	OpInitCluster       Op = 11
	OpSetValue          Op = 12
	OpRaiseTokens       Op = 13
)

var opNames = [...]string{
	OpOpenSession: "OpenSession", OpCloseSession: "CloseSession", OpExpireSessions: "ExpireSessions",
	OpAcquire: "Acquire", OpRelease: "Release", OpTick: "Tick", OpNoop: "Noop", OpEndDelay: "EndDelay",
	OpSetLimits: "SetLimits", OpSetClusterVersion: "SetClusterVersion", OpInitCluster: "InitCluster",
	OpSetValue: "SetValue", OpRaiseTokens: "RaiseTokens", OpRevoke: "Revoke",
	opCloseLapsed: "CloseSession(lapsed)", opReleaseLapsed: "Release(lapsed)",
	opRestoreChunk: "RestoreChunk", opRestoreCommit: "RestoreCommit", opRestoreAbort: "RestoreAbort",
	opRenewed: "Renewed", opTakeover: "Takeover",
}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// LeaderOnly reports whether commands of this type are proposed by the
// leader itself (ExpireSessions, Tick, Noop, EndDelay, SetLimits,
// SetClusterVersion, InitCluster, RaiseTokens, the restore commands,
// Renewed, Takeover) and must be refused from clients.
func (o Op) LeaderOnly() bool {
	switch o {
	case OpOpenSession, OpCloseSession, OpAcquire, OpRelease, OpSetValue, OpRevoke, opCloseLapsed, opReleaseLapsed:
		return false
	}
	return true
}

// Command is one state machine command. The concrete types are
// [OpenSession], [CloseSession], [Acquire], [Release], [SetValue], [Revoke]
// (client commands) and [ExpireSessions], [Tick], [Noop], [EndDelay],
// [SetLimits], [SetClusterVersion], [InitCluster], [RaiseTokens],
// [RestoreChunk], [RestoreCommit], [RestoreAbort], [Renewed], [Takeover]
// (proposed by the leader); the set is closed.
type Command interface {
	// Op returns the command's type byte.
	Op() Op
	// Validate checks the arguments against the limits above. It does not
	// look at the state (nor at the replicated quotas).
	Validate() error
}

// Request numbers (exactly-once client commands, Raft client sessions as in
// Ongaro's thesis §6.3). CloseSession, Acquire, Release and SetValue carry the
// session's request sequence number Seq and the client's acknowledgement
// AckBelow: every request of the session with a lower Seq is finished from
// the client's point of view (answered, failed for good, or given up), so
// the state machine may forget its result. Per session the state machine
// keeps the ack floor F (the highest AckBelow seen; it never decreases) and
// the result of every executed request with Seq >= F:
//
//   - Seq < F: StatusStale, nothing changes (the client already
//     acknowledged this request: a delayed duplicate);
//   - Seq already executed: its original Result, nothing changes;
//   - Seq >= max(F, AckBelow) + the request window (Limits.RequestWindow):
//     StatusQuota (QuotaRequests), nothing changes;
//   - otherwise the command executes, its result is kept, F rises to
//     AckBelow and the results below F are dropped.
//
// Seq 0 means "no request number": the command executes every time it is
// applied (entries written before exactly-once, or while the cluster
// version is 1). AckBelow must not exceed Seq. A command of a session that
// does not exist returns StatusNoSession (session ids are never reused, so
// this also answers a duplicate delivered after the session ended).

// OpenSession creates a session. Result: StatusOK with the new session id,
// or StatusQuota (QuotaSessions, QuotaNodeSessions, QuotaStateBytes,
// QuotaNodeBytes).
type OpenSession struct {
	TTL         time.Duration // how long the session lives without a keepalive
	LockDelay   time.Duration // after expiry, how long its locks stay ungranted (0 = none)
	Description string        // who owns it (node, process, free text)
	// Node is the node the request came from, for the fair shares
	// (cluster version 4, see fairshare.go). The leader sets it; whatever
	// a client puts here is replaced. At most 128 bytes.
	Node string
	// Reserved (cluster version 4) lets the session open in its node's
	// reserve — a few sessions each node may hold beyond its share and the
	// cluster's MaxSessions — when a session quota refuses it otherwise:
	// for a replica's own housekeeping session (the admin server's).
	Reserved bool
}

// maxNodeLen bounds OpenSession.Node.
const maxNodeLen = 128

// CloseSession ends a session voluntarily: it releases the locks the session
// holds (with no lock-delay) and drops its waits. Result: StatusOK, or
// StatusNoSession (never opened, already closed or expired — also the answer
// to a duplicate of a CloseSession that executed). With Seq set it is
// exactly-once (see above). With Lapsed (cluster version 4) the session
// ends as if it had expired: the client found its validity lapsed (see
// lapse.go).
type CloseSession struct {
	Session  SessionID
	Seq      uint64 // request number; 0: none
	AckBelow uint64 // every request of the session below it is finished
	Lapsed   bool   // cluster version 4: expiry semantics (lock-delay)
}

// Acquire asks for a lock on behalf of a session. Free → StatusGranted with a
// new token. Held (or in lock-delay) and Wait → StatusQueued at the tail of
// the FIFO queue. Held and not Wait → StatusLocked with the holder. Quotas
// (lock name length, waiters per lock, locks per session) → StatusQuota.
// Idempotent on (Lock, Owner): a new request for an acquisition that exists
// returns its current status — the same token, or the current queue
// position — never a second grant or a second queue slot. With Seq set it
// is also exactly-once: a duplicate of an executed request returns the
// original result even if the acquisition has since been released or
// withdrawn, so a released or withdrawn acquisition is never granted again.
//
// From cluster version 3 (see the package doc) an Acquire can also ask for a
// shared (read) grant of the lock (Shared), for Permits of a counting
// semaphore of Limit permits (Limit > 0), and attach a Value to its grant.
// Every grant of any kind takes the next token. A name in use as another
// kind, or as a semaphore of another limit → StatusConflict.
type Acquire struct {
	Session  SessionID
	Lock     string
	Owner    OwnerID
	Wait     bool
	Shared   bool   // cluster version 3: a read grant (many readers or one exclusive holder)
	Limit    int    // cluster version 3: > 0: Lock is a counting semaphore of Limit permits
	Permits  int    // cluster version 3, with Limit: the permits asked for, 1..Limit
	Value    string // cluster version 3: the grant's value (at most MaxValueLen bytes)
	Seq      uint64 // request number; 0: none
	AckBelow uint64 // every request of the session below it is finished
}

// Release is a compare-and-delete: if Owner holds Lock the lock is released
// and passed to the next live waiter in the same entry; if Owner waits for
// Lock it is dequeued. Result: StatusOK, or StatusNotHolder if Owner neither
// holds nor waits for Lock. With Session set, the acquisition must also
// belong to that session (else StatusNotHolder), and StatusNoSession is the
// answer when the session no longer exists (its acquisitions ended with
// it). Session is required with Seq (exactly-once, see above), and with
// Lapsed (cluster version 4): the acquisition ends as on its session's
// expiry — an exclusive grant enters the session's lock-delay (see
// lapse.go).
type Release struct {
	Session  SessionID // the acquisition's session; 0: not checked (entry version 1)
	Lock     string
	Owner    OwnerID
	Seq      uint64 // request number; 0: none
	AckBelow uint64 // every request of the session below it is finished
	Lapsed   bool   // cluster version 4: expiry semantics (lock-delay)
}

// Op implements Command.
func (OpenSession) Op() Op { return OpOpenSession }

// Op implements Command.
func (c CloseSession) Op() Op {
	if c.Lapsed {
		return opCloseLapsed
	}
	return OpCloseSession
}

// Op implements Command.
func (Acquire) Op() Op { return OpAcquire }

// Op implements Command.
func (c Release) Op() Op {
	if c.Lapsed {
		return opReleaseLapsed
	}
	return OpRelease
}

// Validate implements Command.
func (c OpenSession) Validate() error {
	if c.TTL < MinTTL || c.TTL > MaxTTL {
		return fmt.Errorf("%w: session TTL %v outside [%v, %v]", ErrInvalidCommand, c.TTL, MinTTL, MaxTTL)
	}
	if c.LockDelay < 0 || c.LockDelay > MaxLockDelay {
		return fmt.Errorf("%w: lock-delay %v outside [0, %v]", ErrInvalidCommand, c.LockDelay, MaxLockDelay)
	}
	if len(c.Node) > maxNodeLen || !utf8.ValidString(c.Node) {
		return fmt.Errorf("%w: node of %d bytes (want at most %d of UTF-8)", ErrInvalidCommand, len(c.Node), maxNodeLen)
	}
	return ValidateDescription(c.Description)
}

// Validate implements Command.
func (c CloseSession) Validate() error {
	if err := validateSession(c.Session); err != nil {
		return err
	}
	return validateRequest(c.Seq, c.AckBelow)
}

// Validate implements Command.
func (c Acquire) Validate() error {
	if err := validateAcquisitionOf(c.Session, c.Lock, c.Owner); err != nil {
		return err
	}
	if err := c.validateKind(); err != nil {
		return err
	}
	return validateRequest(c.Seq, c.AckBelow)
}

// validateAcquisitionOf checks what names an acquisition of a session.
func validateAcquisitionOf(s SessionID, lock string, o OwnerID) error {
	if err := validateSession(s); err != nil {
		return err
	}
	if err := ValidateLockName(lock); err != nil {
		return err
	}
	return validateOwner(o)
}

// Validate implements Command.
func (c Release) Validate() error {
	if err := ValidateLockName(c.Lock); err != nil {
		return err
	}
	if err := validateOwner(c.Owner); err != nil {
		return err
	}
	if c.Seq != 0 && c.Session == 0 {
		return fmt.Errorf("%w: a release with a request number needs its session", ErrInvalidCommand)
	}
	if err := validateLapsed(c); err != nil {
		return err
	}
	return validateRequest(c.Seq, c.AckBelow)
}

// request is what the exactly-once table needs of a client command.
type request struct {
	session       SessionID
	seq, ackBelow uint64
}

// requestOf returns the request number of an exactly-once command (false
// for commands without one).
func requestOf(c Command) (request, bool) {
	var r request
	switch c := c.(type) {
	case Acquire:
		r = request{c.Session, c.Seq, c.AckBelow}
	case Release:
		r = request{c.Session, c.Seq, c.AckBelow}
	case CloseSession:
		r = request{c.Session, c.Seq, c.AckBelow}
	case SetValue:
		r = request{c.Session, c.Seq, c.AckBelow}
	}
	return r, r.seq != 0
}

func validateRequest(seq, ackBelow uint64) error {
	switch {
	case ackBelow > seq:
		return fmt.Errorf("%w: AckBelow %d beyond the request's own Seq %d", ErrInvalidCommand, ackBelow, seq)
	case seq > maxSeq:
		return fmt.Errorf("%w: request number %d out of range", ErrInvalidCommand, seq)
	}
	return nil
}

// maxSeq bounds request numbers (so that Seq - floor never overflows).
const maxSeq = 1 << 62

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
	At       int64 // leader time when proposed, Unix nanoseconds (informational from cluster version 2)
	Commands []Command
}
