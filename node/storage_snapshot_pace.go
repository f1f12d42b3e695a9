package node

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/leasetrace"
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

// pacedFSM is the state machine as Raft sees it: the FSM (all of its
// methods, ApplyBatch included) with paced snapshots; closing stop ends
// the pacing.
type pacedFSM struct {
	*fsm.FSM
	stop  <-chan struct{}
	trace func() leasetrace.Sink // the node's lease trace (Node.leaseTrace)
}

// Apply implements raft.FSM.
func (f pacedFSM) Apply(l *raft.Log) interface{} {
	traceApplied(f.sink(), l)
	return f.FSM.Apply(l)
}

func (f pacedFSM) sink() leasetrace.Sink {
	if f.trace == nil {
		return nil
	}
	return f.trace()
}

// ApplyBatch implements raft.BatchingFSM.
func (f pacedFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	if s := f.sink(); s != nil {
		for _, l := range logs {
			traceApplied(s, l)
		}
	}
	return f.FSM.ApplyBatch(logs)
}

// Snapshot implements raft.FSM.
func (f pacedFSM) Snapshot() (raft.FSMSnapshot, error) {
	s, err := f.FSM.Snapshot()
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
