package fsm

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// snapChunk is how much encoded snapshot the writer gathers before it
// writes it out.
const snapChunk = 64 << 10

// snapWriter writes length-prefixed records in chunks of about snapChunk
// bytes, with one reused buffer and no allocation per record, and keeps a
// running CRC. (A writer may pace the encoding by taking its time over
// each chunk: node rests Raft's snapshots so.)
type snapWriter struct {
	out io.Writer
	buf []byte // encoded, not yet written
	crc uint32 // of everything written out
	rec []byte // the record being built
	err error  // the first write error: nothing more is written
}

func newSnapWriter(out io.Writer) *snapWriter {
	return &snapWriter{out: out, buf: make([]byte, 0, snapChunk+4<<10)}
}

// put appends the record built in w.rec and starts the next one.
func (w *snapWriter) put() {
	w.buf = binary.AppendUvarint(w.buf, uint64(len(w.rec)))
	w.buf = append(w.buf, w.rec...)
	w.rec = w.rec[:0]
	if len(w.buf) >= snapChunk {
		w.flush()
	}
}

// flush writes out what is buffered.
func (w *snapWriter) flush() {
	w.crc = crc32.Update(w.crc, crcTable, w.buf)
	if w.err == nil && len(w.buf) > 0 {
		_, w.err = w.out.Write(w.buf)
	}
	w.buf = w.buf[:0]
}

// finish writes out the rest and the CRC.
func (w *snapWriter) finish() error {
	w.flush()
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], w.crc)
	if w.err == nil {
		_, w.err = w.out.Write(sum[:])
	}
	if w.err != nil {
		return fmt.Errorf("fsm: write snapshot: %w", w.err)
	}
	return nil
}

// snapshotVersion is the format st is written in: version 3 from cluster
// version 3; version 2 from cluster version 2, and whenever the state holds
// something version 1 cannot carry.
func (st *state) snapshotVersion() byte {
	if st.version >= versionSections {
		return snapshotV4
	}
	if st.version >= versionPrimitives {
		return snapshotV3 // the version-3 commands need it (and need the cluster version)
	}
	if st.version >= versionExactlyOnce || st.clusterID != "" || st.limits != (Limits{}) {
		return snapshotV2
	}
	for _, s := range st.sessions.all() {
		if s.floor != 0 || len(s.results) > 0 {
			return snapshotV2
		}
	}
	for _, l := range st.locks.all() {
		if l.delayFor != 0 || l.delayToken != 0 || (l.delayed && l.delayUntil == 0) {
			return snapshotV2
		}
	}
	return snapshotV1
}

func (st *state) encode(out io.Writer) error { return st.encodeAs(out, st.snapshotVersion()) }

// encodeAs writes st in snapshot version v (which must be able to carry it).
func (st *state) encodeAs(out io.Writer, v byte) error {
	w := newSnapWriter(out)
	w.buf = append(w.buf, snapshotMagic...)
	w.buf = append(w.buf, v)

	rec := binary.AppendUvarint(w.rec, st.index)
	rec = binary.AppendVarint(rec, st.clock)
	rec = binary.AppendUvarint(rec, st.sessionSeq)
	rec = binary.AppendUvarint(rec, st.tokenSeq)
	if v >= snapshotV2 {
		rec = binary.AppendUvarint(rec, st.version)
		rec = fsmwire.AppendString(rec, st.clusterID)
		for _, x := range st.limits.fields() {
			rec = binary.AppendUvarint(rec, uint64(x))
		}
	}
	rec = binary.AppendUvarint(rec, uint64(st.sessions.len()))
	rec = binary.AppendUvarint(rec, uint64(st.locks.len()))
	var sections []sectionWrite
	if v >= snapshotV4 {
		sections = st.sectionsToWrite()
		rec = binary.AppendUvarint(rec, uint64(len(sections)))
	}
	w.rec = rec
	w.put()

	for _, id := range slices.Sorted(st.sessions.keys()) {
		st.sessions.get(id).encode(w, v)
	}
	// Locks in creation order — the same on every replica, since it follows
	// the log — sorted by an integer held in the entry rather than by name:
	// no string comparisons, no pointer chasing.
	type entry struct {
		seq  uint64
		name string
		l    *lock
	}
	locks := make([]entry, 0, st.locks.len())
	for name, l := range st.locks.all() {
		locks = append(locks, entry{l.seq, name, l})
	}
	slices.SortFunc(locks, func(a, b entry) int { return cmp.Compare(a.seq, b.seq) })
	for _, e := range locks {
		if w.err != nil {
			break // the sink failed: finish reports it
		}
		e.l.encode(w, e.name, v)
	}
	for _, sec := range sections {
		sec.write(w)
	}
	return w.finish()
}

