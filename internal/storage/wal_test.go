//go:build raftwal

package storage

import (
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// TestWALRestartsAfterTailTruncation is the regression test of
// hashicorp/raft-wal#31: a follower that drops a conflicting log suffix
// truncates the WAL's tail, and raft-wal v0.4.0 then left the tail segment
// marked sealed without its index block, so the next open failed ("sealed
// segment has no index block") and raft.NewRaft panicked at the restart.
// v0.4.2 seals the segment properly. The reopened store must hold exactly
// the entries before the truncation and accept new ones.
func TestWALRestartsAfterTailTruncation(t *testing.T) {
	dir := t.TempDir()
	logger := hclog.NewNullLogger()
	st, err := openWALAt(dir, logger)
	if err != nil {
		t.Fatal(err)
	}
	const n = 20
	logs := make([]*raft.Log, n)
	for i := range logs {
		logs[i] = &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: []byte("x")}
	}
	if err := st.Logs.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	// A new leader's log conflicts from index 17: the follower drops 17..20.
	if err := st.Logs.DeleteRange(17, n); err != nil {
		t.Fatal(err)
	}
	if err := st.close(); err != nil {
		t.Fatal(err)
	}

	st, err = openWALAt(dir, logger)
	if err != nil {
		t.Fatalf("reopen after a tail truncation: %v", err)
	}
	defer st.close()
	var l raft.Log
	if err := st.Logs.GetLog(1, &l); err != nil {
		t.Fatalf("GetLog(1) after the restart: %v (raft.NewRaft panics on this)", err)
	}
	if last, err := st.Logs.LastIndex(); err != nil || last != 16 {
		t.Fatalf("LastIndex after the restart = %d, %v; want 16", last, err)
	}
	if err := st.Logs.StoreLogs([]*raft.Log{{Index: 17, Term: 2, Type: raft.LogCommand, Data: []byte("y")}}); err != nil {
		t.Fatalf("append after the restart: %v", err)
	}
	if err := st.Logs.GetLog(17, &l); err != nil || l.Term != 2 {
		t.Fatalf("GetLog(17) = term %d, %v; want the new leader's entry (term 2)", l.Term, err)
	}
}
