package node

import (
	"testing"
	"time"

	"github.com/raftlock/raftlock/fsm"
)

// Issue 20 (also noted): a peer whose announcement queue is nearly full gets
// only what fits; that must not cut what later peers get.
func TestAnnounceTruncatesOnlyTheFullPeersQueue(t *testing.T) {
	a := newAnnouncer(&Node{})
	a.peers, a.peersAt = []string{"full", "empty"}, time.Now()
	for _, p := range a.peers {
		a.busy[p] = true // a sender runs already: announce only queues
	}
	a.queues["full"] = make([]fsm.Event, maxPendingGrants-1)
	grants := []fsm.Event{
		{Kind: fsm.EventGranted, FromQueue: true, Lock: "a", Token: 1},
		{Kind: fsm.EventGranted, FromQueue: true, Lock: "b", Token: 2},
		{Kind: fsm.EventGranted, FromQueue: true, Lock: "c", Token: 3},
	}
	a.collect(grants)
	a.announce()
	if got := len(a.queues["full"]); got != maxPendingGrants {
		t.Fatalf("full peer's queue holds %d, want %d", got, maxPendingGrants)
	}
	if got := len(a.queues["empty"]); got != len(grants) {
		t.Fatalf("the next peer got %d of %d grants", got, len(grants))
	}
}
