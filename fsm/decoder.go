package fsm

import (
	"encoding/binary"
	"fmt"
	"math"
)

// decoder reads from a byte slice. The first error sticks; later reads return
// zero values.
type decoder struct {
	b       []byte
	off     int
	err     error
	version byte // entry version, for command bodies
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format+" at byte %d", append([]any{ErrInvalidEntry}, append(args, d.off)...)...)
	}
}

func (d *decoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if d.off >= len(d.b) {
		d.fail("truncated")
		return 0
	}
	v := d.b[d.off]
	d.off++
	return v
}

func (d *decoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b[d.off:])
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.off += n
	return v
}

// count reads a uvarint element count, bounded by max and by the bytes left
// (each element takes at least minSize bytes), so that garbage cannot make
// the decoder allocate more than the input justifies.
func (d *decoder) count(max, minSize int) int {
	v := d.uvarint()
	if d.err != nil {
		return 0
	}
	if v > uint64(max) || v > uint64((len(d.b)-d.off)/minSize) {
		d.fail("count %d out of range", v)
		return 0
	}
	return int(v)
}

func (d *decoder) string(max int) string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(max) || n > uint64(len(d.b)-d.off) {
		d.fail("string of %d bytes out of range", n)
		return ""
	}
	s := string(d.b[d.off : d.off+int(n)])
	d.off += int(n)
	return s
}

// bytes reads a uvarint length and that many bytes (a copy), at most max.
func (d *decoder) bytes(max int) []byte {
	n := d.uvarint()
	if d.err != nil {
		return nil
	}
	if n > uint64(max) || n > uint64(len(d.b)-d.off) {
		d.fail("%d bytes out of range", n)
		return nil
	}
	b := make([]byte, n)
	copy(b, d.b[d.off:])
	d.off += int(n)
	return b
}

func (d *decoder) owner() (o OwnerID) {
	if d.err != nil {
		return o
	}
	if len(d.b)-d.off < len(o) {
		d.fail("truncated owner id")
		return o
	}
	copy(o[:], d.b[d.off:])
	d.off += len(o)
	return o
}

func (d *decoder) session() SessionID {
	v := d.uvarint()
	if v > math.MaxInt64 {
		d.fail("session id out of range")
	}
	return SessionID(v)
}

// sessions reads a session list (ExpireSessions, Renewed): nil when empty.
func (d *decoder) sessions() []SessionID {
	n := d.count(MaxExpireSessions, 1)
	if n == 0 {
		return nil
	}
	ids := make([]SessionID, n)
	for i := range ids {
		ids[i] = d.session()
	}
	return ids
}

// int reads a non-negative integer of at most MaxInt32.
func (d *decoder) int() int {
	v := d.uvarint()
	if v > math.MaxInt32 {
		d.fail("integer %d out of range", v)
		return 0
	}
	return int(v)
}

// limit reads one field of Limits.
func (d *decoder) limit() int {
	v := d.uvarint()
	if v > maxQuota {
		d.fail("limit %d out of range", v)
		return 0
	}
	return int(v)
}

// limits reads the five limits of version 2 into l.
func (d *decoder) limits(l *Limits) {
	l.MaxLockNameLen, l.MaxWaitersPerLock, l.MaxLocksPerSession = d.limit(), d.limit(), d.limit()
	l.MaxSessions, l.RequestWindow = d.limit(), d.limit()
}

// end reports the decoder's error, or an error if bytes are left over.
func (d *decoder) end() error {
	if d.err == nil && d.off != len(d.b) {
		d.fail("%d trailing bytes", len(d.b)-d.off)
	}
	return d.err
}

// unsupported fails with an error that halts the state machine.
func (d *decoder) unsupported(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %w: "+format+" at byte %d", append([]any{ErrInvalidEntry, ErrUnsupportedVersion}, append(args, d.off)...)...)
	}
}

