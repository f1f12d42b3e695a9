package storage

import (
	"time"

	"github.com/hashicorp/raft"
)

// Snapshot pacing. Raft persists a snapshot on a goroutine of its own
// while the FSM goes on applying: encoding a million locks keeps a core
// busy for a second or more, and on a small machine that core is the one
// Raft, the applies, the RPCs and the keepalives queue for — on a 2-core
// host the Lock+Unlock p99 during a 1M-lock snapshot was several times the
// quiet one. pacedFSM rests the encoder after every chunk it writes for as
// long as the chunk took (at most maxSnapshotRest), so that a snapshot uses
// at most about half of a core and takes about twice as long: nothing waits
// for a snapshot but the log compaction behind it. Once the node closes
// (Raft's shutdown waits for a Persist under way), it rests no more.
const maxSnapshotRest = 20 * time.Millisecond

// Paced returns the state machine as Raft sees it: f (all of its methods,
// ApplyBatch included) with paced snapshots; closing stop ends the pacing.
func Paced(f raft.BatchingFSM, stop <-chan struct{}) raft.BatchingFSM {
	return pacedFSM{f, stop}
}

// pacedFSM is the state machine with paced snapshots (Paced).
type pacedFSM struct {
	raft.BatchingFSM
	stop <-chan struct{}
}

// Snapshot implements raft.FSM.
func (f pacedFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := f.BatchingFSM.Snapshot()
	if err != nil {
		return nil, err
	}
	return pacedSnapshot{s, f.stop}, nil
}

type pacedSnapshot struct {
	raft.FSMSnapshot
	stop <-chan struct{}
}

// Persist implements raft.FSMSnapshot.
func (s pacedSnapshot) Persist(sink raft.SnapshotSink) error {
	return s.FSMSnapshot.Persist(&pacedSink{SnapshotSink: sink, stop: s.stop, since: time.Now()})
}

// pacedSink rests after each write for as long as the writer worked since
// the previous rest.
type pacedSink struct {
	raft.SnapshotSink
	stop  <-chan struct{}
	since time.Time
}

func (s *pacedSink) Write(p []byte) (int, error) {
	n, err := s.SnapshotSink.Write(p)
	rest := time.NewTimer(min(time.Since(s.since), maxSnapshotRest))
	select {
	case <-rest.C:
	case <-s.stop:
		rest.Stop()
	}
	s.since = time.Now()
	return n, err
}
