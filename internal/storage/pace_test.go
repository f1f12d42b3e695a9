package storage

import (
	"bytes"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
)

// Raft sees the FSM through pacedFSM: it must still find the batching and
// configuration-store interfaces it looks for by type assertion.
var _ raft.BatchingFSM = pacedFSM{}

// slowSink is a snapshot sink whose writes take (fake) time, as encoding
// and writing a chunk does.
type slowSink struct {
	bytes.Buffer
	per    time.Duration
	writes int
}

func (s *slowSink) Write(p []byte) (int, error) {
	time.Sleep(s.per)
	s.writes++
	return s.Buffer.Write(p)
}
func (*slowSink) ID() string    { return "slow" }
func (*slowSink) Cancel() error { return nil }
func (*slowSink) Close() error  { return nil }

// Issue 21 #4: a snapshot's Persist kept a core busy for its whole length
// (a second or more at a million locks) while Raft, the applies and the
// RPCs waited for a processor. Raft's snapshots are paced: after each
// chunk the encoder rests as long as the chunk took, so a Persist takes
// about twice its working time — and the bytes are the FSM's, unchanged.
func TestRaftSnapshotsArePaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := fsm.New(nil)
		var want bytes.Buffer
		if err := f.WriteSnapshot(&want); err != nil {
			t.Fatal(err)
		}
		s, err := pacedFSM{BatchingFSM: f, stop: make(chan struct{})}.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		sink := &slowSink{per: 3 * time.Millisecond}
		start := time.Now()
		if err := s.Persist(sink); err != nil {
			t.Fatal(err)
		}
		took := time.Since(start)
		if work := time.Duration(sink.writes) * sink.per; took < 2*work {
			t.Fatalf("Persist of %d writes of %v each took %v: not paced (want ≥ %v)", sink.writes, sink.per, took, 2*work)
		}
		if !bytes.Equal(sink.Bytes(), want.Bytes()) {
			t.Fatal("a paced snapshot's bytes differ from the FSM's")
		}
	})
}

// A write that blocks for long (a slow disk) is followed by a rest of at
// most maxSnapshotRest.
func TestSnapshotRestIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sink := &pacedSink{SnapshotSink: &slowSink{per: time.Second}, stop: make(chan struct{}), since: time.Now()}
		start := time.Now()
		if _, err := sink.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		if took := time.Since(start); took != time.Second+maxSnapshotRest {
			t.Fatalf("a 1 s write took %v with its rest, want %v", took, time.Second+maxSnapshotRest)
		}
	})
}

// Once the node closes, a Persist under way (which Raft's shutdown waits
// for) rests no more.
func TestSnapshotRestEndsAtClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		stop := make(chan struct{})
		sink := &pacedSink{SnapshotSink: &slowSink{per: 10 * time.Millisecond}, stop: stop, since: time.Now()}
		start := time.Now()
		sink.Write([]byte("x"))
		if took := time.Since(start); took != 20*time.Millisecond {
			t.Fatalf("open: a 10 ms write took %v with its rest, want 20ms", took)
		}
		close(stop)
		start = time.Now()
		sink.Write([]byte("x"))
		if took := time.Since(start); took != 10*time.Millisecond {
			t.Fatalf("closed: a 10 ms write took %v, want 10ms (no rest)", took)
		}
	})
}
