package node

import (
	"context"
	"fmt"
	"time"
)

// SnapshotInfo describes a Raft snapshot taken by Snapshot.
type SnapshotInfo struct {
	Index uint64        // the last log index the snapshot covers
	Bytes int64         // its size in the snapshot store
	Took  time.Duration // from the call until the snapshot was on disk
}

// Snapshot takes a Raft snapshot of this node's state now, as Raft does by
// itself every SnapshotInterval once SnapshotThreshold entries have
// accumulated, and compacts the log behind it (keeping TrailingLogs). The
// state machine is frozen at once (copy-on-write, in O(1) of its size) and
// written to the snapshot store while commands keep being applied, paced
// to about half of a core (storage.Paced): it takes about twice the time
// the encoding works. It reaches the disk in 4 MiB steps as it is written
// (internal/storage's stepSyncStore). It returns when the
// snapshot is on disk, or when ctx ends (the snapshot then still completes
// in the background). Safe for concurrent use; Raft takes one snapshot at a
// time.
func (o *Operator) Snapshot(ctx context.Context) (SnapshotInfo, error) {
	n := o.n
	if err := checkCtx(ctx); err != nil {
		return SnapshotInfo{}, err
	}
	start := time.Now()
	type result struct {
		info SnapshotInfo
		err  error
	}
	done := make(chan result, 1)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f := n.raft.Snapshot()
		if err := f.Error(); err != nil {
			done <- result{err: fmt.Errorf("node: snapshot: %w", err)}
			return
		}
		took := time.Since(start)
		meta, r, err := f.Open()
		if err != nil {
			done <- result{err: fmt.Errorf("node: snapshot: %w", err)}
			return
		}
		r.Close()
		done <- result{info: SnapshotInfo{Index: meta.Index, Bytes: meta.Size, Took: took}}
	}()
	select {
	case res := <-done:
		return res.info, res.err
	case <-ctx.Done():
		return SnapshotInfo{}, fmt.Errorf("node: snapshot: %w", ctx.Err())
	}
}
