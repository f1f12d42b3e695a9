package fsm

import (
	"encoding/binary"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

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
	Session  lockinfo.SessionID
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
	Session  lockinfo.SessionID
	Lock     string
	Owner    lockinfo.OwnerID
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
	Session  lockinfo.SessionID // the acquisition's session; 0: not checked (entry version 1)
	Lock     string
	Owner    lockinfo.OwnerID
	Seq      uint64 // request number; 0: none
	AckBelow uint64 // every request of the session below it is finished
	Lapsed   bool   // cluster version 4: expiry semantics (lock-delay)
}

// op implements Command.
func (OpenSession) op() fsmwire.Op { return fsmwire.OpOpenSession }

// op implements Command.
func (c CloseSession) op() fsmwire.Op {
	if c.Lapsed {
		return fsmwire.OpCloseLapsed
	}
	return fsmwire.OpCloseSession
}

// op implements Command.
func (Acquire) op() fsmwire.Op { return fsmwire.OpAcquire }

// op implements Command.
func (c Release) op() fsmwire.Op {
	if c.Lapsed {
		return fsmwire.OpReleaseLapsed
	}
	return fsmwire.OpRelease
}

// validate implements Command.
func (c OpenSession) validate() error {
	if c.TTL < fsmwire.MinTTL || c.TTL > fsmwire.MaxTTL {
		return fmt.Errorf("%w: session TTL %v outside [%v, %v]", fsmwire.ErrInvalidCommand, c.TTL, fsmwire.MinTTL, fsmwire.MaxTTL)
	}
	if c.LockDelay < 0 || c.LockDelay > fsmwire.MaxLockDelay {
		return fmt.Errorf("%w: lock-delay %v outside [0, %v]", fsmwire.ErrInvalidCommand, c.LockDelay, fsmwire.MaxLockDelay)
	}
	if len(c.Node) > maxNodeLen || !utf8.ValidString(c.Node) {
		return fmt.Errorf("%w: node of %d bytes (want at most %d of UTF-8)", fsmwire.ErrInvalidCommand, len(c.Node), maxNodeLen)
	}
	return fsmwire.ValidateDescription(c.Description)
}

// validate implements Command.
func (c CloseSession) validate() error {
	if err := validateSession(c.Session); err != nil {
		return err
	}
	return validateRequest(c.Seq, c.AckBelow)
}

// validate implements Command.
func (c Acquire) validate() error {
	if err := validateAcquisitionOf(c.Session, c.Lock, c.Owner); err != nil {
		return err
	}
	if err := c.validateKind(); err != nil {
		return err
	}
	return validateRequest(c.Seq, c.AckBelow)
}

// validateAcquisitionOf checks what names an acquisition of a session.
func validateAcquisitionOf(s lockinfo.SessionID, lock string, o lockinfo.OwnerID) error {
	if err := validateSession(s); err != nil {
		return err
	}
	if err := fsmwire.ValidateLockName(lock); err != nil {
		return err
	}
	return validateOwner(o)
}

// validate implements Command.
func (c Release) validate() error {
	if err := fsmwire.ValidateLockName(c.Lock); err != nil {
		return err
	}
	if err := validateOwner(c.Owner); err != nil {
		return err
	}
	if c.Seq != 0 && c.Session == 0 {
		return fmt.Errorf("%w: a release with a request number needs its session", fsmwire.ErrInvalidCommand)
	}
	if err := validateLapsed(c); err != nil {
		return err
	}
	return validateRequest(c.Seq, c.AckBelow)
}

// request is what the exactly-once table needs of a client command.
type request struct {
	session       lockinfo.SessionID
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
		return fmt.Errorf("%w: AckBelow %d beyond the request's own Seq %d", fsmwire.ErrInvalidCommand, ackBelow, seq)
	case seq > maxSeq:
		return fmt.Errorf("%w: request number %d out of range", fsmwire.ErrInvalidCommand, seq)
	}
	return nil
}

// maxSeq bounds request numbers (so that Seq - floor never overflows).
const maxSeq = 1 << 62

func validateSession(s lockinfo.SessionID) error {
	if s == 0 {
		return fmt.Errorf("%w: zero session id", fsmwire.ErrInvalidCommand)
	}
	return nil
}

func validateOwner(o lockinfo.OwnerID) error {
	if o.IsZero() {
		return fmt.Errorf("%w: zero owner id", fsmwire.ErrInvalidCommand)
	}
	return nil
}

// Entry is the payload of one Raft log entry: the leader's timestamp and one or
// more commands, applied in order as if each were its own entry.
type Entry struct {
	At       int64 // leader time when proposed, Unix nanoseconds (informational from cluster version 2)
	Commands []Command
}

