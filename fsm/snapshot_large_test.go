package fsm

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Issue 14 #4: 700,000 waiters on one lock made an 18.9 MB lock record that
// Restore refused (records were limited to 16 MiB): a restarted replica
// could not start, a lagging one could not install the snapshot. Whatever
// state the FSM reaches, its snapshot restores — in the format of cluster
// version 1 (one record per lock, as the previous release writes it) and of
// version 2 (continuation records).
func TestLargeWaiterListSnapshotRestores(t *testing.T) {
	const n = 700_000
	h := newHarness(t)
	h.f, h.rec = New(nil), nil
	a := h.open(time.Minute, 0, "holder")
	w := h.open(time.Minute, 0, "waiters")
	h.do(Acquire{Session: a, Lock: "hot", Owner: owner(1)})
	batch := make([]Command, 0, fsmwire.MaxEntryCommands)
	for i := 0; i < n; i++ {
		batch = append(batch, Acquire{Session: w, Lock: "hot", Owner: ownerN(i + 10), Wait: true})
		if len(batch) == cap(batch) || i == n-1 {
			h.entry(batch...)
			batch = batch[:0]
		}
	}
	for _, version := range []uint64{1, 2} {
		if version == 2 {
			h.do(SetClusterVersion{Version: 2})
		}
		snap := h.snapshot()
		if snap[4] != byte(version) {
			t.Fatalf("cluster version %d wrote snapshot version %d", version, snap[4])
		}
		f := New(nil)
		if err := f.Restore(readCloser(snap)); err != nil {
			t.Fatalf("version %d: snapshot of %d bytes with %d waiters does not restore: %v", version, len(snap), n, err)
		}
		var again bytes.Buffer
		if err := f.WriteSnapshot(&again); err != nil || !bytes.Equal(again.Bytes(), snap) {
			t.Fatalf("version %d: restored state snapshots differently (%v)", version, err)
		}
		if st := f.Stats(); st.Waiters != n || st.Sessions != 2 {
			t.Fatalf("version %d: restored %+v", version, st)
		}
	}
}

// Random states with long queues (past a record's worth of waiters) and
// long exactly-once tables (past a record's worth of results), at either
// version, snapshot, restore and snapshot again to the same bytes.
func TestSnapshotRoundTripOfLargeStates(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(rt)
		h.f, h.rec = New(nil), nil
		if rapid.Bool().Draw(rt, "version 2") {
			h.do(SetClusterVersion{Version: 2})
			h.do(SetLimits{Limits: Limits{RequestWindow: fsmwire.MaxRequestWindow}})
		}
		s := h.open(time.Minute, time.Second, "s")
		owners := 0
		for i, nl := 0, rapid.IntRange(1, 3).Draw(rt, "locks"); i < nl; i++ {
			name := fmt.Sprintf("lock-%d", i)
			h.do(Acquire{Session: s, Lock: name, Owner: ownerN(owners)})
			owners++
			n := rapid.IntRange(0, 3).Draw(rt, "waiters")
			if rapid.IntRange(0, 5).Draw(rt, "long queue") == 0 {
				n = rapid.SampledFrom([]int{itemsPerRecord - 1, itemsPerRecord, itemsPerRecord + 1, 2*itemsPerRecord + 3}).Draw(rt, "long")
			}
			var batch []Command
			for range n {
				batch = append(batch, Acquire{Session: s, Lock: name, Owner: ownerN(owners), Wait: true})
				owners++
			}
			if len(batch) > 0 {
				h.entry(batch...)
			}
		}
		if h.f.ClusterVersion() == 2 {
			n := rapid.IntRange(0, 3).Draw(rt, "results")
			if rapid.IntRange(0, 3).Draw(rt, "long table") == 0 {
				n = rapid.SampledFrom([]int{resultsPerRecord, resultsPerRecord + 1, 2*resultsPerRecord + 5}).Draw(rt, "long")
			}
			var batch []Command
			for i := range n {
				batch = append(batch, Acquire{Session: s, Lock: "busy-0", Owner: ownerN(owners), Seq: uint64(i + 1), AckBelow: 1})
				owners++
			}
			if len(batch) > 0 {
				h.entry(batch...)
			}
			if rapid.Bool().Draw(rt, "expire") {
				h.do(ExpireSessions{Sessions: []lockinfo.SessionID{s}})
			}
		}
		snap := h.snapshot()
		f := New(nil)
		if err := f.Restore(readCloser(snap)); err != nil {
			rt.Fatalf("restore: %v", err)
		}
		checkInvariants(rt, f)
		var again bytes.Buffer
		if err := f.WriteSnapshot(&again); err != nil || !bytes.Equal(again.Bytes(), snap) {
			rt.Fatalf("snapshot → restore → snapshot differs (%v)", err)
		}
	})
}
