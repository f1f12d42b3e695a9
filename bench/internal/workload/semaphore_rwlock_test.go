package workload

import (
	"testing"

	"github.com/raftlock/raftlock/bench/internal/agent"
)

func TestPeakHeldAndWriterOverlaps(t *testing.T) {
	op := func(granted, unlock int64) agent.Op { return agent.Op{Granted: granted, UnlockStart: unlock} }
	ops := [][]agent.Op{
		{op(0, 10), op(20, 30)},
		{op(5, 15)},
		{op(10, 20)}, // begins as the first ends: not an overlap
	}
	if got := peakHeld(ops); got != 2 {
		t.Fatalf("peak %d, want 2", got)
	}
	readers := []worker{{}, {}, {}}
	for i := range readers {
		readers[i].spec.Mode = agent.ModeRead
	}
	if n := writerOverlaps(ops, readers); n != 0 {
		t.Fatalf("readers only: %d overlaps", n)
	}
	readers[1].spec.Mode = agent.ModeWrite // [5,15) overlaps [0,10) and [10,20)
	if n := writerOverlaps(ops, readers); n != 2 {
		t.Fatalf("%d overlaps with a writer, want 2", n)
	}
}
