package storage

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// hook of internal/nodehooks receives it).
// converts from it; the names are the same).
type Op string

// Storage operations a fault hook can fail.
const (
	OpAppend Op = "append" // log entries written (StoreLog, StoreLogs)
	OpRead   Op = "read"   // log entries read (GetLog, FirstIndex, LastIndex)
	OpDelete Op = "delete" // log entries removed (DeleteRange: compaction, truncation)
	OpStable Op = "stable" // term, vote and other stable-store writes
)

// faultyLogStore fails log operations for which the hook returns an error
// (fault injection; see nodehooks.Hooks.DiskFault).
type faultyLogStore struct {
	raft.LogStore
	fault func(Op) error
}

func (s faultyLogStore) check(op Op) error {
	if err := s.fault(op); err != nil {
		return fmt.Errorf("node: injected disk fault (%s): %w", op, err)
	}
	return nil
}

func (s faultyLogStore) FirstIndex() (uint64, error) {
	if err := s.check(OpRead); err != nil {
		return 0, err
	}
	return s.LogStore.FirstIndex()
}

func (s faultyLogStore) LastIndex() (uint64, error) {
	if err := s.check(OpRead); err != nil {
		return 0, err
	}
	return s.LogStore.LastIndex()
}

func (s faultyLogStore) GetLog(index uint64, l *raft.Log) error {
	if err := s.check(OpRead); err != nil {
		return err
	}
	return s.LogStore.GetLog(index, l)
}

func (s faultyLogStore) StoreLog(l *raft.Log) error {
	if err := s.check(OpAppend); err != nil {
		return err
	}
	return s.LogStore.StoreLog(l)
}

func (s faultyLogStore) StoreLogs(ls []*raft.Log) error {
	if err := s.check(OpAppend); err != nil {
		return err
	}
	return s.LogStore.StoreLogs(ls)
}

func (s faultyLogStore) DeleteRange(lo, hi uint64) error {
	if err := s.check(OpDelete); err != nil {
		return err
	}
	return s.LogStore.DeleteRange(lo, hi)
}

// faultyStableStore fails stable-store writes for which the hook returns an
// error. Reads pass: raft reads its term and vote only at start.
type faultyStableStore struct {
	raft.StableStore
	fault func(Op) error
}

func (s faultyStableStore) Set(k, v []byte) error {
	if err := s.fault(OpStable); err != nil {
		return fmt.Errorf("node: injected disk fault (%s): %w", OpStable, err)
	}
	return s.StableStore.Set(k, v)
}

func (s faultyStableStore) SetUint64(k []byte, v uint64) error {
	if err := s.fault(OpStable); err != nil {
		return fmt.Errorf("node: injected disk fault (%s): %w", OpStable, err)
	}
	return s.StableStore.SetUint64(k, v)
}

// WithFaults wraps the log and stable stores with the fault hook, if any.
func (st *Stores) WithFaults(fault func(Op) error) {
	if fault == nil {
		return
	}
	st.Logs = faultyLogStore{LogStore: st.Logs, fault: fault}
	st.Stable = faultyStableStore{StableStore: st.Stable, fault: fault}
}
