package node

import "github.com/raftlock/raftlock/fsm"

// LockAt returns a lock (or semaphore) as the local FSM has it, with the
// index of the last entry applied, read at once (fsm.FSM.LockAt): a
// subscriber to the lock's events that reads it after subscribing skips
// the events of entries at or below that index.
func (n *Node) LockAt(name string) (fsm.LockInfo, uint64, bool) { return n.fsm.LockAt(name) }
