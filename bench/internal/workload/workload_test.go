package workload

import (
	"math"
	"slices"
	"testing"

	"github.com/raftlock/raftlock/bench/internal/agent"
)

func TestHandoffs(t *testing.T) {
	// Three holders in a row, given out of order; the third was granted
	// 2 ns after the second called Unlock, before its Unlock returned.
	grants := []agent.Op{
		{Granted: 20, UnlockStart: 25, UnlockEnd: 40},
		{Granted: 0, UnlockStart: 5, UnlockEnd: 9},
		{Granted: 27, UnlockStart: 30, UnlockEnd: 35},
	}
	gaps, overlaps := Handoffs(grants)
	if !slices.Equal(gaps, []int64{15, 2}) || overlaps != 0 {
		t.Errorf("gaps %v overlaps %d", gaps, overlaps)
	}
	if grants[0].Granted != 20 {
		t.Error("Handoffs reordered its input")
	}
	// A grant before the previous holder called Unlock breaks mutual
	// exclusion: counted, not measured.
	_, overlaps = Handoffs([]agent.Op{{Granted: 0, UnlockStart: 10}, {Granted: 5, UnlockStart: 12}})
	if overlaps != 1 {
		t.Errorf("overlaps %d, want 1", overlaps)
	}
}

func TestSplit(t *testing.T) {
	if got := split(100, 3); !slices.Equal(got, []int{34, 33, 33}) {
		t.Errorf("split(100, 3) = %v", got)
	}
	if got := split(2, 3); !slices.Equal(got, []int{1, 1, 0}) {
		t.Errorf("split(2, 3) = %v", got)
	}
}

func TestSpread(t *testing.T) {
	ws := spread(5, []int{0, 2}, func(w int) string { return string(rune('a' + w)) })
	var replicas []int
	var names string
	for _, w := range ws {
		replicas = append(replicas, w.replica)
		names += w.spec.Name
	}
	if !slices.Equal(replicas, []int{0, 2, 0, 2, 0}) || names != "abcde" {
		t.Errorf("replicas %v names %q", replicas, names)
	}
}

func TestInWindow(t *testing.T) {
	run := &loopRun{
		ops:  [][]agent.Op{{{UnlockEnd: 5}, {UnlockEnd: 10}}, {{UnlockEnd: 20}, {UnlockEnd: 21}}},
		from: 10, to: 20,
	}
	if got := len(run.inWindow()); got != 2 {
		t.Errorf("inWindow: %d ops, want 2", got)
	}
}

func TestPerGrant(t *testing.T) {
	if got := perGrant(1020, 1000); got != 1.02 {
		t.Errorf("perGrant(1020, 1000) = %v, want 1.02", got)
	}
	if got := perGrant(5, 0); !math.IsNaN(got) {
		t.Errorf("perGrant without grants = %v, want NaN", got)
	}
}
