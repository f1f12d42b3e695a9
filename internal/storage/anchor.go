package storage

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

// Snapshot anchors: a workaround, in the log store, for a livelock of
// hashicorp/raft v1.7.3 (chaos disk seed 95; the family of the open upstream
// issue hashicorp/raft#697).
//
// A follower that installs the leader's snapshot at index K gets the state,
// not entry K: its log holds no entry K. While K is its last entry, Raft
// checks an AppendEntries whose previous entry is K against the snapshot's
// term. Once entries after K are appended, appendEntries looks K up in the
// log instead (it consults the snapshot only for the last index), finds
// nothing and rejects; the leader walks back, sends the same snapshot again,
// and round it goes until the leader has a newer snapshot or leadership
// changes. The leader gets there as soon as it retries below K+1: after any
// rejection, such as the follower's disk failing appends (each failure moves
// the leader's next index for it back by one). A restart does not help.
//
// anchoredLogs answers GetLog(K) with the snapshot's index and term (a
// LogNoop without data) when the store holds no entry K and all of these hold:
//   - the store holds no entry K−1 either;
//   - K is the index of a snapshot written or opened through snapshotTerms,
//     whose term is that of the committed entry K;
//   - the local FSM has applied K;
//   - this node is not the leader.
//
// Then nothing but the index and term is ever read. Raft applies entries in
// order from its last applied index: from below K it would need entry K−1
// first; from K on it never reads K. A leader ships entry K only in a batch
// that starts below K (it reads K−1 or lower first: absent, so it sends a
// snapshot instead) or at K with the previous entry taken from a snapshot at
// K−1 — which, with K's state applied, happens only in the instant of a user
// restore on the leader (between restoreUserSnapshot's setLastLog and
// setLastSnapshot): hence the last condition. On a follower only
// appendEntries reads the log, for the previous entry's term and to skip
// entries it already holds (by term).
//
// restored makes the first condition hold after an install onto a log that
// reaches K−1: with K missing, the entries below K can never be replayed
// (replay would need K) nor usefully shipped (a follower that needs them
// needs K next, which only a snapshot provides).
type anchoredLogs struct {
	raft.LogStore
	snaps   *snapshotTerms
	applied func() uint64 // the local FSM's applied index
	leading func() bool   // this node is the Raft leader
}

// GetLog returns entry index, or the snapshot anchor at index (see
// anchoredLogs).
func (s *anchoredLogs) GetLog(index uint64, l *raft.Log) error {
	err := s.LogStore.GetLog(index, l)
	if !errors.Is(err, raft.ErrLogNotFound) {
		return err
	}
	if term, ok := s.anchor(index); ok {
		*l = raft.Log{Index: index, Term: term, Type: raft.LogNoop}
		return nil
	}
	return err
}

// anchor returns the term of the snapshot at index if GetLog may answer for
// the missing entry index with it.
func (s *anchoredLogs) anchor(index uint64) (uint64, bool) {
	if index < 2 || s.applied() < index || s.leading() {
		return 0, false
	}
	term, ok := s.snaps.term(index)
	if !ok || !s.missing(index-1) {
		return 0, false
	}
	return term, true
}

// missing reports whether the store certainly holds no entry index (a read
// error is not certain).
func (s *anchoredLogs) missing(index uint64) bool {
	var l raft.Log
	return errors.Is(s.LogStore.GetLog(index, &l), raft.ErrLogNotFound)
}

// restored is told, on the FSM goroutine while Raft waits for the restore,
// that the FSM now holds the snapshot at index: if the store holds no entry
// index, the entries below it are removed (see anchoredLogs). A leader's log
// (a user restore) is left alone.
func (s *anchoredLogs) restored(index uint64) error {
	if index < 2 || s.leading() || !s.missing(index) {
		return nil
	}
	first, err := s.LogStore.FirstIndex()
	if err != nil {
		return fmt.Errorf("node: first log index: %w", err)
	}
	if first == 0 || first >= index {
		return nil
	}
	if err := s.LogStore.DeleteRange(first, index-1); err != nil {
		return fmt.Errorf("node: drop log entries %d–%d below snapshot %d: %w", first, index-1, index, err)
	}
	return nil
}

// snapshotTermsKept is how many snapshots snapshotTerms remembers (a node
// keeps snapshotsKept on disk).
const snapshotTermsKept = 4

// snapshotTerms is the snapshot store, remembering the index and term of
// the last few snapshots written (sink closed) or opened through it.
// Goroutine-safe.
type snapshotTerms struct {
	raft.SnapshotStore
	mu   sync.Mutex
	seen [snapshotTermsKept]struct{ index, term uint64 }
}

// Create implements raft.SnapshotStore.
func (s *snapshotTerms) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration, configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	sink, err := s.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		return nil, err
	}
	return &termedSink{SnapshotSink: sink, closed: func() { s.remember(index, term) }}, nil
}

// Open implements raft.SnapshotStore.
func (s *snapshotTerms) Open(id string) (*raft.SnapshotMeta, io.ReadCloser, error) {
	meta, rc, err := s.SnapshotStore.Open(id)
	if err == nil {
		s.remember(meta.Index, meta.Term)
	}
	return meta, rc, err
}

// term returns the term of the remembered snapshot at index.
func (s *snapshotTerms) term(index uint64) (uint64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.seen {
		if e.index == index && index != 0 {
			return e.term, true
		}
	}
	return 0, false
}

// remember records a snapshot, in place of the oldest remembered one.
func (s *snapshotTerms) remember(index, term uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	oldest := 0
	for i, e := range s.seen {
		if e.index == index {
			return
		}
		if e.index < s.seen[oldest].index {
			oldest = i
		}
	}
	s.seen[oldest].index, s.seen[oldest].term = index, term
}

// termedSink calls closed once the snapshot is durably written.
type termedSink struct {
	raft.SnapshotSink
	closed func()
}

func (s *termedSink) Close() error {
	if err := s.SnapshotSink.Close(); err != nil {
		return err
	}
	s.closed()
	return nil
}

// Restored tells the anchors that the FSM was restored from the snapshot at
// index (anchoredLogs.restored); a no-op without stores or anchors.
func (st *Stores) Restored(index uint64) error {
	if st == nil || st.anchors == nil {
		return nil
	}
	return st.anchors.restored(index)
}

// WithAnchors wraps the log and snapshot stores as anchoredLogs describes:
// applied returns the local FSM's applied index, leading whether this node
// is the Raft leader.
func (st *Stores) WithAnchors(applied func() uint64, leading func() bool) {
	snaps := &snapshotTerms{SnapshotStore: st.Snaps}
	st.anchors = &anchoredLogs{LogStore: st.Logs, snaps: snaps, applied: applied, leading: leading}
	st.Logs, st.Snaps = st.anchors, snaps
}
