package fsm

import (
	"encoding/binary"
	"fmt"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// The commands of cluster version 4 for the fair shares (fairshare.go) are
// two forms of existing commands, with type bytes of their own in entries
// of version 4 (the encoding is in codec.go's comment):
//
//   - SetLimits with a limit of version 4 (Limits.MaxLocks, MaxStateBytes,
//     NodeShares, MaxSessionWaitersPerLock): type byte 46;
//   - OpenSession with a Node or Reserved: type byte 47.
//
// A command of either form needs cluster version 4 (NeedsVersion); below
// it, Downgrade drops what the older form cannot carry — the limits of
// version 4 (the leader proposes them once the cluster is at 4), the node
// and the reserve (no shares before version 4). The older forms decode and
// apply as before.

// fairForm reports whether c needs its form of cluster version 4.
func fairForm(c Command) bool {
	switch c := c.(type) {
	case SetLimits:
		return c.Limits.fair()
	case OpenSession:
		return c.Node != "" || c.Reserved
	}
	return false
}

// withoutFairShares returns c without what needs cluster version 4.
func withoutFairShares(c Command) Command {
	switch c := c.(type) {
	case SetLimits:
		c.Limits = c.Limits.withoutFair()
		return c
	case OpenSession:
		c.Node, c.Reserved = "", false
		return c
	}
	return c
}

// openReserved is OpenSession's flag bit for Reserved.
const openReserved = 1

// appendFairForm appends the type byte and body of c in its form of
// cluster version 4.
func appendFairForm(dst []byte, c Command) ([]byte, error) {
	switch c := c.(type) {
	case SetLimits:
		dst = append(dst, byte(fsmwire.OpSetLimitsFair))
		l := c.Limits
		fields := l.fields()
		for _, x := range append(fields[:], l.MaxLocks, l.NodeShares, l.MaxSessionWaitersPerLock) {
			if x < 0 || x > maxQuota {
				return dst, fmt.Errorf("%w: limit %d out of range", fsmwire.ErrInvalidEntry, x)
			}
		}
		if l.MaxStateBytes < 0 || l.MaxStateBytes > maxStateBytes {
			return dst, fmt.Errorf("%w: limit MaxStateBytes %d out of range", fsmwire.ErrInvalidEntry, l.MaxStateBytes)
		}
		for _, x := range l.fields() {
			dst = binary.AppendUvarint(dst, uint64(x))
		}
		dst = binary.AppendUvarint(dst, uint64(l.MaxLocks))
		dst = binary.AppendUvarint(dst, uint64(l.MaxStateBytes))
		dst = binary.AppendUvarint(dst, uint64(l.NodeShares))
		return binary.AppendUvarint(dst, uint64(l.MaxSessionWaitersPerLock)), nil
	case OpenSession:
		if len(c.Description) > fsmwire.MaxDescriptionLen || len(c.Node) > maxNodeLen {
			return dst, fmt.Errorf("%w: description or node too long", fsmwire.ErrInvalidEntry)
		}
		dst = append(dst, byte(fsmwire.OpOpenSessionFair))
		dst = binary.AppendVarint(dst, int64(c.TTL))
		dst = binary.AppendVarint(dst, int64(c.LockDelay))
		dst = fsmwire.AppendString(dst, c.Description)
		dst = fsmwire.AppendString(dst, c.Node)
		var flags byte
		if c.Reserved {
			flags |= openReserved
		}
		return append(dst, flags), nil
	}
	return dst, fmt.Errorf("%w: %T has no form of cluster version 4", fsmwire.ErrInvalidEntry, c)
}

// fairForm decodes the body of a command of type byte op (46 or 47).
func decodeFairForm(d *decoder, op fsmwire.Op) Command {
	if op == fsmwire.OpSetLimitsFair {
		var l Limits
		d.limits(&l)
		l.MaxLocks = d.limit()
		if v := d.Uvarint(); v > maxStateBytes {
			d.Fail("limit MaxStateBytes %d out of range", v)
		} else {
			l.MaxStateBytes = int64(v)
		}
		l.NodeShares, l.MaxSessionWaitersPerLock = d.limit(), d.limit()
		if d.Err == nil && !l.fair() {
			d.Fail("SetLimits of version 4 without a limit of version 4")
		}
		return SetLimits{Limits: l}
	}
	c := OpenSession{TTL: durationOf(d.Varint()), LockDelay: durationOf(d.Varint()), Description: d.String(fsmwire.MaxDescriptionLen), Node: d.String(maxNodeLen)}
	switch flags := d.Byte(); {
	case flags&^openReserved != 0:
		d.Fail("unknown session flags %#x", flags)
	default:
		c.Reserved = flags&openReserved != 0
	}
	if d.Err == nil && !fairForm(c) {
		d.Fail("OpenSession of version 4 without a node or flags")
	}
	return c
}
