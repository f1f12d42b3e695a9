package node

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// A snapshot older than what was applied (hashicorp/raft installs one when
// a leader walks back below a follower's log) lowers the applied index: a
// reader waiting for a later index waits until the entries after the
// snapshot are applied again, instead of reading the snapshot's older
// state at once. advance never lowers it.
func TestAppliedIndexRestoreLowers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var a appliedIndex
		a.advance(34)
		a.advance(30) // an old index: no effect
		if got := a.get(); got != 34 {
			t.Fatalf("after advance(34), advance(30): %d, want 34", got)
		}
		a.restore(32)
		if got := a.get(); got != 32 {
			t.Fatalf("after restore(32): %d, want 32", got)
		}
		done := make(chan error, 1)
		go func() { done <- a.wait(context.Background(), 34) }()
		time.Sleep(time.Second)
		select {
		case err := <-done:
			t.Fatalf("wait(34) returned (%v) while the state is the snapshot of 32", err)
		default:
		}
		a.advance(33)
		a.advance(34) // re-applied
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if err := a.wait(context.Background(), 32); err != nil {
			t.Fatal(err)
		}
	})
}