// version implements Command.
func (c OpenSession) version() byte {
	if fairForm(c) {
		return fsmwire.EntryV4
	}
	return fsmwire.EntryV1
}

// version implements Command.
func (c CloseSession) version() byte {
	switch {
	case c.Lapsed:
		return fsmwire.EntryV4
	case c.Seq != 0 || c.AckBelow != 0:
		return fsmwire.EntryV2
	}
	return fsmwire.EntryV1
}

// version implements Command.
func (c Acquire) version() byte {
	switch {
	case c.primitive():
		return fsmwire.EntryV3
	case c.Seq != 0 || c.AckBelow != 0:
		return fsmwire.EntryV2
	}
	return fsmwire.EntryV1
}

// version implements Command.
func (c Release) version() byte {
	switch {
	case c.Lapsed:
		return fsmwire.EntryV4
	case c.Session != 0 || c.Seq != 0 || c.AckBelow != 0:
		return fsmwire.EntryV2
	}
	return fsmwire.EntryV1
}

// appendTo implements Command.
func (c OpenSession) appendTo(dst []byte, _ byte) ([]byte, error) {
	if fairForm(c) {
		return appendFairForm(dst, c)
	}
	dst = append(dst, byte(fsmwire.OpOpenSession))
	if len(c.Description) > fsmwire.MaxDescriptionLen {
		return dst, errTooLong("description")
	}
	dst = binary.AppendVarint(dst, int64(c.TTL))
	dst = binary.AppendVarint(dst, int64(c.LockDelay))
	return fsmwire.AppendString(dst, c.Description), nil
}

// appendTo implements Command.
func (c CloseSession) appendTo(dst []byte, v byte) ([]byte, error) {
	dst = append(dst, byte(c.op()))
	dst = binary.AppendUvarint(dst, uint64(c.Session))
	if v >= fsmwire.EntryV2 {
		dst = fsmwire.AppendRequest(dst, c.Seq, c.AckBelow)
	}
	return dst, nil
}

// appendTo implements Command.
func (c Release) appendTo(dst []byte, v byte) ([]byte, error) {
	dst = append(dst, byte(c.op()))
	if len(c.Lock) > fsmwire.MaxLockNameLen {
		return dst, errTooLong("lock name")
	}
	if v >= fsmwire.EntryV2 {
		dst = binary.AppendUvarint(dst, uint64(c.Session))
	}
	dst = fsmwire.AppendString(dst, c.Lock)
	dst = append(dst, c.Owner[:]...)
	if v >= fsmwire.EntryV2 {
		dst = fsmwire.AppendRequest(dst, c.Seq, c.AckBelow)
	}
	return dst, nil
}

// exec implements Command.
func (c OpenSession) exec(a *applier) Result { return a.openSession(c) }

// exec implements Command.
func (c CloseSession) exec(a *applier) Result {
	if c.Lapsed {
		return a.closeSession(c.Session, fsmwire.ReasonSessionExpired)
	}
	return a.closeSession(c.Session, fsmwire.ReasonSessionClosed)
}

// exec implements Command.
func (c Acquire) exec(a *applier) Result { return a.acquire(c) }

// exec implements Command.
func (c Release) exec(a *applier) Result {
	if c.Lapsed {
		return a.releaseLapsed(c)
	}
	return a.release(c)
}

func decodeOpenSession(d *decoder, _ fsmwire.Op) Command {
	return OpenSession{
		TTL:         durationOf(d.Varint()),
		LockDelay:   durationOf(d.Varint()),
		Description: d.String(fsmwire.MaxDescriptionLen),
	}
}

// decodeCloseSession reads CloseSession (op 2) and its lapsed form (44,
// entry version 4, always with request numbers).
func decodeCloseSession(d *decoder, op fsmwire.Op) Command {
	c := CloseSession{Session: d.session(), Lapsed: op == fsmwire.OpCloseLapsed}
	if d.Version >= fsmwire.EntryV2 {
		c.Seq, c.AckBelow = d.Uvarint(), d.Uvarint()
	}
	return c
}

func decodeAcquire(d *decoder, _ fsmwire.Op) Command { return d.acquire() }

// decodeRelease reads Release (op 5) and its lapsed form (45, entry
// version 4).
func decodeRelease(d *decoder, op fsmwire.Op) Command {
	c := Release{Lapsed: op == fsmwire.OpReleaseLapsed}
	v2 := d.Version >= fsmwire.EntryV2
	if v2 {
		c.Session = d.session()
	}
	c.Lock, c.Owner = d.String(fsmwire.MaxLockNameLen), d.owner()
	if v2 {
		c.Seq, c.AckBelow = d.Uvarint(), d.Uvarint()
	}
	return c
}
