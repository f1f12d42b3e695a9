package fsm

import (
	"testing"

	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Apply costs of the primitives, on the base table of the apply benchmarks
// (cluster version 3).

func newApplyBenchV3(b *testing.B) *applyBench {
	ab := newApplyBench(b)
	ab.setup(SetClusterVersion{Version: 3})
	return ab
}

// BenchmarkApplySemaphoreAcquire: a grant of one permit of a semaphore
// that has permits free (and 100 holders).
func BenchmarkApplySemaphoreAcquire(b *testing.B) {
	ab := newApplyBenchV3(b)
	const limit = 1 << 20
	for range 100 {
		_, o, s := ab.fresh()
		ab.setup(Acquire{Session: s, Lock: "pool", Owner: o, Limit: limit, Permits: 1})
	}
	ab.run(func(n int) {
		acq, rel := make([]Command, n), make([]Command, n)
		for i := range n {
			_, o, s := ab.fresh()
			acq[i], rel[i] = Acquire{Session: s, Lock: "pool", Owner: o, Limit: limit, Permits: 1}, Release{Lock: "pool", Owner: o}
		}
		ab.timed(acq)
		ab.setup(rel...)
	})
}

// BenchmarkApplySemaphoreHandoff: the release of one permit of a full
// semaphore of 4 permits, which grants it to the first waiter in the same
// command.
func BenchmarkApplySemaphoreHandoff(b *testing.B) {
	ab := newApplyBenchV3(b)
	var held []lockinfo.OwnerID
	for range 4 {
		_, o, s := ab.fresh()
		ab.setup(Acquire{Session: s, Lock: "pool", Owner: o, Limit: 4, Permits: 1})
		held = append(held, o)
	}
	ab.run(func(n int) {
		rel := make([]Command, n)
		for i := range n {
			_, o, s := ab.fresh()
			ab.setup(Acquire{Session: s, Lock: "pool", Owner: o, Limit: 4, Permits: 1, Wait: true})
			rel[i] = Release{Lock: "pool", Owner: held[0]}
			held = append(held[1:], o)
		}
		ab.timed(rel)
	})
}

// BenchmarkApplyReadAcquire: a read grant of a lock that 100 readers hold.
func BenchmarkApplyReadAcquire(b *testing.B) {
	ab := newApplyBenchV3(b)
	for range 100 {
		_, o, s := ab.fresh()
		ab.setup(Acquire{Session: s, Lock: "rw", Owner: o, Shared: true})
	}
	ab.run(func(n int) {
		acq, rel := make([]Command, n), make([]Command, n)
		for i := range n {
			_, o, s := ab.fresh()
			acq[i], rel[i] = Acquire{Session: s, Lock: "rw", Owner: o, Shared: true}, Release{Lock: "rw", Owner: o}
		}
		ab.timed(acq)
		ab.setup(rel...)
	})
}

// BenchmarkApplyWriterToReaders: the release of a writer with 16 readers
// and then a writer queued behind it: one command grants the 16 readers.
// Per command (17 grants' worth of events).
func BenchmarkApplyWriterToReaders(b *testing.B) {
	ab := newApplyBenchV3(b)
	_, w, s := ab.fresh()
	ab.setup(Acquire{Session: s, Lock: "rw", Owner: w})
	ab.run(func(n int) {
		rel := make([]Command, n)
		for i := range n {
			var readers []Command
			for range 16 {
				_, o, s := ab.fresh()
				ab.setup(Acquire{Session: s, Lock: "rw", Owner: o, Shared: true, Wait: true})
				readers = append(readers, Release{Lock: "rw", Owner: o})
			}
			_, next, s := ab.fresh()
			ab.setup(Acquire{Session: s, Lock: "rw", Owner: next, Wait: true})
			rel[i] = Release{Lock: "rw", Owner: w}
			ab.timed(rel[i : i+1])
			ab.setup(readers...) // the last reader hands the lock to the next writer
			w = next
		}
	})
}

// BenchmarkApplySetValue: a holder replaces its grant's value.
func BenchmarkApplySetValue(b *testing.B) {
	ab := newApplyBenchV3(b)
	_, o, s := ab.fresh()
	ab.setup(Acquire{Session: s, Lock: "leader", Owner: o, Value: "a:7400"})
	ab.run(func(n int) {
		cmds := make([]Command, n)
		for i := range n {
			cmds[i] = SetValue{Session: s, Lock: "leader", Owner: o, Value: "a:7401"}
		}
		ab.timed(cmds)
	})
}
