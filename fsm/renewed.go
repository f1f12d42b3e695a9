package fsm

import (
	"encoding/binary"
	"slices"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Renewals and takeover markers (cluster version 4): what a new leader needs
// to time a session from when it was last renewed in the log, so that a
// session that stopped renewing ends within a bound whatever the number of
// leader changes (the lease model's "item 9", internal/testing/model/lease).
//
// Keepalives are not logged: a leader keeps each session's deadline in
// memory. A new leader cannot know when the old one last acknowledged a
// keepalive, so without anything in the log it must give every session a
// fresh lease (TTL + election timeout) — and leaders that change faster
// than that keep a dead session alive for ever. With two facts in the state
// it does not have to:
//
//   - per session, renewedAt: the index of the last entry that renewed it in
//     the log — its OpenSession, the latest Renewed naming it, or the
//     restore that created it;
//   - the takeover markers: the indices of the entries that carried a
//     leader's takeover barrier at cluster version 4 (Takeover: a command
//     of its own, so that nothing else — a version-1 Tick applied after
//     the version was raised, say — can ever be taken for one), the newest
//     maxMarkers of them.
//
// A session is marked when a marker follows its renewedAt; its origin is
// the first such marker (the oldest kept, if that one was pruned: later,
// so a later deadline — safe). Every replica records, in memory, when it
// applied each marker (EventMarker); a new leader gives a marked session
// the deadline markerApplied[origin] + TTL + election timeout instead of
// now + TTL + election timeout, and a keepalive of a marked session is
// acknowledged only once a Renewed entry naming it, proposed after the
// keepalive arrived, has committed — one small record per live session
// per leader term, none while the leader stays. The node's doc states the
// protocol and its bound; the state machine only keeps the facts.

// versionRenewed is the cluster version from which Renewed and Takeover may
// be written and applied.
const versionRenewed uint64 = 4

// maxMarkers is how many takeover markers the state keeps (the newest).
const maxMarkers = 64

// renewalsPerRecord is how many (session, renewedAt) pairs one record of
// the renewals snapshot section carries (about 20 bytes each).
const renewalsPerRecord = 4096

// Renewed records that the leader renewed the named sessions: each live
// one's renewedAt becomes this entry's index (unknown sessions are
// skipped). Proposed by the leader (LeaderOnly) for the keepalives of
// marked sessions, cluster version 4. Result: StatusOK with Count =
// sessions renewed.
type Renewed struct {
	Sessions []lockinfo.SessionID
}

// Takeover is a new leader's takeover barrier from cluster version 4 (Tick
// before), and its takeover marker: every session not renewed since is
// timed by later leaders from when they applied it. Proposed by the leader
// (LeaderOnly). Result: StatusOK.
type Takeover struct{}

// op implements Command.
func (Renewed) op() fsmwire.Op { return fsmwire.OpRenewed }

// op implements Command.
func (Takeover) op() fsmwire.Op { return fsmwire.OpTakeover }

// validate implements Command.
func (Takeover) validate() error { return nil }

// validate implements Command.
func (c Renewed) validate() error { return validateSessionList(c, c.Sessions) }

// version implements Command.
func (Renewed) version() byte { return fsmwire.EntryV4 }

// version implements Command.
func (Takeover) version() byte { return fsmwire.EntryV4 }

// appendTo implements Command.
func (c Renewed) appendTo(dst []byte, _ byte) ([]byte, error) {
	return appendSessions(append(dst, byte(fsmwire.OpRenewed)), c.Sessions)
}

// appendTo implements Command.
func (Takeover) appendTo(dst []byte, _ byte) ([]byte, error) {
	return append(dst, byte(fsmwire.OpTakeover)), nil
}

// exec implements Command.
func (c Renewed) exec(a *applier) Result { return a.renewed(c.Sessions) }

// exec implements Command.
func (Takeover) exec(a *applier) Result { return a.takeover() }

func decodeRenewed(d *decoder, _ fsmwire.Op) Command { return Renewed{Sessions: d.sessions()} }

func decodeTakeover(*decoder, fsmwire.Op) Command { return Takeover{} }

// renewed applies Renewed.
func (a *applier) renewed(ids []lockinfo.SessionID) Result {
	n := 0
	for _, id := range ids {
		if s := a.st.mutSession(id); s != nil {
			s.renewedAt = a.index
			n++
		}
	}
	return Result{Status: fsmwire.StatusOK, Count: n}
}

// takeover records a takeover marker at this entry's index and tells the
// observer.
func (a *applier) takeover() Result {
	st := a.st
	if n := len(st.markers); n > 0 && st.markers[n-1] >= a.index {
		return Result{Status: fsmwire.StatusOK} // a second Takeover in one entry: one marker
	}
	drop := max(len(st.markers)+1-maxMarkers, 0)
	// A new slice: a frozen copy of the state shares the old one.
	m := make([]uint64, 0, len(st.markers)-drop+1)
	st.markers = append(append(m, st.markers[drop:]...), a.index)
	a.emit(Event{Kind: fsmwire.EventMarker})
	return Result{Status: fsmwire.StatusOK}
}

// origin returns the first kept marker after renewedAt, or 0 if none (the
// session is not marked).
func (st *state) origin(renewedAt uint64) uint64 {
	i, found := slices.BinarySearch(st.markers, renewedAt)
	if found {
		i++
	}
	if i < len(st.markers) {
		return st.markers[i]
	}
	return 0
}

// renewAllAt makes index the renewal of every session (a restore installed
// at index: the backup's indices are of another log). Cluster version 4
// only: below it renewedAt stays the OpenSession's index, which is all a
// snapshot of those versions carries.
func (st *state) renewAllAt(index uint64) {
	if st.version < versionRenewed {
		return
	}
	for _, s := range st.sessions.all() {
		s.renewedAt = index
	}
}

// renewalsSection is the snapshot section of the renewals: record 0 the
// kept markers (n, n × index, ascending), then the sessions whose renewedAt
// is not their OpenSession's index, in id order, renewalsPerRecord a
// record (every record full but the last): n, n × (session, renewedAt).
var renewalsSection = snapshotSection{tag: 2, name: "renewals", prepare: prepareRenewals, begin: beginRenewals}

// prepareRenewals lists the section's records for st.
func prepareRenewals(st *state) (int, func(i int, rec []byte) []byte) {
	var ids []lockinfo.SessionID
	for id, s := range st.sessions.all() {
		if s.renewedAt != s.createdIdx {
			ids = append(ids, id)
		}
	}
	if len(st.markers) == 0 && len(ids) == 0 {
		return 0, nil
	}
	slices.Sort(ids)
	encode := func(i int, rec []byte) []byte {
		if i == 0 {
			rec = binary.AppendUvarint(rec, uint64(len(st.markers)))
			for _, m := range st.markers {
				rec = binary.AppendUvarint(rec, m)
			}
			return rec
		}
		chunk := ids[(i-1)*renewalsPerRecord:]
		chunk = chunk[:min(len(chunk), renewalsPerRecord)]
		rec = binary.AppendUvarint(rec, uint64(len(chunk)))
		for _, id := range chunk {
			rec = binary.AppendUvarint(rec, uint64(id))
			rec = binary.AppendUvarint(rec, st.sessions.get(id).renewedAt)
		}
		return rec
	}
	return 1 + (len(ids)+renewalsPerRecord-1)/renewalsPerRecord, encode
}

// beginRenewals returns the decoder of one snapshot's renewals section.
func beginRenewals(st *state) func(i, n int, d *decoder) {
	var last lockinfo.SessionID // the last session read: ids ascend across records
	return func(i, n int, d *decoder) {
		if i == 0 {
			k := d.Count(maxMarkers, 1)
			st.markers = make([]uint64, 0, k)
			for j := 0; j < k && d.Err == nil; j++ {
				m := d.Uvarint()
				if d.Err == nil && (m == 0 || m > st.index || (j > 0 && m <= st.markers[j-1])) {
					d.Fail("marker %d out of order or beyond the applied index %d", m, st.index)
				}
				st.markers = append(st.markers, m)
			}
			return
		}
		k := d.Count(renewalsPerRecord, 2)
		if d.Err == nil && (k == 0 || (i < n-1 && k != renewalsPerRecord)) {
			d.Fail("%d renewals in record %d of %d", k, i, n)
		}
		for j := 0; j < k && d.Err == nil; j++ {
			id, at := d.session(), d.Uvarint()
			if d.Err != nil {
				return
			}
			s := st.sessions.get(id)
			switch {
			case id <= last:
				d.Fail("renewal of session %d out of order", id)
			case s == nil:
				d.Fail("renewal of unknown session %d", id)
			case at == s.createdIdx || at > st.index:
				d.Fail("session %d renewed at %d (opened at %d, applied %d)", id, at, s.createdIdx, st.index)
			default:
				s.renewedAt = at
				last = id
			}
		}
	}
}
