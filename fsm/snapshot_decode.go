package fsm

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
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
	v := head[4]
	switch v {
	case snapshotV1:
		sr.maxRec = maxV1Record
	case snapshotV2:
		sr.maxRec = maxSnapshotRecord
	default:
		return nil, fmt.Errorf("%w: %w: snapshot version %d (this binary reads 1..%d)", ErrInvalidSnapshot, ErrUnsupportedVersion, v, snapshotV2)
	}
	st, nSessions, nLocks, err := decodeMeta(sr, v)
	if err != nil {
		return nil, err
	}
	var prevID SessionID
	for i := uint64(0); i < nSessions; i++ {
		s, err := decodeSession(sr, v, prevID, st)
		if err != nil {
			return nil, snapErr("session %d: %v", i, err)
		}
		st.sessions[s.id] = s
		prevID = s.id
	}
	for i := uint64(0); i < nLocks; i++ {
		if err := st.decodeLock(sr, v); err != nil {
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
	return st, nil
}

func decodeMeta(sr *snapReader, v byte) (st *state, nSessions, nLocks uint64, err error) {
	d, err := sr.record()
	if err != nil {
		return nil, 0, 0, snapErr("meta: %v", err)
	}
	st = newState()
	st.index = d.uvarint()
	st.clock = d.varint()
	st.sessionSeq = d.uvarint()
	st.tokenSeq = d.uvarint()
	if v >= snapshotV2 {
		st.version = d.uvarint()
		st.clusterID = d.string(MaxClusterIDLen)
		l := &st.limits
		l.MaxLockNameLen, l.MaxWaitersPerLock, l.MaxLocksPerSession = d.limit(), d.limit(), d.limit()
		l.MaxSessions, l.RequestWindow = d.limit(), d.limit()
	}
	nSessions, nLocks = d.uvarint(), d.uvarint()
	if err := d.end(); err != nil {
		return nil, 0, 0, snapErr("meta: %v", err)
	}
	switch {
	case st.version > MaxClusterVersion:
		return nil, 0, 0, fmt.Errorf("%w: %w: cluster version %d (this binary supports up to %d)", ErrInvalidSnapshot, ErrUnsupportedVersion, st.version, MaxClusterVersion)
	case st.version < 1:
		return nil, 0, 0, snapErr("meta: cluster version 0")
	case st.clusterID != "" && ValidateClusterID(st.clusterID) != nil:
		return nil, 0, 0, snapErr("meta: bad cluster id")
	}
	if err := st.limits.Validate(); err != nil {
		return nil, 0, 0, snapErr("meta: %v", err)
	}
	st.sessions = make(map[SessionID]*session, min(nSessions, 1<<20))
	st.locks = make(map[string]*lock, min(nLocks, 1<<20))
	return st, nSessions, nLocks, nil
}

func decodeSession(sr *snapReader, v byte, prev SessionID, st *state) (*session, error) {
	d, err := sr.record()
	if err != nil {
		return nil, err
	}
	s := &session{
		id:        d.session(),
		ttl:       d.varint(),
		lockDelay: d.varint(),
		createdAt: d.varint(),
	}
	s.createdIdx = d.uvarint()
	s.description = d.string(MaxDescriptionLen)
	if v >= snapshotV2 {
		s.floor = d.uvarint()
		total := d.uvarint()
		if d.err == nil && total > MaxRequestWindow {
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
	} else if err := d.end(); err != nil {
		return nil, err
	}
	if s.id <= prev || uint64(s.id) > st.sessionSeq {
		return nil, fmt.Errorf("session id %d out of order or beyond the counter %d", s.id, st.sessionSeq)
	}
	c := OpenSession{TTL: durationOf(s.ttl), LockDelay: durationOf(s.lockDelay), Description: s.description}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := s.validateResults(st.limits.window()); err != nil {
		return nil, err
	}
	return s, nil
}

// decodeResults reads one record's worth of a session's results.
func (s *session) decodeResults(d *decoder, total uint64) error {
	n := d.count(resultsPerRecord, 2)
	if d.err == nil && (n == 0) != (uint64(len(s.results)) == total) {
		d.fail("results chunk of %d", n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		seq := d.uvarint()
		r, rest, err := DecodeResult(d.b[d.off:])
		if err != nil {
			return err
		}
		d.off = len(d.b) - len(rest)
		s.results = append(s.results, executed{seq, r})
	}
	if uint64(len(s.results)) > total {
		d.fail("more results than announced")
	}
	return d.end()
}

// decodeLock reads one lock (and its continuation records), checks it
// against the sessions already read and adds it to st, with the sessions'
// indexes of their acquisitions.
func (st *state) decodeLock(sr *snapReader, v byte) error {
	d, err := sr.record()
	if err != nil {
		return err
	}
	name := d.string(MaxLockNameLen)
	flags := d.byte()
	l := &lock{}
	if flags&flagHeld != 0 {
		l.held = true
		l.holder = holder{session: d.session(), owner: d.owner(), token: Token(d.uvarint()), acquiredAt: d.varint(), acquiredIdx: d.uvarint()}
	}
	if flags&flagDelayed != 0 {
		l.delayed, l.delayUntil = true, d.varint()
		if v >= snapshotV2 {
			l.delayFor, l.delayToken = d.varint(), Token(d.uvarint())
		}
	}
	total64 := d.uvarint()
	if total64 > maxQuota {
		d.fail("%d waiters", total64)
	}
	total := int(total64)
	if v < snapshotV2 {
		if err := decodeWaiters(&d, &l.waiters, total, 19); err != nil {
			return err
		}
	} else {
		for first := true; first || l.waiters.len() < total; first = false {
			if !first {
				if d, err = sr.record(); err != nil {
					return err
				}
			}
			n := d.count(waitersPerRecord, 19)
			if d.err == nil && ((n == 0) != (l.waiters.len() == total) || l.waiters.len()+n > total) {
				d.fail("waiters chunk of %d", n)
			}
			if err := decodeWaiters(&d, &l.waiters, n, 19); err != nil {
				return err
			}
		}
	}
	if err := st.checkLock(name, flags, l, v); err != nil {
		return err
	}
	st.lockSeq++
	l.seq = st.lockSeq
	st.locks[name] = l
	st.waiters += l.waiters.len()
	if l.held {
		st.held++
	}
	if l.delayed {
		st.delayed[name] = l.delayUntil
	}
	return nil
}

func decodeWaiters(d *decoder, q *queue, n, minSize int) error {
	if n > (len(d.b)-d.off)/minSize {
		d.fail("%d waiters in %d bytes", n, len(d.b)-d.off)
	}
	for i := 0; i < n && d.err == nil; i++ {
		w := waiter{session: d.session(), owner: d.owner(), enqueuedAt: d.varint(), enqueuedIx: d.uvarint()}
		if d.err == nil && w.owner.IsZero() {
			d.fail("zero owner")
		}
		q.push(w)
	}
	return d.end()
}

// checkLock validates a decoded lock and records its acquisitions in their
// sessions.
func (st *state) checkLock(name string, flags byte, l *lock, v byte) error {
	switch {
	case flags&^(flagHeld|flagDelayed) != 0:
		return fmt.Errorf("unknown lock flags %#x", flags)
	case st.locks[name] != nil:
		return fmt.Errorf("lock %q listed twice", name)
	case v < snapshotV2 && l.delayed && l.delayUntil == 0:
		return fmt.Errorf("lock %q: zero delay end", name)
	case l.delayFor < 0 || l.delayFor > int64(MaxLockDelay) || uint64(l.delayToken) > st.tokenSeq:
		return fmt.Errorf("lock %q: bad delay", name)
	case !l.held && !l.delayed:
		return fmt.Errorf("lock %q: neither held nor delayed", name)
	case l.held && l.delayed:
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
		if sess.acqs == nil {
			sess.acqs = make(map[acqKey]struct{})
		}
		sess.acqs[acqKey{name, o}] = struct{}{}
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
	for w := range l.waiters.all() {
		if err := check(w.session, w.owner); err != nil {
			return err
		}
	}
	return nil
}