func (d *decoder) acquire() Acquire {
	c := Acquire{Session: d.session(), Lock: d.string(MaxLockNameLen), Owner: d.owner()}
	flags := d.byte()
	known := byte(acquireWait)
	if d.version >= entryV3 {
		known |= acquireShared | acquireValue | acquirePermits
	}
	if flags&^known != 0 {
		d.fail("unknown acquire flags %#x", flags)
	}
	c.Wait, c.Shared = flags&acquireWait != 0, flags&acquireShared != 0
	if d.version >= entryV2 {
		c.Seq, c.AckBelow = d.uvarint(), d.uvarint()
	}
	if flags&acquirePermits != 0 {
		c.Limit, c.Permits = d.limit(), d.limit()
		if d.err == nil && c.Limit == 0 && c.Permits == 0 {
			d.fail("permits flag without a limit or permits")
		}
	}
	if flags&acquireValue != 0 {
		if c.Value = d.string(MaxValueLen); d.err == nil && c.Value == "" {
			d.fail("value flag with an empty value")
		}
	}
	return c
}

func (d *decoder) command() Command {
	op := Op(d.byte())
	if d.err != nil {
		return nil
	}
	v2 := d.version >= entryV2
	switch {
	case op == OpOpenSession:
		return OpenSession{
			TTL:         durationOf(d.varint()),
			LockDelay:   durationOf(d.varint()),
			Description: d.string(MaxDescriptionLen),
		}
	case op == OpCloseSession:
		c := CloseSession{Session: d.session()}
		if v2 {
			c.Seq, c.AckBelow = d.uvarint(), d.uvarint()
		}
		return c
	case op == OpExpireSessions:
		return ExpireSessions{Sessions: d.sessions()}
	case op == OpAcquire:
		return d.acquire()
	case op == OpRelease:
		var c Release
		if v2 {
			c.Session = d.session()
		}
		c.Lock, c.Owner = d.string(MaxLockNameLen), d.owner()
		if v2 {
			c.Seq, c.AckBelow = d.uvarint(), d.uvarint()
		}
		return c
	case op == OpTick:
		return Tick{}
	case op == OpNoop:
		return Noop{}
	case op == OpEndDelay && v2:
		n := d.count(MaxExpireSessions, 2)
		var c EndDelay
		if n > 0 {
			c.Delays = make([]DelayRef, n)
			for i := range c.Delays {
				c.Delays[i] = DelayRef{Lock: d.string(MaxLockNameLen), Token: Token(d.uvarint())}
			}
		}
		return c
	case op == OpSetLimits && v2:
		var l Limits
		d.limits(&l)
		return SetLimits{Limits: l}
	case op == OpSetClusterVersion && v2:
		return SetClusterVersion{Version: d.uvarint()}
	case op == OpInitCluster && v2:
		return InitCluster{ID: d.string(MaxClusterIDLen)}
	case op == OpRevoke && d.version >= entryV3:
		return d.revokeBody()
	case op == OpSetValue && d.version >= entryV3:
		c := SetValue{Session: d.session(), Lock: d.string(MaxLockNameLen), Owner: d.owner(), Value: d.string(MaxValueLen)}
		c.Seq, c.AckBelow = d.uvarint(), d.uvarint()
		return c
	case op == OpRaiseTokens && d.version >= entryV3:
		return RaiseTokens{}
	case op == opCloseLapsed && d.version >= entryV4:
		c := CloseSession{Session: d.session(), Lapsed: true}
		c.Seq, c.AckBelow = d.uvarint(), d.uvarint()
		return c
	case op == opRenewed && d.version >= entryV4:
		return Renewed{Sessions: d.sessions()}
	case op == opTakeover && d.version >= entryV4:
		return Takeover{}
	case op == opReleaseLapsed && d.version >= entryV4:
		c := Release{Session: d.session(), Lock: d.string(MaxLockNameLen), Owner: d.owner(), Lapsed: true}
		c.Seq, c.AckBelow = d.uvarint(), d.uvarint()
		return c
	case (op == opSetLimitsFair || op == opOpenSessionFair) && d.version >= entryV4:
		return d.fairForm(op)
	case (op == opRestoreChunk || op == opRestoreCommit || op == opRestoreAbort) && d.version >= entryV4:
		return d.restoreBody(op)
	}
	d.off--
	d.unsupported("command type %d in an entry of version %d", uint8(op), d.version)
	return nil
}
