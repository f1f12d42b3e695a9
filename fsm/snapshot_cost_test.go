package fsm

import (
	"runtime"
	"testing"

	"github.com/raftlock/raftlock/internal/fsmwire"
)

// allocated returns the bytes f allocates on this goroutine's watch.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Issue 21 #4: Snapshot runs on Raft's apply goroutine; it copied the maps
// of every lock and session (O(n): half a second at a million locks, every
// apply stalled behind it). What it allocates must not grow with the
// number of locks.
func TestSnapshotCostDoesNotGrowWithState(t *testing.T) {
	small, large := populate(t, 2_000), populate(t, 200_000)
	cost := func(h *harness) uint64 {
		return allocated(func() {
			s, err := h.f.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			s.Release()
		})
	}
	cs, cl := cost(small), cost(large)
	if cl > 2*cs+64<<10 {
		t.Fatalf("Snapshot of 200,000 locks allocated %d bytes, of 2,000 locks %d: it copies the state", cl, cs)
	}
	// The copy-on-write still isolates the snapshot: a lock released after
	// it is still held in the snapshot's bytes.
	s, _ := large.f.Snapshot()
	before := &bufSink{}
	if err := s.Persist(before); err != nil {
		t.Fatal(err)
	}
	s, _ = large.f.Snapshot()
	wantStatus(t, "release", large.do(Release{Lock: "invoice:7", Owner: ownerN(7)}), fsmwire.StatusOK)
	after := &bufSink{}
	if err := s.Persist(after); err != nil {
		t.Fatal(err)
	}
	if string(before.Bytes()) != string(after.Bytes()) {
		t.Fatal("a change after Snapshot reached the snapshot")
	}
}