func (s *session) encode(w *snapWriter, v byte) {
	rec := binary.AppendUvarint(w.rec, uint64(s.id))
	rec = binary.AppendVarint(rec, s.ttl)
	rec = binary.AppendVarint(rec, s.lockDelay)
	rec = binary.AppendVarint(rec, s.createdAt)
	rec = binary.AppendUvarint(rec, s.createdIdx)
	w.rec = fsmwire.AppendString(rec, s.description)
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
	rec := fsmwire.AppendString(w.rec, name)
	var flags byte
	if l.held {
		flags |= flagHeld
	}
	if l.delayed {
		flags |= flagDelayed
	}
	if l.limit > 0 {
		flags |= flagSemaphore
	}
	rec = append(rec, flags)
	if l.held {
		rec = appendHolder(rec, l.holder, v)
	}
	if l.delayed {
		rec = binary.AppendVarint(rec, l.delayUntil)
		if v >= snapshotV2 {
			rec = binary.AppendVarint(rec, l.delayFor)
			rec = binary.AppendUvarint(rec, uint64(l.delayToken))
		}
	}
	w.rec = rec
	if v >= snapshotV3 {
		if l.limit > 0 {
			w.rec = binary.AppendUvarint(w.rec, uint64(l.limit))
		}
		list := w.list(l.shared.len())
		for h := range l.shared.all() {
			list.next()
			w.rec = appendHolder(w.rec, h, v)
		}
	}
	if v < snapshotV2 { // version 1: all waiters in the lock record
		w.rec = binary.AppendUvarint(w.rec, uint64(l.waiters.len()))
		for wt := range l.waiters.all() {
			w.rec = appendWaiter(w.rec, wt, v)
		}
	} else {
		list := w.list(l.waiters.len())
		for wt := range l.waiters.all() {
			list.next()
			w.rec = appendWaiter(w.rec, wt, v)
		}
	}
	w.put()
}

// listWriter writes a list of items in chunks of at most itemsPerRecord:
// the total and the first chunk (its count, its items) in the current
// record, each further chunk (count, items) in a record of its own. The
// record goes on after the list.
type listWriter struct {
	w              *snapWriter
	left, chunk, n int
}

func (w *snapWriter) list(total int) *listWriter {
	l := &listWriter{w: w, left: total, chunk: min(total, itemsPerRecord)}
	w.rec = binary.AppendUvarint(w.rec, uint64(total))
	w.rec = binary.AppendUvarint(w.rec, uint64(l.chunk))
	return l
}

// next is called before each item is appended.
func (l *listWriter) next() {
	if l.n == l.chunk {
		l.w.put()
		l.left -= l.n
		l.n, l.chunk = 0, min(l.left, itemsPerRecord)
		l.w.rec = binary.AppendUvarint(l.w.rec, uint64(l.chunk))
	}
	l.n++
}

func appendHolder(rec []byte, h holder, v byte) []byte {
	rec = binary.AppendUvarint(rec, uint64(h.session))
	rec = append(rec, h.owner[:]...)
	rec = binary.AppendUvarint(rec, uint64(h.token))
	rec = binary.AppendVarint(rec, h.acquiredAt)
	rec = binary.AppendUvarint(rec, h.acquiredIdx)
	if v >= snapshotV3 {
		rec = binary.AppendUvarint(rec, uint64(h.permits))
		rec = fsmwire.AppendString(rec, h.value)
	}
	return rec
}

func appendWaiter(rec []byte, wt waiter, v byte) []byte {
	rec = binary.AppendUvarint(rec, uint64(wt.session))
	rec = append(rec, wt.owner[:]...)
	rec = binary.AppendVarint(rec, wt.enqueuedAt)
	rec = binary.AppendUvarint(rec, wt.enqueuedIx)
	if v >= snapshotV3 {
		var shared byte
		if wt.shared {
			shared = 1
		}
		rec = append(rec, shared)
		rec = binary.AppendUvarint(rec, uint64(wt.permits))
		rec = fsmwire.AppendString(rec, wt.value)
	}
	return rec
}
