package chaos

import (
	"slices"
	"testing"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
)

// TestNumberEventsIgnoresResyncMidEntry: a Resync received between two
// events of one entry (the restore came after the entry was applied, its
// events still queued) must not shift the positions of the entry's other
// events. The channels are unbuffered and fed one message at a time, so
// the collector receives the Resync exactly where the test puts it: before,
// between or after the entry's three events.
func TestNumberEventsIgnoresResyncMidEntry(t *testing.T) {
	kinds := []fsmwire.EventKind{fsmwire.EventSessionExpired, fsmwire.EventSessionOpened, fsmwire.EventSessionOpened}
	for at := 0; at <= len(kinds); at++ {
		events, resync, stop, done := make(chan fsm.Event), make(chan struct{}), make(chan struct{}), make(chan struct{})
		var got []int
		go func() {
			defer close(done)
			numberEvents(events, resync, stop, func(_ fsm.Event, seq int) { got = append(got, seq) }, nil)
		}()
		for i, k := range kinds {
			if i == at {
				resync <- struct{}{}
			}
			events <- fsm.Event{Index: 410, Kind: k}
		}
		if at == len(kinds) {
			resync <- struct{}{}
		}
		close(stop)
		<-done
		if !slices.Equal(got, []int{0, 1, 2}) {
			t.Fatalf("Resync before event %d: positions %v, want [0 1 2]", at, got)
		}
	}
}
