package fsm

import (
	"bufio"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// snapReader reads records and keeps a running CRC of what it consumed.
type snapReader struct {
	r      *bufio.Reader
	crc    uint32
	buf    []byte
	maxRec uint64
}

// full reads exactly n bytes. The buffer grows as the bytes arrive, so that
// a record length claimed by garbage costs no more memory than the bytes
// that follow it.
func (s *snapReader) full(n int) ([]byte, error) {
	const step = 1 << 20
	s.buf = s.buf[:0]
	for len(s.buf) < n {
		k := min(n-len(s.buf), step)
		s.buf = slices.Grow(s.buf, k)
		start := len(s.buf)
		s.buf = s.buf[:start+k]
		if _, err := io.ReadFull(s.r, s.buf[start:]); err != nil {
			return nil, err
		}
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
	if n > s.maxRec {
		return decoder{}, fmt.Errorf("record of %d bytes", n)
	}
	b, err := s.full(int(n))
	if err != nil {
		return decoder{}, err
	}
	return newDecoder(b), nil
}

func snapErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{fsmwire.ErrInvalidSnapshot}, args...)...)
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
	v := head[4]
	switch v {
	case snapshotV1:
		sr.maxRec = maxV1Record
	case snapshotV2, snapshotV3, snapshotV4:
		sr.maxRec = maxSnapshotRecord
	default:
		return nil, fmt.Errorf("%w: %w: snapshot version %d (this binary reads 1..%d)", fsmwire.ErrInvalidSnapshot, fsmwire.ErrUnsupportedVersion, v, snapshotV4)
	}
	st, nSessions, nLocks, nSections, err := decodeMeta(sr, v)
	if err != nil {
		return nil, err
	}
	var prevID lockinfo.SessionID
	for i := uint64(0); i < nSessions; i++ {
		s, err := decodeSession(sr, v, prevID, st)
		if err != nil {
			return nil, snapErr("session %d: %v", i, err)
		}
		st.sessions.set(s.id, s)
		prevID = s.id
	}
	for i := uint64(0); i < nLocks; i++ {
		if err := st.decodeLock(sr, v); err != nil {
			return nil, snapErr("lock %d: %v", i, err)
		}
	}
	if err := st.decodeSections(sr, nSections); err != nil {
		return nil, err
	}
	st.recount() // the fair shares' usage (fairshare.go)
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
	return st, nil
}

func decodeMeta(sr *snapReader, v byte) (st *state, nSessions, nLocks, nSections uint64, err error) {
	d, err := sr.record()
	if err != nil {
		return nil, 0, 0, 0, snapErr("meta: %v", err)
	}
	st = newState()
	st.index = d.Uvarint()
	st.clock = d.Varint()
	st.sessionSeq = d.Uvarint()
	st.tokenSeq = d.Uvarint()
	if v >= snapshotV2 {
		st.version = d.Uvarint()
		st.clusterID = d.String(fsmwire.MaxClusterIDLen)
		d.limits(&st.limits)
	}
	nSessions, nLocks = d.Uvarint(), d.Uvarint()
	if v >= snapshotV4 {
		nSections = d.Uvarint()
	}
	if err := d.End(); err != nil {
		return nil, 0, 0, 0, snapErr("meta: %v", err)
	}
	switch {
	case st.version > MaxClusterVersion:
		return nil, 0, 0, 0, fmt.Errorf("%w: %w: cluster version %d (this binary supports up to %d)", fsmwire.ErrInvalidSnapshot, fsmwire.ErrUnsupportedVersion, st.version, MaxClusterVersion)
	case st.version < 1:
		return nil, 0, 0, 0, snapErr("meta: cluster version 0")
	case (v >= snapshotV3) != (st.version >= versionPrimitives), (v >= snapshotV4) != (st.version >= versionSections):
		return nil, 0, 0, 0, snapErr("meta: cluster version %d in a snapshot of version %d", st.version, v)
	case st.clusterID != "" && fsmwire.ValidateClusterID(st.clusterID) != nil:
		return nil, 0, 0, 0, snapErr("meta: bad cluster id")
	}
	if err := st.limits.Validate(); err != nil {
		return nil, 0, 0, 0, snapErr("meta: %v", err)
	}
	st.sessions.reserve(int(min(nSessions, 1<<20)))
	st.locks.reserve(int(min(nLocks, 1<<20)))
	return st, nSessions, nLocks, nSections, nil
}

func decodeSession(sr *snapReader, v byte, prev lockinfo.SessionID, st *state) (*session, error) {
	d, err := sr.record()
	if err != nil {
		return nil, err
	}
	s := &session{
		id:        d.session(),
		ttl:       d.Varint(),
		lockDelay: d.Varint(),
		createdAt: d.Varint(),
	}
	s.createdIdx = d.Uvarint()
	s.renewedAt = s.createdIdx // unless the renewals section says otherwise
	s.description = d.String(fsmwire.MaxDescriptionLen)
	if v >= snapshotV2 {
		s.floor = d.Uvarint()
		total := d.Uvarint()
		if d.Err == nil && total > fsmwire.MaxRequestWindow {
			return nil, fmt.Errorf("%d results", total)
		}
		for first := true; first || uint64(len(s.results)) < total; first = false {
			if !first {
				if d, err = sr.record(); err != nil {
					return nil, err
				}
			}
			if err := s.decodeResults(&d, total); err != nil {
				return nil, err
			}
		}
	} else if err := d.End(); err != nil {
		return nil, err
	}
	if s.id <= prev || uint64(s.id) > st.sessionSeq {
		return nil, fmt.Errorf("session id %d out of order or beyond the counter %d", s.id, st.sessionSeq)
	}
	c := OpenSession{TTL: durationOf(s.ttl), LockDelay: durationOf(s.lockDelay), Description: s.description}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if err := s.validateResults(st.limits.window()); err != nil {
		return nil, err
	}
	return s, nil
}

