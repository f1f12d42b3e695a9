package node

import (
	"testing"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
)

// Issue 20 (also noted): after a snapshot restore, a subscription told to
// resync re-reads the state and judges it by the node's applied index
// (lockapi does), so the index must already be the snapshot's.
func TestRestoreAdvancesTheAppliedIndexBeforeResync(t *testing.T) {
	n := &Node{fsm: fsm.New(nil)}
	n.events = newEventHub(nil)
	n.expiry = newExpiryManager(expiryHost{fsm: n.fsm})
	n.applied.advance(10)
	var seen uint64
	f := func() { seen = n.applied.get() }
	n.events.beforeResync.Store(&f)
	sub := n.events.add(replica.EventFilter{All: true}, 1)
	(*observer)(n).Restored(42)
	select {
	case <-sub.view.Resync:
	default:
		t.Fatal("no resync signalled")
	}
	if seen != 42 {
		t.Fatalf("subscriptions were told to resync at applied index %d, before the restored 42", seen)
	}
}

// A restore command (fsm.EventRestored) resyncs subscriptions as a
// snapshot restore does, the applied index already at the restore's.
func TestRestoreCommandResyncsAtItsIndex(t *testing.T) {
	n := &Node{fsm: fsm.New(nil)}
	n.events = newEventHub(nil)
	n.expiry = newExpiryManager(expiryHost{fsm: n.fsm})
	n.announcer = newAnnouncer(announcerHost{})
	n.metrics = newMetrics(n)
	n.applied.advance(10)
	var seen uint64
	f := func() { seen = n.applied.get() }
	n.events.beforeResync.Store(&f)
	sub := n.events.add(replica.EventFilter{All: true}, 1)
	(*observer)(n).Applied(42, []fsm.Event{{Kind: fsmwire.EventRestored, Index: 42}})
	select {
	case <-sub.view.Resync:
	default:
		t.Fatal("no resync signalled")
	}
	if seen != 42 {
		t.Fatalf("subscriptions were told to resync at applied index %d, before the restore's 42", seen)
	}
}
