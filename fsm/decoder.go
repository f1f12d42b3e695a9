package fsm

import (
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// decoder reads the state machine's encodings: fsmwire.Decoder's
// primitives and the values of this package built on them.
type decoder struct {
	fsmwire.Decoder
}

// newDecoder returns a decoder of b.
func newDecoder(b []byte) decoder { return decoder{fsmwire.Decoder{B: b}} }

func (d *decoder) owner() lockinfo.OwnerID { return lockinfo.OwnerID(d.ID()) }

func (d *decoder) session() lockinfo.SessionID { return lockinfo.SessionID(d.Session()) }

// sessions reads a session list (ExpireSessions, Renewed): nil when empty.
func (d *decoder) sessions() []lockinfo.SessionID {
	n := d.Count(fsmwire.MaxExpireSessions, 1)
	if n == 0 {
		return nil
	}
	ids := make([]lockinfo.SessionID, n)
	for i := range ids {
		ids[i] = d.session()
	}
	return ids
}

// limit reads one field of Limits.
func (d *decoder) limit() int {
	v := d.Uvarint()
	if v > maxQuota {
		d.Fail("limit %d out of range", v)
		return 0
	}
	return int(v)
}

// limits reads the five limits of version 2 into l.
func (d *decoder) limits(l *Limits) {
	l.MaxLockNameLen, l.MaxWaitersPerLock, l.MaxLocksPerSession = d.limit(), d.limit(), d.limit()
	l.MaxSessions, l.RequestWindow = d.limit(), d.limit()
}

func (d *decoder) acquire() Acquire {
	c := Acquire{Session: d.session(), Lock: d.String(fsmwire.MaxLockNameLen), Owner: d.owner()}
	flags := d.Byte()
	known := byte(acquireWait)
	if d.Version >= fsmwire.EntryV3 {
		known |= acquireShared | acquireValue | acquirePermits
	}
	if flags&^known != 0 {
		d.Fail("unknown acquire flags %#x", flags)
	}
	c.Wait, c.Shared = flags&acquireWait != 0, flags&acquireShared != 0
	if d.Version >= fsmwire.EntryV2 {
		c.Seq, c.AckBelow = d.Uvarint(), d.Uvarint()
	}
	if flags&acquirePermits != 0 {
		c.Limit, c.Permits = d.limit(), d.limit()
		if d.Err == nil && c.Limit == 0 && c.Permits == 0 {
			d.Fail("permits flag without a limit or permits")
		}
	}
	if flags&acquireValue != 0 {
		if c.Value = d.String(fsmwire.MaxValueLen); d.Err == nil && c.Value == "" {
			d.Fail("value flag with an empty value")
		}
	}
	return c
}
