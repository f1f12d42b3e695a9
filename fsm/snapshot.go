package fsm

import (
	"bufio"
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"slices"

	"github.com/hashicorp/raft"
)

// Snapshot format (version 1):
//
//	magic "RLKS", version byte
//	records, each a uvarint length followed by that many bytes:
//	  meta:    index, clock, sessionSeq, tokenSeq, #sessions, #locks
//	  session: id, TTL, lockDelay, createdAt, createdIdx, description   (ascending id)
//	  lock:    name, flags (1 held, 2 delayed), [holder], [delayUntil],
//	           #waiters, waiters                                 (creation order)
//	CRC-32C of everything before it, 4 bytes big-endian
//
// The encoding is canonical: the same state always gives the same bytes, so
// replicas that applied the same log produce identical snapshots.
const (
	snapshotMagic     = "RLKS"
	snapshotVersion   = byte(1)
	maxSnapshotRecord = 16 << 20
	flagHeld          = 1
	flagDelayed       = 2
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Snapshot implements raft.FSM. It is cheap: it shares the current objects
// with the live state, which copies them before changing them.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	st := f.st.freeze()
	f.mu.Unlock()
	return &snapshot{st: st}, nil
}

type snapshot struct{ st *state }

// Persist implements raft.FSMSnapshot.
func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := s.st.encode(sink); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release implements raft.FSMSnapshot.
func (s *snapshot) Release() {}

// WriteSnapshot writes the current state in the snapshot format to w.
func (f *FSM) WriteSnapshot(w io.Writer) error {
	f.mu.Lock()
	st := f.st.freeze()
	f.mu.Unlock()
	return st.encode(w)
}

// Digest returns the last applied index and a SHA-256 of the state's
// snapshot encoding: replicas that applied the same log have equal digests.
func (f *FSM) Digest() (uint64, [32]byte) {
	f.mu.Lock()
	st := f.st.freeze()
	f.mu.Unlock()
	h := sha256.New()
	_ = st.encode(h) // a hash never fails
	var sum [32]byte
	h.Sum(sum[:0])
	return st.index, sum
}

func (st *state) encode(w io.Writer) error {
	var crc uint32
	bw := bufio.NewWriterSize(w, 256<<10)
	write := func(b []byte) {
		crc = crc32.Update(crc, crcTable, b)
		bw.Write(b) // a write error sticks in bw and is returned by Flush
	}
	write([]byte{snapshotMagic[0], snapshotMagic[1], snapshotMagic[2], snapshotMagic[3], snapshotVersion})

	var rec []byte
	put := func() {
		var n [binary.MaxVarintLen64]byte
		write(n[:binary.PutUvarint(n[:], uint64(len(rec)))])
		write(rec)
		rec = rec[:0]
	}
	rec = binary.AppendUvarint(rec, st.index)
	rec = binary.AppendVarint(rec, st.clock)
	rec = binary.AppendUvarint(rec, st.sessionSeq)
	rec = binary.AppendUvarint(rec, st.tokenSeq)
	rec = binary.AppendUvarint(rec, uint64(len(st.sessions)))
	rec = binary.AppendUvarint(rec, uint64(len(st.locks)))
	put()

	for _, id := range slices.Sorted(maps.Keys(st.sessions)) {
		s := st.sessions[id]
		rec = binary.AppendUvarint(rec, uint64(s.id))
		rec = binary.AppendVarint(rec, s.ttl)
		rec = binary.AppendVarint(rec, s.lockDelay)
		rec = binary.AppendVarint(rec, s.createdAt)
		rec = binary.AppendUvarint(rec, s.createdIdx)
		rec = appendString(rec, s.description)
		put()
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
		name, l := e.name, e.l
		rec = appendString(rec, name)
		var flags byte
		if l.held {
			flags |= flagHeld
		}
		if l.delayUntil != 0 {
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
		if l.delayUntil != 0 {
			rec = binary.AppendVarint(rec, l.delayUntil)
		}
		rec = binary.AppendUvarint(rec, uint64(l.waiters.len()))
		for _, w := range l.waiters.items {
			rec = binary.AppendUvarint(rec, uint64(w.session))
			rec = append(rec, w.owner[:]...)
			rec = binary.AppendVarint(rec, w.enqueuedAt)
			rec = binary.AppendUvarint(rec, w.enqueuedIx)
		}
		put()
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc)
	bw.Write(sum[:])
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("fsm: write snapshot: %w", err)
	}
	return nil
}

