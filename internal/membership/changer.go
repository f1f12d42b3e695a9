package membership

import (
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Changer is the part of Raft that changes a configuration; *raft.Raft
// satisfies it. The leader's reconciler (node) makes every change through
// Execute, so the mapping from a planned Action to a Raft call is in one
// place and testable without a cluster.
type Changer interface {
	AddVoter(id raft.ServerID, addr raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	AddNonvoter(id raft.ServerID, addr raft.ServerAddress, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	DemoteVoter(id raft.ServerID, prevIndex uint64, timeout time.Duration) raft.IndexFuture
	RemoveServer(id raft.ServerID, prevIndex uint64, timeout time.Duration) raft.IndexFuture
}

var _ Changer = (*raft.Raft)(nil)

// ErrUnknownAction is returned by Execute for an Action whose Kind it does
// not know (nothing is changed).
var ErrUnknownAction = errors.New("membership: unknown action")

// Execute starts the configuration change that a stands for and returns its
// future; timeout bounds the wait to enqueue it. Changes are made with
// prevIndex 0: hashicorp/raft v1.7.3 does not report the configuration's
// index through GetConfiguration, and the leader's reconciler is the only
// writer, which makes the check moot.
//
//	AddNonvoter              AddNonvoter(id, addr)
//	Promote                  AddVoter(id, addr)
//	UpdateAddr               AddVoter or AddNonvoter (as a.Voter says) with the new address
//	Demote                   DemoteVoter(id)
//	RemoveLeaving, Replace,
//	Reap                     RemoveServer(id)
func Execute(c Changer, a Action, timeout time.Duration) (raft.IndexFuture, error) {
	id, addr := raft.ServerID(a.RaftID), raft.ServerAddress(a.Addr)
	switch a.Kind {
	case AddNonvoter:
		return c.AddNonvoter(id, addr, 0, timeout), nil
	case Promote:
		return c.AddVoter(id, addr, 0, timeout), nil
	case UpdateAddr:
		if a.Voter {
			return c.AddVoter(id, addr, 0, timeout), nil
		}
		return c.AddNonvoter(id, addr, 0, timeout), nil
	case Demote:
		return c.DemoteVoter(id, 0, timeout), nil
	case RemoveLeaving, Replace, Reap:
		return c.RemoveServer(id, 0, timeout), nil
	}
	return nil, fmt.Errorf("%w %q", ErrUnknownAction, a.Kind)
}
