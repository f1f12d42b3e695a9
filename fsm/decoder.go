package fsm

import "github.com/raftlock/raftlock/internal/fsmwire"

// decoder reads the state machine's encodings: fsmwire.Decoder's
// primitives and the values of this package built on them.
type decoder struct {
	fsmwire.Decoder
}

// newDecoder returns a decoder of b.
func newDecoder(b []byte) decoder { return decoder{fsmwire.Decoder{B: b}} }

func (d *decoder) owner() OwnerID { return OwnerID(d.ID()) }

func (d *decoder) session() SessionID { return SessionID(d.Session()) }

// sessions reads a session list (ExpireSessions, Renewed): nil when empty.
func (d *decoder) sessions() []SessionID {
	n := d.Count(fsmwire.MaxExpireSessions, 1)
	if n == 0 {
		return nil
	}
	ids := make([]SessionID, n)
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

func (d *decoder) command() Command {
	op := fsmwire.Op(d.Byte())
	if d.Err != nil {
		return nil
	}
	v2 := d.Version >= fsmwire.EntryV2
	switch {
	case op == fsmwire.OpOpenSession:
		return OpenSession{
			TTL:         durationOf(d.Varint()),
			LockDelay:   durationOf(d.Varint()),
			Description: d.String(fsmwire.MaxDescriptionLen),
		}
	case op == fsmwire.OpCloseSession:
		c := CloseSession{Session: d.session()}
		if v2 {
			c.Seq, c.AckBelow = d.Uvarint(), d.Uvarint()
		}
		return c
	case op == fsmwire.OpExpireSessions:
		return ExpireSessions{Sessions: d.sessions()}
	case op == fsmwire.OpAcquire:
		return d.acquire()
	case op == fsmwire.OpRelease:
		var c Release
		if v2 {
			c.Session = d.session()
		}
		c.Lock, c.Owner = d.String(fsmwire.MaxLockNameLen), d.owner()
		if v2 {
			c.Seq, c.AckBelow = d.Uvarint(), d.Uvarint()
		}
		return c
	case op == fsmwire.OpTick:
		return Tick{}
	case op == fsmwire.OpNoop:
		return Noop{}
	case op == fsmwire.OpEndDelay && v2:
		n := d.Count(fsmwire.MaxExpireSessions, 2)
		var c EndDelay
		if n > 0 {
			c.Delays = make([]DelayRef, n)
			for i := range c.Delays {
				c.Delays[i] = DelayRef{Lock: d.String(fsmwire.MaxLockNameLen), Token: Token(d.Uvarint())}
			}
		}
		return c
	case op == fsmwire.OpSetLimits && v2:
		var l Limits
		d.limits(&l)
		return SetLimits{Limits: l}
	case op == fsmwire.OpSetClusterVersion && v2:
		return SetClusterVersion{Version: d.Uvarint()}
	case op == fsmwire.OpInitCluster && v2:
		return InitCluster{ID: d.String(fsmwire.MaxClusterIDLen)}
	case op == fsmwire.OpRevoke && d.Version >= fsmwire.EntryV3:
		return d.revokeBody()
	case op == fsmwire.OpSetValue && d.Version >= fsmwire.EntryV3:
		c := SetValue{Session: d.session(), Lock: d.String(fsmwire.MaxLockNameLen), Owner: d.owner(), Value: d.String(fsmwire.MaxValueLen)}
		c.Seq, c.AckBelow = d.Uvarint(), d.Uvarint()
		return c
	case op == fsmwire.OpRaiseTokens && d.Version >= fsmwire.EntryV3:
		return RaiseTokens{}
	case op == fsmwire.OpCloseLapsed && d.Version >= fsmwire.EntryV4:
		c := CloseSession{Session: d.session(), Lapsed: true}
		c.Seq, c.AckBelow = d.Uvarint(), d.Uvarint()
		return c
	case op == fsmwire.OpRenewed && d.Version >= fsmwire.EntryV4:
		return Renewed{Sessions: d.sessions()}
	case op == fsmwire.OpTakeover && d.Version >= fsmwire.EntryV4:
		return Takeover{}
	case op == fsmwire.OpReleaseLapsed && d.Version >= fsmwire.EntryV4:
		c := Release{Session: d.session(), Lock: d.String(fsmwire.MaxLockNameLen), Owner: d.owner(), Lapsed: true}
		c.Seq, c.AckBelow = d.Uvarint(), d.Uvarint()
		return c
	case (op == fsmwire.OpSetLimitsFair || op == fsmwire.OpOpenSessionFair) && d.Version >= fsmwire.EntryV4:
		return d.fairForm(op)
	case (op == fsmwire.OpRestoreChunk || op == fsmwire.OpRestoreCommit || op == fsmwire.OpRestoreAbort) && d.Version >= fsmwire.EntryV4:
		return d.restoreBody(op)
	}
	d.Off--
	d.Unsupported("command type %d in an entry of version %d", uint8(op), d.Version)
	return nil
}
