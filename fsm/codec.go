package fsm

import (
	"encoding/binary"
	"fmt"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Encoding of an entry (all integers varint-encoded as in encoding/binary):
//
//	version byte (1 to 4)
//	At       varint
//	n        uvarint, 1..MaxEntryCommands
//	n × (op byte, body)
//
// Bodies (version 1):
//
//	OpenSession     TTL varint, LockDelay varint, Description string
//	CloseSession    Session uvarint
//	ExpireSessions  n uvarint, n × Session uvarint
//	Acquire         Session uvarint, Lock string, Owner [16]byte, flags byte (bit 0: Wait)
//	Release         Lock string, Owner [16]byte
//	Tick, Noop      (empty)
//
// Version 2 extends three bodies with request numbers and adds four
// commands (every other body is as in version 1):
//
//	CloseSession       Session, Seq uvarint, AckBelow uvarint
//	Acquire            Session, Lock, Owner, flags, Seq uvarint, AckBelow uvarint
//	Release            Session uvarint, Lock, Owner, Seq uvarint, AckBelow uvarint
//	EndDelay           n uvarint, n × (Lock string, Token uvarint)
//	SetLimits          MaxLockNameLen, MaxWaitersPerLock, MaxLocksPerSession,
//	                   MaxSessions, RequestWindow (uvarints)
//	SetClusterVersion  Version uvarint
//	InitCluster        ID string
//
// Version 3 extends the Acquire body and adds two commands:
//
//	Acquire      Session, Lock, Owner, flags (bit 0 Wait, 1 Shared, 2 a Value
//	             follows, 3 Limit and Permits follow), Seq, AckBelow,
//	             [Limit uvarint, Permits uvarint], [Value string]
//	SetValue     Session uvarint, Lock string, Owner [16]byte, Value string,
//	             Seq uvarint, AckBelow uvarint
//	RaiseTokens  (empty)
//
// Flag bits 2 and 3 are set exactly when the fields are not zero (a
// canonical encoding); versions 1 and 2 know only bit 0.
//
// and Revoke (revoke.go):
//
//	Revoke             Lock string, Token uvarint, By string, Why string
//
// Version 4 adds the lapsed forms of CloseSession and Release (lapse.go),
// with the bodies of version 2:
//
//	CloseSession(lapsed)  op 44: Session, Seq uvarint, AckBelow uvarint
//	Release(lapsed)       op 45: Session uvarint, Lock, Owner, Seq, AckBelow
//
// and the forms of cluster version 4 of two commands (fairshare_codec.go),
// written exactly when they carry what the older form cannot:
//
//	SetLimits (46)     the 5 limits of version 2, MaxLocks, MaxStateBytes,
//	                   NodeShares, MaxSessionWaitersPerLock (uvarints)
//	OpenSession (47)   TTL, LockDelay, Description, Node string,
//	                   flags byte (bit 0: Reserved)
//
// and the restore commands (RestoreChunk, RestoreCommit, RestoreAbort,
// ops 41-43):
//
//	RestoreChunk       ID [16]byte, Offset uvarint, Total uvarint, Data bytes
//	RestoreCommit      ID [16]byte, Size uvarint
//	RestoreAbort       ID [16]byte
//
// and Renewed and Takeover (renewed.go):
//
//	Renewed            op 48: n uvarint, n × Session uvarint
//	Takeover           op 49: (empty)
//
// string = uvarint length + bytes. EncodeEntry writes the lowest version
// that carries every command of the entry, so an entry without request
// numbers or new commands reads the same to a replica of the previous
// release. (Which encodings the leader may write is decided by the cluster
// version: see Downgrade.) A hand-written format rather than msgpack: it is
// a third of the size, allocation-light on the apply path, has no
// reflection, and its decoder is small enough to fuzz exhaustively.

// EncodeEntry encodes e in the lowest entry version that can carry it. It
// fails only when e cannot be represented (no commands, too many, or a
// string or count longer than the decoder accepts); it does not validate
// the arguments' semantics (see Command.Validate).
func EncodeEntry(e Entry) ([]byte, error) {
	return AppendEntry(make([]byte, 0, 16+40*len(e.Commands)), e)
}

// AppendEntry appends the encoding of e to dst (see EncodeEntry).
func AppendEntry(dst []byte, e Entry) ([]byte, error) {
	return appendEntryVersion(dst, e, entryVersion(e))
}

// EntryVersion returns the lowest entry version that can carry every
// command of e.
func entryVersion(e Entry) byte {
	v := fsmwire.EntryV1
	for _, c := range e.Commands {
		if c != nil { // refused by appendEntryVersion
			v = max(v, c.version())
		}
	}
	return v
}

// appendEntryVersion appends the encoding of e in entry version v, which
// must be able to carry every command (see EntryVersion).
func appendEntryVersion(dst []byte, e Entry, v byte) ([]byte, error) {
	if len(e.Commands) == 0 || len(e.Commands) > fsmwire.MaxEntryCommands {
		return dst, fmt.Errorf("%w: %d commands in one entry (want 1..%d)", fsmwire.ErrInvalidEntry, len(e.Commands), fsmwire.MaxEntryCommands)
	}
	if v < fsmwire.EntryV1 || v > fsmwire.MaxEntryVersion || v < entryVersion(e) {
		return dst, fmt.Errorf("%w: entry version %d cannot carry these commands (needs %d)", fsmwire.ErrInvalidEntry, v, entryVersion(e))
	}
	dst = append(dst, v)
	dst = binary.AppendVarint(dst, e.At)
	dst = binary.AppendUvarint(dst, uint64(len(e.Commands)))
	for i, c := range e.Commands {
		var err error
		if dst, err = appendCommand(dst, c, v); err != nil {
			return dst, fmt.Errorf("command %d: %w", i, err)
		}
	}
	return dst, nil
}

func appendCommand(dst []byte, c Command, v byte) ([]byte, error) {
	if c == nil {
		return dst, fmt.Errorf("%w: nil command", fsmwire.ErrInvalidEntry)
	}
	return c.appendTo(dst, v)
}

// Acquire flags.
const (
	acquireWait    = 1
	acquireShared  = 2 // entry version 3
	acquireValue   = 4 // entry version 3
	acquirePermits = 8 // entry version 3
)

// appendTo implements Command.
func (c Acquire) appendTo(dst []byte, v byte) ([]byte, error) {
	return appendAcquire(append(dst, byte(fsmwire.OpAcquire)), c, v)
}

func appendAcquire(dst []byte, c Acquire, v byte) ([]byte, error) {
	switch {
	case len(c.Lock) > fsmwire.MaxLockNameLen || len(c.Value) > fsmwire.MaxValueLen:
		return dst, fmt.Errorf("%w: lock name or value too long", fsmwire.ErrInvalidEntry)
	case c.Limit < 0 || c.Limit > maxQuota || c.Permits < 0 || c.Permits > maxQuota:
		return dst, fmt.Errorf("%w: semaphore limit or permits out of range", fsmwire.ErrInvalidEntry)
	}
	dst = binary.AppendUvarint(dst, uint64(c.Session))
	dst = fsmwire.AppendString(dst, c.Lock)
	dst = append(dst, c.Owner[:]...)
	var flags byte
	if c.Wait {
		flags |= acquireWait
	}
	if c.Shared {
		flags |= acquireShared
	}
	if c.Value != "" {
		flags |= acquireValue
	}
	if c.Limit != 0 || c.Permits != 0 {
		flags |= acquirePermits
	}
	dst = append(dst, flags)
	if v >= fsmwire.EntryV2 {
		dst = fsmwire.AppendRequest(dst, c.Seq, c.AckBelow)
	}
	if flags&acquirePermits != 0 {
		dst = binary.AppendUvarint(dst, uint64(c.Limit))
		dst = binary.AppendUvarint(dst, uint64(c.Permits))
	}
	if flags&acquireValue != 0 {
		dst = fsmwire.AppendString(dst, c.Value)
	}
	return dst, nil
}

// appendSessions appends a session list (ExpireSessions, Renewed).
func appendSessions(dst []byte, ids []lockinfo.SessionID) ([]byte, error) {
	if len(ids) > fsmwire.MaxExpireSessions {
		return dst, fmt.Errorf("%w: session list too long", fsmwire.ErrInvalidEntry)
	}
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, s := range ids {
		dst = binary.AppendUvarint(dst, uint64(s))
	}
	return dst, nil
}

// fields lists the limits in their wire order.
func (l Limits) fields() [5]int {
	return [5]int{l.MaxLockNameLen, l.MaxWaitersPerLock, l.MaxLocksPerSession, l.MaxSessions, l.RequestWindow}
}

// DecodeEntry decodes an entry produced by EncodeEntry. Any malformed input —
// unknown version or command type, truncation, trailing bytes, oversized
// counts or strings, unknown flag bits — returns an error wrapping
// ErrInvalidEntry; an unknown version or command type also wraps
// ErrUnsupportedVersion. It never panics and allocates no more than the
// input size justifies.
func DecodeEntry(b []byte) (Entry, error) {
	d := newDecoder(b)
	v := d.Byte()
	if d.Err == nil && (v < fsmwire.EntryV1 || v > fsmwire.MaxEntryVersion) {
		return Entry{}, fmt.Errorf("%w: %w: entry version %d (this binary reads 1..%d)", fsmwire.ErrInvalidEntry, fsmwire.ErrUnsupportedVersion, v, fsmwire.MaxEntryVersion)
	}
	d.Version = v
	var e Entry
	e.At = d.Varint()
	n := d.Count(fsmwire.MaxEntryCommands, 1)
	if d.Err != nil {
		return Entry{}, d.Err
	}
	if n == 0 {
		return Entry{}, fmt.Errorf("%w: entry without commands", fsmwire.ErrInvalidEntry)
	}
	e.Commands = make([]Command, 0, n)
	for i := 0; i < n && d.Err == nil; i++ {
		if c := d.command(); d.Err == nil {
			e.Commands = append(e.Commands, c)
		}
	}
	if d.Err == nil && d.Off != len(d.B) {
		d.Fail("%d trailing bytes", len(d.B)-d.Off)
	}
	if d.Err != nil {
		return Entry{}, d.Err
	}
	return e, nil
}
