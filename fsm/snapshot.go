package fsm

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// Snapshot formats. Both are canonical: the same state always gives the same
// bytes, so replicas that applied the same log produce identical snapshots.
//
// Version 2, written from cluster version 2:
//
//	magic "RLKS", version byte 2
//	records, each a uvarint length (at most 16 MiB) followed by that many bytes:
//	  meta:    index, clock, sessionSeq, tokenSeq, clusterVersion, clusterID,
//	           limits (5 uvarints), #sessions, #locks
//	  session: id, TTL, lockDelay, createdAt, createdIdx, description,
//	           floor, #results, n, n × (seq, result)          (ascending id)
//	  results: n, n × (seq, result)         continuation, until #results read
//	  lock:    name, flags (1 held, 2 delayed), [holder],
//	           [delayUntil, delayFor, delayToken], #waiters, n, n × waiter
//	                                                   (creation order)
//	  waiters: n, n × waiter                continuation, until #waiters read
//	CRC-32C of everything before it, 4 bytes big-endian
//
// A record carries at most itemsPerRecord waiters (or resultsPerRecord
// results; a result is at most ~1.4 KB): whatever state the FSM can reach,
// every record stays far below the record limit, so every snapshot written
// can be restored.
//
// Version 3, written from cluster version 3, is version 2 with the
// primitives (see the package doc): a lock record is
//
//	lock:    name, flags (1 held, 2 delayed, 4 semaphore), [holder],
//	         [delayUntil, delayFor, delayToken], [limit],
//	         #shared, n, n × holder, #waiters, n, n × waiter
//	shared:  n, n × holder        continuation, until #shared read
//	waiters: n, n × waiter        continuation, until #waiters read
//	holder:  session, owner [16], token, acquiredAt, acquiredIdx, permits, value
//	waiter:  session, owner [16], enqueuedAt, enqueuedIx, shared byte, permits, value
//
// (the shared grants in token order; a waiters chunk follows the shared
// grants in the record their last chunk is in). With values of at most
// MaxValueLen bytes a record of itemsPerRecord items stays below 10 MB.
//
// Version 4, written from cluster version 4, is version 3 with the number
// of sections at the end of the meta record and, after the locks, that many
// sections, each a header record and the section's own records:
//
//	meta:    ... (as version 3), #sections
//	section: tag, #records                         (ascending tag)
//	         #records records, in the section's own format
//
// A section holds state that the records above cannot carry
// (snapshotSections lists them); one with nothing to carry is left out. A
// reader refuses an unknown tag (the state machine halts, as on any
// unknown version) and a tag out of order.
//
// Version 1, written while the cluster version is 1 so that replicas of the
// previous release can install it (they read only this format):
//
//	magic "RLKS", version byte 1
//	  meta:    index, clock, sessionSeq, tokenSeq, #sessions, #locks
//	  session: id, TTL, lockDelay, createdAt, createdIdx, description
//	  lock:    name, flags (1 held, 2 delayed), [holder], [delayUntil],
//	           #waiters, waiters                 (one record per lock)
//	CRC-32C
//
// The previous release refuses version-1 records over 16 MiB (about 350,000
// waiters on one lock); this one reads them of any size, allocating as the
// bytes arrive. A snapshot of an unknown version halts the state machine.
const (
	snapshotMagic     = "RLKS"
	snapshotV1        = byte(1)
	snapshotV2        = byte(2)
	snapshotV3        = byte(3)
	snapshotV4        = byte(4)
	maxSnapshotRecord = 16 << 20 // versions 2 to 4
	maxV1Record       = 1 << 30  // version 1: bounded by what the state can hold
	itemsPerRecord    = 8192     // waiters, or shared grants (version 3)
	resultsPerRecord  = 1024
	flagHeld          = 1
	flagDelayed       = 2
	flagSemaphore     = 4 // version 3
)

// Snapshot implements raft.FSM. It is cheap: it shares the current objects
// with the live state, which copies them before changing them. It fails
// while the state machine is halted: a snapshot must never claim to cover
// entries that were not applied.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	st, err := f.frozen()
	if err != nil {
		return nil, err
	}
	return &snapshot{st: st}, nil
}

// frozen returns an immutable copy of the state, or the halt.
func (f *FSM) frozen() (*state, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h := f.haltErr(); h != nil {
		return nil, fmt.Errorf("fsm: no snapshot: %w", h)
	}
	return f.st.freeze(), nil
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

// WriteSnapshot writes the current state in the snapshot format to w (the
// format of the cluster version in force). It fails while halted.
func (f *FSM) WriteSnapshot(w io.Writer) error {
	st, err := f.frozen()
	if err != nil {
		return err
	}
	return st.encode(w)
}

// Digest returns the last applied index and a SHA-256 of the state's
// snapshot encoding: replicas that applied the same log have equal digests.
// (While halted it covers the state as of the last entry applied.)
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

// Restore implements raft.FSM: it replaces the whole state with the snapshot
// read from r and tells the observer. A snapshot that cannot be read or fails
// validation returns an error wrapping ErrInvalidSnapshot and leaves the state
// unchanged. A snapshot of an unknown version (or cluster version) also
// halts the state machine; a valid snapshot ends a halt (it replaces the
// state the halt froze).
//
// The state never goes back: a snapshot taken at an index below the
// applied index (AppliedIndex) returns an error wrapping ErrOlderSnapshot,
// changes nothing and tells a refusalObserver. (hashicorp/raft v1.7.3
// installs whatever snapshot a leader sends, also one older than what a
// follower applied; raft keeps its applied index when the restore fails.)
// A snapshot at the applied index is restored: it is the same committed
// prefix. A fresh state machine (applied 0, as at startup) restores any.
func (f *FSM) Restore(r io.ReadCloser) error {
	defer r.Close()
	st, err := decodeSnapshot(r)
	if err != nil {
		if errors.Is(err, fsmwire.ErrUnsupportedVersion) {
			f.mu.Lock()
			first := f.haltErr() == nil
			if first {
				f.halt(fmt.Errorf("%w: restore: %w", ErrHalted, err))
			}
			halted := f.haltErr()
			f.mu.Unlock()
			if h, ok := f.obs.(haltObserver); ok && first {
				h.Halted(0, halted)
			}
		}
		return err
	}
	f.mu.Lock()
	if applied := f.st.index; st.index < applied {
		f.mu.Unlock()
		if o, ok := f.obs.(refusalObserver); ok {
			o.RestoreRefused(st.index, applied)
		}
		return fmt.Errorf("%w: snapshot at index %d, applied %d", ErrOlderSnapshot, st.index, applied)
	}
	f.st = st
	f.halt(nil)
	f.mu.Unlock()
	if f.obs != nil {
		f.obs.Restored(st.index)
	}
	return nil
}