// Restore implements raft.FSM: it replaces the whole state with the snapshot
// read from r and tells the observer. A snapshot that cannot be read or fails
// validation returns an error wrapping ErrInvalidSnapshot and leaves the state
// unchanged.
func (f *FSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	st, err := decodeSnapshot(r)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.st = st
	f.mu.Unlock()
	if f.obs != nil {
		f.obs.Restored(st.index)
	}
	return nil
}

// snapReader reads records and keeps a running CRC of what it consumed.
type snapReader struct {
	r   *bufio.Reader
	crc uint32
	buf []byte
}

func (s *snapReader) full(n int) ([]byte, error) {
	s.buf = slices.Grow(s.buf[:0], n)[:n]
	if _, err := io.ReadFull(s.r, s.buf); err != nil {
		return nil, err
	}
	s.crc = crc32.Update(s.crc, crcTable, s.buf)
	return s.buf, nil
}

func (s *snapReader) record() (decoder, error) {
	head, _ := s.r.Peek(binary.MaxVarintLen64) // shorter near the end: Uvarint tells
	n, k := binary.Uvarint(head)
	if k <= 0 {
		if len(head) == 0 {
			return decoder{}, io.ErrUnexpectedEOF
		}
		return decoder{}, errors.New("bad record length")
	}
	s.crc = crc32.Update(s.crc, crcTable, head[:k])
	s.r.Discard(k)
	if n > maxSnapshotRecord {
		return decoder{}, fmt.Errorf("record of %d bytes", n)
	}
	b, err := s.full(int(n))
	if err != nil {
		return decoder{}, err
	}
	return decoder{b: b}, nil
}

func snapErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidSnapshot}, args...)...)
}

func decodeSnapshot(r io.Reader) (*state, error) {
	sr := &snapReader{r: bufio.NewReaderSize(r, 256<<10)}
	head, err := sr.full(len(snapshotMagic) + 1)
	if err != nil {
		return nil, snapErr("header: %v", err)
	}
	if string(head[:4]) != snapshotMagic {
		return nil, snapErr("bad magic %q", head[:4])
	}
	if head[4] != snapshotVersion {
		return nil, snapErr("unknown version %d", head[4])
	}
	d, err := sr.record()
	if err != nil {
		return nil, snapErr("meta: %v", err)
	}
	st := newState()
	st.index = d.uvarint()
	st.clock = d.varint()
	st.sessionSeq = d.uvarint()
	st.tokenSeq = d.uvarint()
	nSessions, nLocks := d.uvarint(), d.uvarint()
	if err := d.end(); err != nil {
		return nil, snapErr("meta: %v", err)
	}
	st.sessions = make(map[SessionID]*session, min(nSessions, 1<<20))
	st.locks = make(map[string]*lock, min(nLocks, 1<<20))

	var prevID SessionID
	for i := uint64(0); i < nSessions; i++ {
		d, err := sr.record()
		if err != nil {
			return nil, snapErr("session %d: %v", i, err)
		}
		s, err := decodeSession(&d, prevID, st.sessionSeq)
		if err != nil {
			return nil, snapErr("session %d: %v", i, err)
		}
		st.sessions[s.id] = s
		prevID = s.id
	}
	refs := make([]sessionRef, 0, min(nLocks, 1<<20))
	for i := uint64(0); i < nLocks; i++ {
		d, err := sr.record()
		if err != nil {
			return nil, snapErr("lock %d: %v", i, err)
		}
		if err := st.decodeLock(&d, &refs); err != nil {
			return nil, snapErr("lock %d: %v", i, err)
		}
	}
	want := sr.crc
	var sum [4]byte
	if _, err := io.ReadFull(sr.r, sum[:]); err != nil {
		return nil, snapErr("checksum: %v", err)
	}
	if got := binary.BigEndian.Uint32(sum[:]); got != want {
		return nil, snapErr("checksum mismatch (%08x, computed %08x)", got, want)
	}
	if _, err := sr.r.ReadByte(); !errors.Is(err, io.EOF) {
		return nil, snapErr("trailing data after checksum")
	}
	indexSessions(refs)
	return st, nil
}

// sessionRef is one acquisition (holder or waiter) of a session on a lock,
// collected while restoring so that the per-session indexes can be built
// at their final size.
type sessionRef struct {
	s    *session
	name string
}

