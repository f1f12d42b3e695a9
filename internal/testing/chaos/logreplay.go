package chaos

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"go.etcd.io/bbolt"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
)

// ReplicaLog is one stopped replica's Raft log, read back from its data dir.
//
// After a follower installs a snapshot from the leader, hashicorp/raft
// compacts only part of its old log: the store can keep stale entries below
// the snapshot and have a gap up to it. Entries at or below the newest
// snapshot are therefore trusted only when the store holds the whole log
// from index 1 without a gap.
type ReplicaLog struct {
	Node    string
	Dir     string
	First   uint64 // first index in the log store
	Last    uint64
	Gaps    int // indexes between First and Last the store does not hold
	Entries map[uint64]*raft.Log
	// Snapshots are the indexes of the snapshots on disk, newest first.
	Snapshots []uint64
	// ReliableFrom is the first index whose entry belongs to the replica's
	// effective log (1, or the newest snapshot's index + 1).
	ReliableFrom uint64
	snapIDs      []string
	snapMetas    []*raft.SnapshotMeta
}

// ErrCannotReplay: the log on disk does not reach back to a state from which
// the requested index can be replayed.
var ErrCannotReplay = errors.New("chaos: cannot replay to that index from what is on disk")

// ReadReplicaLog opens a stopped replica's log store — raft.db read-only,
// or the raft-wal log in wal/ (node.LogStoreWAL) — and reads its whole log
// and the list of its snapshots.
func ReadReplicaLog(nodeID, dataDir string) (*ReplicaLog, error) {
	st, closeStore, err := openLogStore(dataDir)
	if err != nil {
		return nil, err
	}
	defer closeStore()
	rl := &ReplicaLog{Node: nodeID, Dir: dataDir, Entries: map[uint64]*raft.Log{}, ReliableFrom: 1}
	if rl.First, err = st.FirstIndex(); err != nil {
		return nil, err
	}
	if rl.Last, err = st.LastIndex(); err != nil {
		return nil, err
	}
	for i := rl.First; i <= rl.Last && i > 0; i++ {
		var l raft.Log
		switch err := st.GetLog(i, &l); {
		case errors.Is(err, raft.ErrLogNotFound):
			rl.Gaps++
		case err != nil:
			return nil, fmt.Errorf("%s: log index %d: %w", nodeID, i, err)
		default:
			rl.Entries[i] = &l
		}
	}
	snaps, err := raft.NewFileSnapshotStore(dataDir, 2, io.Discard)
	if err != nil {
		return nil, err
	}
	metas, err := snaps.List()
	if err != nil {
		return nil, err
	}
	for _, m := range metas {
		rl.Snapshots = append(rl.Snapshots, m.Index)
		rl.snapIDs = append(rl.snapIDs, m.ID)
		rl.snapMetas = append(rl.snapMetas, m)
	}
	if (rl.First > 1 || rl.Gaps > 0) && len(rl.Snapshots) > 0 {
		rl.ReliableFrom = rl.Snapshots[0] + 1
	}
	return rl, nil
}

// openLogStore opens a stopped replica's log store (see ReadReplicaLog).
// raft-wal has no read-only mode: opening it may trim a torn tail, as the
// replica's own restart would.
func openLogStore(dataDir string) (raft.LogStore, func() error, error) {
	if walPath := filepath.Join(dataDir, "wal"); dirExists(walPath) {
		return openWALLog(walPath)
	}
	path := filepath.Join(dataDir, "raft.db")
	st, err := raftboltdb.New(raftboltdb.Options{Path: path, BoltOptions: &bbolt.Options{ReadOnly: true, Timeout: 2 * time.Second}})
	if err != nil {
		return nil, nil, fmt.Errorf("open %s: %w", path, err)
	}
	return st, st.Close, nil
}

func dirExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

func (rl *ReplicaLog) contiguous(from, to uint64) bool {
	for i := from; i <= to; i++ {
		if rl.Entries[i] == nil {
			return false
		}
	}
	return true
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
	le := LogEvent{Index: e.Index, Seq: seq, Kind: e.Kind.String(), Lock: e.Lock, Session: uint64(e.Session), Token: uint64(e.Token), At: e.At, Shared: e.Shared, Permits: e.Permits}
	if !e.Owner.IsZero() {
		le.Owner = e.Owner.String()
	}
	if e.Reason != 0 {
		le.Reason = e.Reason.String()
	}
	le.Delayed = e.Kind == fsmwire.EventReleased && e.DelayUntil != 0
	if le.Delayed {
		le.DelayFor = int64(e.DelayFor)
	}
	return le
}