// decodeResults reads one record's worth of a session's results.
func (s *session) decodeResults(d *decoder, total uint64) error {
	n := d.Count(resultsPerRecord, 2)
	if d.Err == nil && (n == 0) != (uint64(len(s.results)) == total) {
		d.Fail("results chunk of %d", n)
	}
	for i := 0; i < n && d.Err == nil; i++ {
		seq := d.Uvarint()
		r, rest, err := DecodeResult(d.B[d.Off:])
		if err != nil {
			return err
		}
		d.Off = len(d.B) - len(rest)
		s.results = append(s.results, executed{seq, r})
	}
	if uint64(len(s.results)) > total {
		d.Fail("more results than announced")
	}
	return d.End()
}

// decodeLock reads one lock (and its continuation records), checks it
// against the sessions already read and adds it to st, with the sessions'
// indexes of their acquisitions.
func (st *state) decodeLock(sr *snapReader, v byte) error {
	d, err := sr.record()
	if err != nil {
		return err
	}
	name := d.String(fsmwire.MaxLockNameLen)
	flags := d.Byte()
	l := &lock{}
	if flags&flagHeld != 0 {
		l.held = true
		l.holder = d.holder(v)
	}
	if flags&flagDelayed != 0 {
		l.delayed, l.delayUntil = true, d.Varint()
		if v >= snapshotV2 {
			l.delayFor, l.delayToken = d.Varint(), lockinfo.Token(d.Uvarint())
		}
	}
	if v >= snapshotV3 {
		if flags&flagSemaphore != 0 {
			l.limit = d.limit()
		}
		var shared []holder
		if err := d.list(sr, 22, func(d *decoder) { shared = append(shared, d.holder(v)) }); err != nil {
			return err
		}
		// Written in token order; kept in it whatever the bytes say.
		slices.SortStableFunc(shared, func(a, b holder) int { return cmp.Compare(a.token, b.token) })
		for _, h := range shared {
			if l.shared.find(h.owner) >= 0 {
				return fmt.Errorf("shared grant of owner %s twice", h.owner)
			}
			if l.shared == nil {
				l.shared = newGrants()
			}
			l.shared.push(h)
			l.used += h.permits
		}
	}
	if v < snapshotV2 {
		total := d.Uvarint()
		if total > maxQuota {
			d.Fail("%d waiters", total)
		}
		if n := int(total); n > (len(d.B)-d.Off)/19 {
			d.Fail("%d waiters in %d bytes", n, len(d.B)-d.Off)
		}
		for i := 0; i < int(total) && d.Err == nil; i++ {
			l.waiters.push(d.waiter(v))
		}
	} else if err := d.list(sr, 19, func(d *decoder) { l.waiters.push(d.waiter(v)) }); err != nil {
		return err
	}
	if err := d.End(); err != nil {
		return err
	}
	if err := st.checkLock(name, flags, l, v); err != nil {
		return err
	}
	st.lockSeq++
	l.seq = st.lockSeq
	st.locks.set(name, l)
	st.waiters += l.waiters.len()
	if l.held {
		st.held++
	}
	if l.delayed {
		st.delayed.set(name, l.delayUntil)
	}
	if l.limit > 0 {
		st.counts.semaphores++
	}
	for h := range l.shared.all() {
		if l.limit > 0 {
			st.counts.semHolders++
			st.counts.permits += h.permits
		} else {
			st.counts.readers++
		}
	}
	return nil
}

// list reads a list written by listWriter: the total and chunks of items,
// the first in d's record, each further one in the next record (d then
// reads that record). Each item takes at least minSize bytes.
func (d *decoder) list(sr *snapReader, minSize int, item func(*decoder)) error {
	total64 := d.Uvarint()
	if total64 > maxQuota {
		d.Fail("list of %d", total64)
	}
	total, read := int(total64), 0
	for first := true; d.Err == nil && (first || read < total); first = false {
		if !first {
			if err := d.End(); err != nil {
				return err
			}
			next, err := sr.record()
			if err != nil {
				return err
			}
			*d = next
		}
		n := d.Count(itemsPerRecord, minSize)
		if d.Err == nil && ((n == 0) != (read == total) || read+n > total) {
			d.Fail("chunk of %d", n)
		}
		for i := 0; i < n && d.Err == nil; i++ {
			item(d)
		}
		read += n
	}
	return d.Err
}

func (d *decoder) holder(v byte) holder {
	h := holder{session: d.session(), owner: d.owner(), token: lockinfo.Token(d.Uvarint()), acquiredAt: d.Varint(), acquiredIdx: d.Uvarint()}
	if v >= snapshotV3 {
		h.permits, h.value = d.limit(), d.String(fsmwire.MaxValueLen)
	}
	return h
}

func (d *decoder) waiter(v byte) waiter {
	w := waiter{session: d.session(), owner: d.owner(), enqueuedAt: d.Varint(), enqueuedIx: d.Uvarint()}
	if v >= snapshotV3 {
		switch b := d.Byte(); b {
		case 0:
		case 1:
			w.shared = true
		default:
			d.Fail("waiter flags %#x", b)
		}
		w.permits, w.value = d.limit(), d.String(fsmwire.MaxValueLen)
	}
	if d.Err == nil && w.owner.IsZero() {
		d.Fail("zero owner")
	}
	return w
}
