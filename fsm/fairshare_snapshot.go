package fsm

import (
	"cmp"
	"encoding/binary"
	"slices"
	"unicode/utf8"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// The fair shares' state in a version-4 snapshot: section 3, whose
// records are each a kind byte and its body, in this order:
//
//	1 limits   MaxLocks, MaxStateBytes, NodeShares, MaxSessionWaitersPerLock
//	           (uvarints; only when one is set)
//	2 session  id uvarint, node string, flags byte (bit 0: reserved)
//	           (sessions with a node or in a reserve, ascending id)
//	3 delay    lock name string, node string
//	           (lock-delays of a node other than "", ascending name)
//
// Everything else of the fair shares (the usage of each node, the counts
// of each queue) is derived from the state when it is read (recount). A
// state without any of it writes no section: the same bytes as before the
// shares existed.
const (
	fairSectionTag = 3

	fairRecordLimits  = 1
	fairRecordSession = 2
	fairRecordDelay   = 3
)

// prepareFairSection lists the section's records for st.
func prepareFairSection(st *state) (int, func(i int, rec []byte) []byte) {
	var sessions []*session
	for _, s := range st.sessions.all() {
		if s.node != "" || s.reserved {
			sessions = append(sessions, s)
		}
	}
	slices.SortFunc(sessions, func(a, b *session) int { return cmp.Compare(a.id, b.id) })
	type delay struct{ name, node string }
	var delays []delay
	for name := range st.delayed.keys() {
		if l := st.locks.get(name); l != nil && l.delayed && l.delayNode != "" {
			delays = append(delays, delay{name, l.delayNode})
		}
	}
	slices.SortFunc(delays, func(a, b delay) int { return cmp.Compare(a.name, b.name) })
	limits := 0
	if st.limits.fair() {
		limits = 1
	}
	encode := func(i int, rec []byte) []byte {
		if i < limits {
			l := st.limits
			rec = append(rec, fairRecordLimits)
			rec = binary.AppendUvarint(rec, uint64(l.MaxLocks))
			rec = binary.AppendUvarint(rec, uint64(l.MaxStateBytes))
			rec = binary.AppendUvarint(rec, uint64(l.NodeShares))
			return binary.AppendUvarint(rec, uint64(l.MaxSessionWaitersPerLock))
		}
		if i -= limits; i < len(sessions) {
			s := sessions[i]
			rec = append(rec, fairRecordSession)
			rec = binary.AppendUvarint(rec, uint64(s.id))
			rec = fsmwire.AppendString(rec, s.node)
			var flags byte
			if s.reserved {
				flags |= openReserved
			}
			return append(rec, flags)
		}
		d := delays[i-len(sessions)]
		rec = append(rec, fairRecordDelay)
		rec = fsmwire.AppendString(rec, d.name)
		return fsmwire.AppendString(rec, d.node)
	}
	return limits + len(sessions) + len(delays), encode
}

// beginFairSection returns the decoder of one snapshot's section: it
// checks the order of the records and what they name.
func beginFairSection(st *state) func(i, n int, d *decoder) {
	var (
		lastKind byte
		lastID   lockinfo.SessionID
		lastLock string
	)
	return func(i, n int, d *decoder) {
		kind := d.Byte()
		if d.Err == nil && (kind < lastKind || kind == fairRecordLimits && lastKind == fairRecordLimits) {
			d.Fail("record of kind %d after kind %d", kind, lastKind)
		}
		switch kind {
		case fairRecordLimits:
			l := &st.limits
			l.MaxLocks = d.limit()
			if v := d.Uvarint(); v > maxStateBytes {
				d.Fail("limit MaxStateBytes %d out of range", v)
			} else {
				l.MaxStateBytes = int64(v)
			}
			l.NodeShares, l.MaxSessionWaitersPerLock = d.limit(), d.limit()
			if d.Err == nil && (!l.fair() || l.Validate() != nil) {
				d.Fail("bad limits %+v", *l)
			}
		case fairRecordSession:
			id, node, flags := d.session(), d.String(maxNodeLen), d.Byte()
			if d.Err != nil {
				return
			}
			s := st.sessions.get(id)
			switch {
			case lastKind == fairRecordSession && id <= lastID:
				d.Fail("session %d after session %d", id, lastID)
			case s == nil:
				d.Fail("unknown session %d", id)
			case flags&^openReserved != 0:
				d.Fail("unknown session flags %#x", flags)
			case !utf8.ValidString(node) || node == "" && flags == 0:
				d.Fail("session %d: bad node", id)
			default:
				s.node, s.reserved = node, flags&openReserved != 0
			}
			lastID = id
		case fairRecordDelay:
			name, node := d.String(fsmwire.MaxLockNameLen), d.String(maxNodeLen)
			if d.Err != nil {
				return
			}
			l := st.locks.get(name)
			switch {
			case lastKind == fairRecordDelay && name <= lastLock:
				d.Fail("lock-delay of %q after %q", name, lastLock)
			case l == nil || !l.delayed:
				d.Fail("no lock-delay of %q", name)
			case node == "" || !utf8.ValidString(node):
				d.Fail("lock-delay of %q: bad node", name)
			default:
				l.delayNode = node
			}
			lastLock = name
		default:
			d.Fail("unknown record kind %d", kind)
		}
		lastKind = kind
	}
}
