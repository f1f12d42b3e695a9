package node

import (
	"fmt"

	"github.com/hashicorp/raft"
)

// DiskOp names a storage operation for Config.DiskFault.
type DiskOp string

// Storage operations a DiskFault hook can fail.
const (
	DiskAppend DiskOp = "append" // log entries written (StoreLog, StoreLogs)
	DiskRead   DiskOp = "read"   // log entries read (GetLog, FirstIndex, LastIndex)
	DiskDelete DiskOp = "delete" // log entries removed (DeleteRange: compaction, truncation)
	DiskStable DiskOp = "stable" // term, vote and other stable-store writes
)

// faultyLogStore fails log operations for which the hook returns an error
// (fault injection; see Config.DiskFault).
type faultyLogStore struct {
	raft.LogStore
	fault func(DiskOp) error
}

func (s faultyLogStore) check(op DiskOp) error {
	if err := s.fault(op); err != nil {
		return fmt.Errorf("node: injected disk fault (%s): %w", op, err)
	}
	return nil
}

func (s faultyLogStore) FirstIndex() (uint64, error) {
	if err := s.check(DiskRead); err != nil {
		return 0, err
	}
	return s.LogStore.FirstIndex()
}

func (s faultyLogStore) LastIndex() (uint64, error) {
	if err := s.check(DiskRead); err != nil {
		return 0, err
	}
	return s.LogStore.LastIndex()
}

func (s faultyLogStore) GetLog(index uint64, l *raft.Log) error {
	if err := s.check(DiskRead); err != nil {
		return err
	}
	return s.LogStore.GetLog(index, l)
}

func (s faultyLogStore) StoreLog(l *raft.Log) error {
	if err := s.check(DiskAppend); err != nil {
		return err
	}
	return s.LogStore.StoreLog(l)
}

func (s faultyLogStore) StoreLogs(ls []*raft.Log) error {
	if err := s.check(DiskAppend); err != nil {
		return err
	}
	return s.LogStore.StoreLogs(ls)
}

func (s faultyLogStore) DeleteRange(lo, hi uint64) error {
	if err := s.check(DiskDelete); err != nil {
		return err
	}
	return s.LogStore.DeleteRange(lo, hi)
}

// faultyStableStore fails stable-store writes for which the hook returns an
// error. Reads pass: raft reads its term and vote only at start.
type faultyStableStore struct {
	raft.StableStore
	fault func(DiskOp) error
}

func (s faultyStableStore) Set(k, v []byte) error {
	if err := s.fault(DiskStable); err != nil {
		return fmt.Errorf("node: injected disk fault (%s): %w", DiskStable, err)
	}
	return s.StableStore.Set(k, v)
}

func (s faultyStableStore) SetUint64(k []byte, v uint64) error {
	if err := s.fault(DiskStable); err != nil {
		return fmt.Errorf("node: injected disk fault (%s): %w", DiskStable, err)
	}
	return s.StableStore.SetUint64(k, v)
}

// withFaults wraps the stores with the fault hook, if any.
func (st *storage) withFaults(fault func(DiskOp) error) {
	if fault == nil {
		return
	}
	st.logs = faultyLogStore{LogStore: st.logs, fault: fault}
	st.stable = faultyStableStore{StableStore: st.stable, fault: fault}
}