func indexSessions(refs []sessionRef) {
	counts := make(map[*session]int)
	for _, r := range refs {
		counts[r.s]++
	}
	for s, n := range counts {
		s.locks = make(map[string]struct{}, n)
	}
	for _, r := range refs {
		r.s.locks[r.name] = struct{}{}
	}
}

func decodeSession(d *decoder, prev SessionID, seq uint64) (*session, error) {
	s := &session{
		id:        d.session(),
		ttl:       d.varint(),
		lockDelay: d.varint(),
		createdAt: d.varint(),
	}
	s.createdIdx = d.uvarint()
	s.description = d.string(MaxDescriptionLen)
	if err := d.end(); err != nil {
		return nil, err
	}
	if s.id <= prev || uint64(s.id) > seq {
		return nil, fmt.Errorf("session id %d out of order or beyond the counter %d", s.id, seq)
	}
	c := OpenSession{TTL: durationOf(s.ttl), LockDelay: durationOf(s.lockDelay), Description: s.description}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// decodeLock reads one lock record, checks it against the sessions already
// read and adds it to st (rebuilding the per-session indexes).
func (st *state) decodeLock(d *decoder, refs *[]sessionRef) error {
	name := d.string(MaxLockNameLen)
	flags := d.byte()
	l := &lock{}
	if flags&flagHeld != 0 {
		l.held = true
		l.holder = holder{session: d.session(), owner: d.owner(), token: Token(d.uvarint()), acquiredAt: d.varint(), acquiredIdx: d.uvarint()}
	}
	if flags&flagDelayed != 0 {
		l.delayUntil = d.varint()
	}
	n := d.count(1<<24, 19)
	for i := 0; i < n && d.err == nil; i++ {
		l.waiters.push(waiter{session: d.session(), owner: d.owner(), enqueuedAt: d.varint(), enqueuedIx: d.uvarint()})
	}
	if err := d.end(); err != nil {
		return err
	}
	switch {
	case flags&^(flagHeld|flagDelayed) != 0:
		return fmt.Errorf("unknown lock flags %#x", flags)
	case st.locks[name] != nil:
		return fmt.Errorf("lock %q listed twice", name)
	case flags&flagDelayed != 0 && l.delayUntil == 0:
		return fmt.Errorf("lock %q: zero delay end", name)
	case !l.held && l.delayUntil == 0:
		return fmt.Errorf("lock %q: neither held nor delayed", name)
	case l.held && l.delayUntil != 0:
		return fmt.Errorf("lock %q: both held and delayed", name)
	}
	if err := ValidateLockName(name); err != nil {
		return err
	}
	var owners map[OwnerID]struct{} // duplicates are only possible with waiters
	if l.waiters.len() > 0 {
		owners = make(map[OwnerID]struct{}, l.waiters.len()+1)
	}
	check := func(s SessionID, o OwnerID) error {
		sess := st.sessions[s]
		if sess == nil {
			return fmt.Errorf("lock %q: unknown session %d", name, s)
		}
		if o.IsZero() {
			return fmt.Errorf("lock %q: zero owner", name)
		}
		if owners != nil {
			if _, dup := owners[o]; dup {
				return fmt.Errorf("lock %q: duplicate owner %s", name, o)
			}
			owners[o] = struct{}{}
		}
		*refs = append(*refs, sessionRef{sess, name})
		return nil
	}
	if l.held {
		if l.holder.token == 0 || uint64(l.holder.token) > st.tokenSeq {
			return fmt.Errorf("lock %q: token %d beyond the counter %d", name, l.holder.token, st.tokenSeq)
		}
		if err := check(l.holder.session, l.holder.owner); err != nil {
			return err
		}
	}
	for _, w := range l.waiters.items {
		if err := check(w.session, w.owner); err != nil {
			return err
		}
	}
	st.lockSeq++
	l.seq = st.lockSeq
	st.locks[name] = l
	st.waiters += l.waiters.len()
	if l.held {
		st.held++
	}
	if l.delayUntil != 0 {
		st.delayed[name] = l.delayUntil
	}
	return nil
}

// end reports the decoder's error, or an error if bytes are left over.
func (d *decoder) end() error {
	if d.err == nil && d.off != len(d.b) {
		d.fail("%d trailing bytes", len(d.b)-d.off)
	}
	return d.err
}
