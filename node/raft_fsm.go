package node

import (
	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/leasetrace"
)

// tracedFSM is the state machine as Raft applies it: the FSM (all of its
// methods, ApplyBatch included), each command entry reported to the node's
// lease trace (traceApplied) before it is applied. storage.Paced wraps it
// for Raft's snapshots.
type tracedFSM struct {
	*fsm.FSM
	trace func() leasetrace.Sink // the node's lease trace (Node.leaseTrace)
}

// Apply implements raft.FSM.
func (f tracedFSM) Apply(l *raft.Log) interface{} {
	traceApplied(f.sink(), l)
	return f.FSM.Apply(l)
}

func (f tracedFSM) sink() leasetrace.Sink {
	if f.trace == nil {
		return nil
	}
	return f.trace()
}

// ApplyBatch implements raft.BatchingFSM.
func (f tracedFSM) ApplyBatch(logs []*raft.Log) []interface{} {
	if s := f.sink(); s != nil {
		for _, l := range logs {
			traceApplied(s, l)
		}
	}
	return f.FSM.ApplyBatch(logs)
}