// Replay applies the replica's log up to index upTo (0: all of it) to a
// fresh state machine — from index 1 if the store holds the whole log, else
// from the newest snapshot at or below upTo — and returns the events, the
// digest there and the grant counter. complete is false when a snapshot hid
// the events before it. It fails with ErrCannotReplay when neither works.
func (rl *ReplicaLog) Replay(upTo uint64) (events []LogEvent, d Digest, lastToken uint64, complete bool, err error) {
	return rl.replay(upTo, nil)
}

// DigestSamples replays the log like Replay and returns the digest after
// every entry (Source "disk", time at).
func (rl *ReplicaLog) DigestSamples(upTo uint64, at int64) ([]DigestSample, error) {
	var out []DigestSample
	_, _, _, _, err := rl.replay(upTo, func(f *fsm.FSM) {
		idx, h := f.Digest()
		if len(out) == 0 || out[len(out)-1].Index != idx {
			out = append(out, DigestSample{Node: rl.Node, Index: idx, Hash: fmt.Sprintf("%x", h[:8]), At: at, Source: "disk"})
		}
	})
	return out, err
}

func (rl *ReplicaLog) replay(upTo uint64, each func(f *fsm.FSM)) (events []LogEvent, d Digest, lastToken uint64, complete bool, err error) {
	if upTo == 0 || upTo > rl.Last {
		upTo = rl.Last
	}
	obs := &replayObserver{}
	f := fsm.New(obs)
	start := uint64(1)
	complete = rl.First == 1 && rl.contiguous(1, upTo)
	if !complete {
		k := -1
		for j, idx := range rl.Snapshots {
			if idx <= upTo && idx >= rl.First-1 && rl.contiguous(idx+1, upTo) {
				k = j
				break
			}
		}
		if k < 0 {
			return nil, d, 0, false, fmt.Errorf("%w: %s: log %d..%d with %d gaps, snapshots %v, want index %d", ErrCannotReplay, rl.Node, rl.First, rl.Last, rl.Gaps, rl.Snapshots, upTo)
		}
		snaps, err := raft.NewFileSnapshotStore(rl.Dir, 2, io.Discard)
		if err != nil {
			return nil, d, 0, false, err
		}
		_, rc, err := snaps.Open(rl.snapIDs[k])
		if err != nil {
			return nil, d, 0, false, err
		}
		err = f.Restore(rc)
		if err != nil {
			return nil, d, 0, false, fmt.Errorf("%s: restore snapshot %s: %w", rl.Node, rl.snapIDs[k], err)
		}
		start = rl.Snapshots[k] + 1
	}
	for i := start; i <= upTo; i++ {
		f.Apply(rl.Entries[i])
		if each != nil {
			each(f)
		}
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
			if l == nil || i < rl.ReliableFrom {
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

// Configurations returns the Raft configurations the replica's disk holds:
// every configuration entry of its log and the configuration of every
// snapshot (Source "log" or "snapshot", time at).
func (rl *ReplicaLog) Configurations(at int64) []ConfigSample {
	var out []ConfigSample
	for i := rl.First; i <= rl.Last && i > 0; i++ {
		l := rl.Entries[i]
		if l == nil || l.Type != raft.LogConfiguration {
			continue
		}
		out = append(out, ConfigSample{Node: rl.Node, At: at, Source: "log", Index: l.Index, Term: l.Term, Servers: configServers(raft.DecodeConfiguration(l.Data))})
	}
	for _, m := range rl.snapMetas {
		out = append(out, ConfigSample{Node: rl.Node, At: at, Source: "snapshot", Index: m.ConfigurationIndex, Servers: configServers(m.Configuration)})
	}
	return out
}

// EntrySamples returns every entry of the log as (index, term, hash).
func (rl *ReplicaLog) EntrySamples(at int64) []EntrySample {
	var out []EntrySample
	for i := rl.First; i <= rl.Last && i > 0; i++ {
		l := rl.Entries[i]
		if l == nil {
			continue
		}
		h := sha256.New()
		h.Write([]byte{byte(l.Type)})
		h.Write(l.Data)
		out = append(out, EntrySample{Node: rl.Node, Index: l.Index, Term: l.Term, Hash: fmt.Sprintf("%x", h.Sum(nil)[:8]), At: at})
	}
	return out
}

// configServers converts a Raft configuration, sorted by id.
func configServers(c raft.Configuration) []ConfigServer {
	out := make([]ConfigServer, 0, len(c.Servers))
	for _, s := range c.Servers {
		out = append(out, ConfigServer{ID: string(s.ID), Addr: string(s.Address), Voter: s.Suffrage == raft.Voter})
	}
	slices.SortFunc(out, func(a, b ConfigServer) int { return strings.Compare(a.ID, b.ID) })
	return out
}
