package node

import (
	"github.com/hashicorp/raft"
	"github.com/raftlock/raftlock/fsm"
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
	n.expiry.observe(events)
	n.metrics.observeEvents(events)
	for i := range events {
		if events[i].Kind == fsm.EventClusterChanged {
			n.adoptClusterID()
			break
		}
	}
	n.applied.advance(index) // last: a caller woken by it finds its events delivered
}

// Halted is told by the FSM that it stopped applying (fsm.HaltObserver).
func (o *observer) Halted(index uint64, err error) { (*Node)(o).halted(index, err) }

func (o *observer) Restored(index uint64) {
	n := (*Node)(o)
	if err := n.store.restored(index); err != nil { // storage_anchor.go
		n.log.Warn("could not drop the log entries below the restored snapshot", "index", index, "error", err)
	}
	prev := n.applied.get()
	n.applied.restore(index) // first: a subscriber that resyncs judges the state by it; lowered if the snapshot is older
	n.events.resyncAll()
	n.expiry.restored()
	n.adoptClusterID()
	if index < prev && n.started.Load() && n.raft.State() != raft.Leader {
		// An older snapshot than what was applied (see appliedIndex.restore):
		// raft applies the entries after it again only once it learns of a
		// commit beyond the one it knows, which a quiet cluster may never
		// send. Ask the leader for one.
		n.log.Info("installed a snapshot older than the applied state; re-applying the entries after it", "snapshot_index", index, "applied_before", prev)
		n.nudges.ask(n.raft.CommitIndex() + 1)
	}
}
