package storage

import (
	"errors"
	"testing"

	"github.com/hashicorp/raft"
)

// anchorStore is an anchoredLogs over an in-memory log holding the given
// indexes (term 7), with a snapshot at index 10, term 5, remembered.
func anchorStore(t *testing.T, applied uint64, leading bool, indexes ...uint64) *anchoredLogs {
	t.Helper()
	logs := raft.NewInmemStore()
	for _, i := range indexes {
		if err := logs.StoreLog(&raft.Log{Index: i, Term: 7, Type: raft.LogCommand, Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	snaps := &snapshotTerms{SnapshotStore: raft.NewInmemSnapshotStore()}
	snaps.remember(10, 5)
	return &anchoredLogs{LogStore: logs, snaps: snaps, applied: func() uint64 { return applied }, leading: func() bool { return leading }}
}

func TestAnchoredLogsAnswerForTheSnapshotIndexOnlyWhenSafe(t *testing.T) {
	for _, tc := range []struct {
		name    string
		applied uint64
		leading bool
		indexes []uint64
		get     uint64
		anchor  bool // GetLog returns the anchor (index, term 5, no data)
	}{
		{name: "entries after the installed snapshot", applied: 12, indexes: []uint64{11, 12}, get: 10, anchor: true},
		{name: "nothing after it yet", applied: 10, get: 10, anchor: true},
		{name: "old entries below a gap", applied: 12, indexes: []uint64{3, 4, 11, 12}, get: 10, anchor: true},
		{name: "entry below it present: a leader could ship the anchor", applied: 12, indexes: []uint64{9, 11, 12}, get: 10},
		{name: "FSM has not applied it", applied: 9, indexes: []uint64{11}, get: 10},
		{name: "on the leader", applied: 12, leading: true, indexes: []uint64{11, 12}, get: 10},
		{name: "not a snapshot index", applied: 12, indexes: []uint64{12}, get: 11},
		{name: "below the snapshot", applied: 12, indexes: []uint64{11}, get: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := anchorStore(t, tc.applied, tc.leading, tc.indexes...)
			var l raft.Log
			err := s.GetLog(tc.get, &l)
			switch {
			case tc.anchor && err != nil:
				t.Fatalf("GetLog(%d): %v, want the anchor", tc.get, err)
			case tc.anchor && (l.Index != tc.get || l.Term != 5 || l.Type != raft.LogNoop || l.Data != nil):
				t.Fatalf("GetLog(%d) = %+v, want index %d term 5, a no-op without data", tc.get, l, tc.get)
			case !tc.anchor && !errors.Is(err, raft.ErrLogNotFound):
				t.Fatalf("GetLog(%d) = %+v, %v, want ErrLogNotFound", tc.get, l, err)
			}
		})
	}
	t.Run("stored entries are returned as stored", func(t *testing.T) {
		s := anchorStore(t, 12, false, 10, 11)
		var l raft.Log
		if err := s.GetLog(10, &l); err != nil || l.Term != 7 || string(l.Data) != "x" {
			t.Fatalf("GetLog(10) = %+v, %v, want the stored entry", l, err)
		}
	})
}

func TestAnchoredLogsRestoredDropsEntriesBelowAMissingSnapshotEntry(t *testing.T) {
	for _, tc := range []struct {
		name    string
		leading bool
		indexes []uint64
		want    []uint64 // indexes left
	}{
		{name: "log reaching just below the snapshot", indexes: []uint64{6, 7, 8, 9}, want: nil},
		{name: "entries after the snapshot are kept", indexes: []uint64{8, 9, 11, 12}, want: []uint64{11, 12}},
		{name: "the snapshot's entry is in the log: nothing to do", indexes: []uint64{8, 9, 10, 11}, want: []uint64{8, 9, 10, 11}},
		{name: "a leader's log is left alone (user restore)", leading: true, indexes: []uint64{8, 9}, want: []uint64{8, 9}},
		{name: "empty log", indexes: nil, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := anchorStore(t, 10, tc.leading, tc.indexes...)
			if err := s.restored(10); err != nil {
				t.Fatal(err)
			}
			var left []uint64
			for i := uint64(1); i <= 12; i++ {
				var l raft.Log
				if err := s.LogStore.GetLog(i, &l); err == nil {
					left = append(left, i)
				}
			}
			if len(left) != len(tc.want) {
				t.Fatalf("entries left %v, want %v", left, tc.want)
			}
			for i := range left {
				if left[i] != tc.want[i] {
					t.Fatalf("entries left %v, want %v", left, tc.want)
				}
			}
		})
	}
}

func TestSnapshotTermsRememberWrittenAndOpenedSnapshots(t *testing.T) {
	s := &snapshotTerms{SnapshotStore: raft.NewInmemSnapshotStore()}
	_, trans := raft.NewInmemTransport("")
	sink, err := s.Create(raft.SnapshotVersionMax, 20, 3, raft.Configuration{}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := s.term(20); ok {
		t.Fatal("a snapshot is remembered before its sink is closed")
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if term, ok := s.term(20); !ok || term != 3 {
		t.Fatalf("term(20) = %d, %v after Close, want 3", term, ok)
	}
	cancelled, err := s.Create(raft.SnapshotVersionMax, 30, 4, raft.Configuration{}, 1, trans)
	if err != nil {
		t.Fatal(err)
	}
	cancelled.Cancel()
	if _, ok := s.term(30); ok {
		t.Fatal("a cancelled snapshot is remembered")
	}
	for i := uint64(1); i <= snapshotTermsKept; i++ {
		s.remember(100+i, 9)
	}
	if _, ok := s.term(20); ok {
		t.Fatalf("more than %d snapshots remembered", snapshotTermsKept)
	}
	fresh := &snapshotTerms{SnapshotStore: s.SnapshotStore}
	metas, err := fresh.List()
	if err != nil || len(metas) == 0 {
		t.Fatalf("list: %v %v", metas, err)
	}
	_, rc, err := fresh.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if term, ok := fresh.term(metas[0].Index); !ok || term != metas[0].Term {
		t.Fatalf("an opened snapshot (index %d term %d) is not remembered: %d %v", metas[0].Index, metas[0].Term, term, ok)
	}
}
