package chaos

import (
	"bytes"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/raftlock/raftlock/fsm"
)

// ReplicaLog is one stopped replica's Raft log, read back from its data dir.
type ReplicaLog struct {
	Node    string
	Dir     string
	First   uint64 // first index in the log store (after compaction)
	Last    uint64
	Entries map[uint64]*raft.Log
	// Snapshot is the newest snapshot's index, if the log was compacted.
	Snapshot uint64
	snapDir  string
}

// ReadReplicaLog opens a stopped replica's raft.db read-only and reads its
// whole log.
func ReadReplicaLog(nodeID, dataDir string) (*ReplicaLog, error) {
	path := filepath.Join(dataDir, "raft.db")
	st, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{ReadOnly: true, Timeout: 2 * time.Second}})
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer st.Close()
	rl := &ReplicaLog{Node: nodeID, Dir: dataDir, Entries: map[uint64]*raft.Log{}, snapDir: dataDir}
	if rl.First, err = st.FirstIndex(); err != nil {
		return nil, err
	}
	if rl.Last, err = st.LastIndex(); err != nil {
		return nil, err
	}
	for i := rl.First; i <= rl.Last && i > 0; i++ {
		var l raft.Log
		if err := st.GetLog(i, &l); err != nil {
			return nil, fmt.Errorf("%s: log index %d: %w", nodeID, i, err)
		}
		rl.Entries[i] = &l
	}
	if rl.First > 1 {
		snaps, err := raft.NewFileSnapshotStore(dataDir, 2, io.Discard)
		if err == nil {
			if metas, err := snaps.List(); err == nil && len(metas) > 0 {
				rl.Snapshot = metas[0].Index
			}
		}
	}
	return rl, nil
}

// replayObserver turns applied events into LogEvents.
type replayObserver struct {
	events []LogEvent
}

func (o *replayObserver) Applied(index uint64, events []fsm.Event) {
	for i, e := range events {
		o.events = append(o.events, logEvent(e, i))
	}
}

func (o *replayObserver) Restored(uint64) {}

func logEvent(e fsm.Event, seq int) LogEvent {
	le := LogEvent{Index: e.Index, Seq: seq, Kind: e.Kind.String(), Lock: e.Lock, Session: uint64(e.Session), Token: uint64(e.Token), At: e.At}
	if !e.Owner.IsZero() {
		le.Owner = e.Owner.String()
	}
	if e.Reason != 0 {
		le.Reason = e.Reason.String()
	}
	return le
}

// Replay applies the replica's log up to index upTo (0: all of it) to a
// fresh state machine, starting from its newest snapshot if the log was
// compacted, and returns the events, the digest there and the final grant
// counter. complete is false when a snapshot hid the events before it.
func (rl *ReplicaLog) Replay(upTo uint64) (events []LogEvent, d Digest, lastToken uint64, complete bool, err error) {
	obs := &replayObserver{}
	f := fsm.New(obs)
	start := uint64(1)
	complete = true
	if rl.First > 1 {
		complete = false
		snaps, err := raft.NewFileSnapshotStore(rl.snapDir, 2, io.Discard)
		if err != nil {
			return nil, d, 0, false, err
		}
		metas, err := snaps.List()
		if err != nil || len(metas) == 0 {
			return nil, d, 0, false, fmt.Errorf("%s: log compacted to %d and no snapshot (%v)", rl.Node, rl.First, err)
		}
		_, rc, err := snaps.Open(metas[0].ID)
		if err != nil {
			return nil, d, 0, false, err
		}
		if err := f.Restore(rc); err != nil {
			return nil, d, 0, false, fmt.Errorf("%s: restore snapshot %s: %w", rl.Node, metas[0].ID, err)
		}
		start = metas[0].Index + 1
		if start < rl.First {
			return nil, d, 0, false, fmt.Errorf("%s: snapshot at %d, log starts at %d", rl.Node, metas[0].Index, rl.First)
		}
	}
	if upTo == 0 || upTo > rl.Last {
		upTo = rl.Last
	}
	for i := start; i <= upTo; i++ {
		l := rl.Entries[i]
		if l == nil {
			return nil, d, 0, false, fmt.Errorf("%s: log index %d missing", rl.Node, i)
		}
		f.Apply(l)
	}
	idx, h := f.Digest()
	return obs.events, Digest{Node: rl.Node, Index: idx, Hash: fmt.Sprintf("%x", h[:8])}, uint64(f.Stats().LastToken), complete, nil
}

// CompareLogs reports every index up to upTo at which two replicas hold
// different entries (Raft's log matching: committed entries are identical).
func CompareLogs(logs []*ReplicaLog, upTo uint64) []string {
	var out []string
	for i := uint64(1); i <= upTo; i++ {
		var ref *raft.Log
		var refNode string
		for _, rl := range logs {
			l := rl.Entries[i]
			if l == nil {
				continue
			}
			if ref == nil {
				ref, refNode = l, rl.Node
				continue
			}
			if l.Term != ref.Term || l.Type != ref.Type || !bytes.Equal(l.Data, ref.Data) {
				out = append(out, fmt.Sprintf("index %d: %s has term %d, %s has term %d (or different data)", i, refNode, ref.Term, rl.Node, l.Term))
				if len(out) >= 10 {
					return out
				}
			}
		}
	}
	return out
}
