package node

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/leasetrace"
)

// The FSM observer: what the local state machine applies reaches the
// subscriptions, the expiry manager, the metrics and the applied index.

// observer receives what the FSM applies (on Raft's FSM goroutine).
type observer Node

func (o *observer) Applied(index uint64, events []fsm.Event) {
	n := (*Node)(o)
	for i := range events {
		if events[i].FromQueue {
			if n.started.Load() && n.raft.State() == raft.Leader {
				n.announcer.collect(events)
			}
			break
		}
	}
	n.events.dispatch(events)
	for i := range events {
		if events[i].Kind == fsmwire.EventRestored {
			// A restore replaced the state at this index (a replicated
			// command, fsm.RestoreCommit): as after a snapshot restore,
			// minus the log compaction — the log holds the restore.
			n.applied.advance(index)
			n.events.resyncAll()
			n.applyTimes.restoredDelays()
			n.expiry.restored()
			break
		}
	}
	n.announcer.forgetHomes(events)
	n.applyTimes.observe(events, time.Now(), n.fsm.DelayedLocks)
	n.expiry.observe(events)
	n.metrics.observeEvents(events)
	for i := range events {
		if events[i].Kind == fsmwire.EventClusterChanged {
			n.adoptClusterID()
			break
		}
	}
	n.applied.advance(index) // last: a caller woken by it finds its events delivered
}

// Halted is told by the FSM that it stopped applying (fsm.Observer with a Halted method).
func (o *observer) Halted(index uint64, err error) { (*Node)(o).halted(index, err) }

func (o *observer) Restored(index uint64) {
	n := (*Node)(o)
	if s := n.leaseTrace(); s != nil {
		s.Record(leasetrace.Event{At: time.Now().UnixNano(), Kind: leasetrace.Restored, Index: index})
	}
	if err := n.store.Restored(index); err != nil { // storage.Stores.WithAnchors
		n.log.Warn("could not drop the log entries below the restored snapshot", "index", index, "error", err)
	}
	n.applied.advance(index) // first: a subscriber that resyncs judges the state by it
	n.events.resyncAll()
	n.applyTimes.restored(time.Now())
	n.expiry.restored()
	n.adoptClusterID()
}

// RestoreRefused is told by the FSM that it refused a snapshot older than
// its applied state (fsm.Observer with a RestoreRefused method): the leader that sent it is asked
// for a newer one.
func (o *observer) RestoreRefused(index, applied uint64) {
	n := (*Node)(o)
	if n.snapAsks != nil && n.started.Load() && n.raft.State() != raft.Leader {
		n.snapAsks.refused(index, applied)
	}
}
