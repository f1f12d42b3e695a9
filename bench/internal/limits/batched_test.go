package limits

import (
	"context"
	"testing"
	"time"
)

// The ideal group commit answers every worker: with 8 workers each of the
// six ways (1 or 2 entries in flight, greedy, gathering by polling or woken
// by each push) commits
// commands, a gathering batcher packs more than one per entry, and no
// entry carries more commands than there are workers.
func TestBatchedRaft(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := BatchedRaft(ctx, t.TempDir(), StoreBolt, []int{8}, []int{1, 2}, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 6 {
		t.Fatalf("%d measurements, want 6: %+v", len(out), out)
	}
	for _, l := range out {
		if l.Store != StoreBolt || l.Workers != 8 || l.CommandsPerSec <= 0 || l.CommandsPerEntry < 1 || l.CommandsPerEntry > 8 || l.Latency.P50 <= 0 {
			t.Errorf("measurement %+v", l)
		}
		if l.Gather && l.Depth == 1 && l.CommandsPerEntry < 6 {
			t.Errorf("gathering (woken %v) with one entry in flight packed %.1f commands per entry, want most of the 8 workers'", l.Woken, l.CommandsPerEntry)
		}
	}
}
