package node

import (
	"context"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
)

// The read accessors below read this node's FSM: they are fast, never block
// on the network, and may be stale on a follower (by its replication lag) or
// on a partitioned node. Call Sync first for a linearizable read. Listings
// come in pages with a cursor (fsm.FSM.Locks says what pages read while the
// state changes may miss or repeat): no read holds up the node's applies or
// keepalives for longer than its page.

// Holder returns the current holder of a lock, and false if it is free.
func (n *Node) Holder(name string) (lockinfo.Holder, bool) { return n.fsm.Holder(name) }

// Lock returns a lock's holder, its first FIFO waiters and shared grants
// (at most 1,000 of each; LockInfo.WaiterCount and SharedCount count them
// all) and its lock-delay, and false if it has none.
func (n *Node) Lock(name string) (lockinfo.LockInfo, bool) { return n.fsm.Lock(name) }

// lockAt returns a lock (or semaphore) as the local FSM has it, with the
// index of the last entry applied, read at once (fsm.FSM.LockAt): a
// subscriber to the lock's events that reads it after subscribing skips
// the events of entries at or below that index.
func (n *Node) lockAt(name string) (lockinfo.LockInfo, uint64, bool) { return n.fsm.LockAt(name) }

// Locks returns a page of the locks whose names start with prefix, in name
// order after the name after ("": from the first), at most limit (1 to
// 1,000), each with its first 8 waiters and shared grants; more reports
// whether locks follow (the next page starts after the page's last name).
func (n *Node) Locks(prefix, after string, limit int) (page []lockinfo.LockInfo, more bool) {
	return n.fsm.Locks(prefix, after, limit)
}

// Waiters returns a page of a lock's FIFO queue from cursor ("": the
// front), at most limit (1 to 1,000), and the cursor of the next page (""
// at the end); see fsm.FSM.Waiters. A cursor that no page returned:
// ErrInvalidArgument (and fsm.ErrInvalidCursor).
func (n *Node) Waiters(name, cursor string, limit int) (page []lockinfo.Waiter, next string, err error) {
	page, next, err = n.fsm.Waiters(name, cursor, limit)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return page, next, nil
}

// SharedGrants returns a page of a lock's shared grants (its readers, or a
// semaphore's holders) in grant order, as Waiters pages its queue.
func (n *Node) SharedGrants(name, cursor string, limit int) (page []lockinfo.Holder, next string, err error) {
	page, next, err = n.fsm.SharedGrants(name, cursor, limit)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	return page, next, nil
}

// owner returns where the acquisition (name, owner) stands.
func (n *Node) owner(name string, owner lockinfo.OwnerID) fsm.OwnerState {
	return n.fsm.Owner(name, owner)
}

// Session returns a live session, and false if it does not exist.
func (n *Node) Session(id lockinfo.SessionID) (lockinfo.SessionInfo, bool) { return n.fsm.Session(id) }

// Sessions returns a page of the live sessions in id order after the id
// after (0: from the first), at most limit (1 to 1,000); more reports
// whether sessions follow.
func (n *Node) Sessions(after lockinfo.SessionID, limit int) (page []lockinfo.SessionInfo, more bool) {
	return n.fsm.Sessions(after, limit)
}

// sessionAcquisitions returns every acquisition (lock, owner) of a session,
// held or waiting, of every kind, in lock-name order.
func (n *Node) sessionAcquisitions(id lockinfo.SessionID) []fsm.Acquisition {
	return n.fsm.SessionAcquisitions(id)
}

// Stats returns counters of the local FSM.
func (n *Node) Stats() fsm.Stats { return n.fsm.Stats() }

// digest returns the applied index and a hash of the FSM state: replicas at
// the same applied index have the same digest.
func (n *Node) digest() (uint64, [32]byte) { return n.fsm.Digest() }

// subscribe returns a subscription to the events the local FSM applies that
// match f, with a buffer of buf events (at least 1). Close it when done.
// Only events applied after subscribe returns are delivered: to see every
// entry of a node's log (the formation entries included), subscribe right
// after Start returns — before Start, nothing is applied; after the node is
// ready, the first entries are already applied.
func (n *Node) subscribe(f replica.EventFilter, buf int) (*replica.Subscription, error) {
	set := 0
	for _, b := range []bool{f.All, !f.Owner.IsZero(), f.Session != 0, f.Lock != ""} {
		if b {
			set++
		}
	}
	if set != 1 {
		return nil, fmt.Errorf("%w: event filter must set exactly one of Owner, Session, Lock, All", ErrInvalidArgument)
	}
	if f.EarlyGrants && f.Owner.IsZero() && f.Session == 0 {
		return nil, fmt.Errorf("%w: EarlyGrants needs an Owner or Session filter", ErrInvalidArgument)
	}
	if f.OnEarlyGrant != nil && !f.EarlyGrants {
		return nil, fmt.Errorf("%w: OnEarlyGrant needs EarlyGrants", ErrInvalidArgument)
	}
	return &n.events.add(f, max(buf, 1)).view, nil
}

// GossipAddr returns the node's advertised gossip address ("" without gossip).
func (n *Node) GossipAddr() string {
	if n.members == nil {
		return ""
	}
	return n.members.Addr()
}

// IsLeader reports whether this node is the Raft leader now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

func stateName(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	}
	return "shutdown"
}

// Sync waits until this node's FSM reflects every command committed before
// Sync was called (a linearizable read barrier, like ZooKeeper's sync): the
// leader confirms its leadership and reports its commit index, and Sync
// waits for the local FSM to apply it. Reads through the node after Sync
// returns are linearizable with respect to Sync's start. Without a leader
// it retries until ctx ends (ErrNoQuorum); a nil ctx → ErrInvalidArgument;
// a halted node → ErrHalted.
func (n *Node) Sync(ctx context.Context) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	var idx uint64
	err := n.retry(ctx, false, func(ctx context.Context) error {
		var err error
		if n.raft.State() == raft.Leader {
			idx, err = n.readIndexLocal(ctx)
			return err
		}
		reply, err := n.callLeader(ctx, encodeReadIndexRequest())
		if err != nil {
			return err
		}
		var verdict error
		if idx, verdict, err = decodeReadIndexReply(reply); err != nil {
			return fmt.Errorf("%w: %w", errForward, err)
		}
		return verdict
	})
	if err != nil {
		return err
	}
	if err := n.awaitApplied(ctx, idx); err != nil {
		return fmt.Errorf("node: sync: %w", err)
	}
	return nil
}

// readIndexLocal: on the leader, once leadership is confirmed, raft's own
// commit index — every entry anybody can have observed: the leader's FSM
// applies an entry (and wakes local waiters) only once it is committed,
// before the proposer hears of it. Valid after the new leader's takeover
// barrier has been applied: from then on the commit index covers every
// entry of earlier terms and points at entries the FSM sees (the barrier is
// an FSM command; configuration changes reach the FSM too). Trailing
// entries of nudge Noops are left out (nudger.readIndex): they change
// nothing a read sees.
func (n *Node) readIndexLocal(ctx context.Context) (uint64, error) {
	if !n.started.Load() || !n.expiry.isLeading() || n.fsm.Halted() != nil {
		return 0, errNotLeader
	}
	idx := n.nudges.readIndex(n.raft.CommitIndex()) // nudge.go
	if err := n.verifier.confirm(ctx); err != nil {
		return 0, leadershipErr(err)
	}
	return idx, nil
}
