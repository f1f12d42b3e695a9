package fsm

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"slices"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// snapWriter writes length-prefixed records and keeps a running CRC.
type snapWriter struct {
	bw  *bufio.Writer
	crc uint32
	rec []byte // the record being built
}

func (w *snapWriter) write(b []byte) {
	w.crc = crc32.Update(w.crc, crcTable, b)
	w.bw.Write(b) // a write error sticks in bw and is returned by Flush
}

// put writes the record built in w.rec and starts the next one.
func (w *snapWriter) put() {
	var n [binary.MaxVarintLen64]byte
	w.write(n[:binary.PutUvarint(n[:], uint64(len(w.rec)))])
	w.write(w.rec)
	w.rec = w.rec[:0]
}

// snapshotVersion is the format st is written in: version 2 from cluster
// version 2, and whenever the state holds something version 1 cannot carry.
func (st *state) snapshotVersion() byte {
	if st.version >= versionExactlyOnce || st.clusterID != "" || st.limits != (Limits{}) {
		return snapshotV2
	}
	for _, s := range st.sessions {
		if s.floor != 0 || len(s.results) > 0 {
			return snapshotV2
		}
	}
	for _, l := range st.locks {
		if l.delayFor != 0 || l.delayToken != 0 || (l.delayed && l.delayUntil == 0) {
			return snapshotV2
		}
	}
	return snapshotV1
}

func (st *state) encode(out io.Writer) error {
	v := st.snapshotVersion()
	w := &snapWriter{bw: bufio.NewWriterSize(out, 256<<10)}
	w.write([]byte{snapshotMagic[0], snapshotMagic[1], snapshotMagic[2], snapshotMagic[3], v})

	rec := binary.AppendUvarint(w.rec, st.index)
	rec = binary.AppendVarint(rec, st.clock)
	rec = binary.AppendUvarint(rec, st.sessionSeq)
	rec = binary.AppendUvarint(rec, st.tokenSeq)
	if v >= snapshotV2 {
		rec = binary.AppendUvarint(rec, st.version)
		rec = appendString(rec, st.clusterID)
		for _, x := range st.limits.fields() {
			rec = binary.AppendUvarint(rec, uint64(x))
		}
	}
	rec = binary.AppendUvarint(rec, uint64(len(st.sessions)))
	w.rec = binary.AppendUvarint(rec, uint64(len(st.locks)))
	w.put()

	for _, id := range slices.Sorted(maps.Keys(st.sessions)) {
		st.sessions[id].encode(w, v)
	}
	// Locks in creation order — the same on every replica, since it follows
	// the log — sorted by an integer held in the entry rather than by name:
	// no string comparisons, no pointer chasing.
	type entry struct {
		seq  uint64
		name string
		l    *lock
	}
	locks := make([]entry, 0, len(st.locks))
	for name, l := range st.locks {
		locks = append(locks, entry{l.seq, name, l})
	}
	slices.SortFunc(locks, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
	for _, e := range locks {
		e.l.encode(w, e.name, v)
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], w.crc)
	w.bw.Write(sum[:])
	if err := w.bw.Flush(); err != nil {
		return fmt.Errorf("fsm: write snapshot: %w", err)
	}
	return nil
}

func (s *session) encode(w *snapWriter, v byte) {
	rec := binary.AppendUvarint(w.rec, uint64(s.id))
	rec = binary.AppendVarint(rec, s.ttl)
	rec = binary.AppendVarint(rec, s.lockDelay)
	rec = binary.AppendVarint(rec, s.createdAt)
	rec = binary.AppendUvarint(rec, s.createdIdx)
	w.rec = appendString(rec, s.description)
	if v < snapshotV2 {
		w.put()
		return
	}
	w.rec = binary.AppendUvarint(w.rec, s.floor)
	w.rec = binary.AppendUvarint(w.rec, uint64(len(s.results)))
	rs := s.results
	for first := true; first || len(rs) > 0; first = false {
		n := min(len(rs), resultsPerRecord)
		w.rec = binary.AppendUvarint(w.rec, uint64(n))
		for _, e := range rs[:n] {
			w.rec = binary.AppendUvarint(w.rec, e.seq)
			w.rec = AppendResult(w.rec, e.res)
		}
		rs = rs[n:]
		w.put()
	}
}

func (l *lock) encode(w *snapWriter, name string, v byte) {
	rec := appendString(w.rec, name)
	var flags byte
	if l.held {
		flags |= flagHeld
	}
	if l.delayed {
		flags |= flagDelayed
	}
	rec = append(rec, flags)
	if l.held {
		rec = binary.AppendUvarint(rec, uint64(l.holder.session))
		rec = append(rec, l.holder.owner[:]...)
		rec = binary.AppendUvarint(rec, uint64(l.holder.token))
		rec = binary.AppendVarint(rec, l.holder.acquiredAt)
		rec = binary.AppendUvarint(rec, l.holder.acquiredIdx)
	}
	if l.delayed {
		rec = binary.AppendVarint(rec, l.delayUntil)
		if v >= snapshotV2 {
			rec = binary.AppendVarint(rec, l.delayFor)
			rec = binary.AppendUvarint(rec, uint64(l.delayToken))
		}
	}
	w.rec = binary.AppendUvarint(rec, uint64(l.waiters.len()))
	perRecord := waitersPerRecord
	if v < snapshotV2 {
		perRecord = l.waiters.len() // version 1: all in the lock record
	}
	n, left := 0, l.waiters.len()
	chunk := min(left, perRecord)
	if v >= snapshotV2 {
		w.rec = binary.AppendUvarint(w.rec, uint64(chunk))
	}
	for wt := range l.waiters.all() {
		if n == chunk { // next continuation record
			w.put()
			left -= n
			n, chunk = 0, min(left, perRecord)
			w.rec = binary.AppendUvarint(w.rec, uint64(chunk))
		}
		w.rec = binary.AppendUvarint(w.rec, uint64(wt.session))
		w.rec = append(w.rec, wt.owner[:]...)
		w.rec = binary.AppendVarint(w.rec, wt.enqueuedAt)
		w.rec = binary.AppendUvarint(w.rec, wt.enqueuedIx)
		n++
	}
	w.put()
}
