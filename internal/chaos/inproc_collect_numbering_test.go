package chaos

import (
	"testing"

	"github.com/raftlock/raftlock/fsm"
)

// TestNumberEventsIgnoresResyncMidEntry: a Resync received between two
// events of one entry (the restore came after the entry was applied, its
// events still queued) must not shift the positions of the entry's other
// events. The receiver picks between the ready channels at random, so the
// test repeats until the Resync has landed inside the entry many times.
func TestNumberEventsIgnoresResyncMidEntry(t *testing.T) {
	inside := 0
	for round := 0; round < 500 && inside < 20; round++ {
		events := make(chan fsm.Event, 8)
		for _, k := range []fsm.EventKind{fsm.EventSessionExpired, fsm.EventSessionOpened, fsm.EventSessionOpened} {
			events <- fsm.Event{Index: 410, Kind: k}
		}
		resync, stop, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
		var got []int
		recorded := make(chan struct{}, 8)
		go func() {
			defer close(done)
			numberEvents(events, resync, stop, func(_ fsm.Event, seq int) {
				got = append(got, seq)
				recorded <- struct{}{}
			})
		}()
		resync <- struct{}{} // unbuffered: received before, between or after the events
		before := len(recorded)
		for range 3 {
			<-recorded
		}
		close(stop)
		<-done
		if before > 0 && before < 3 {
			inside++
		}
		for i, seq := range got {
			if seq != i {
				t.Fatalf("round %d: positions %v with a Resync among the events, want [0 1 2]", round, got)
			}
		}
	}
	if inside == 0 {
		t.Fatal("the Resync never landed between two events of the entry: the test did not test")
	}
}
