package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/membership"
	"github.com/raftlock/raftlock/transport"
)

// Restore below cluster version 4 (a rolling upgrade from a release
// without the restore commands): the leader prepares the backup against its
// applied state between two entries of its proposer and installs it with
// hashicorp/raft's user restore (raft.Restore), which every replica then
// takes as a snapshot. It needs no quorum to install on the leader, so it
// is never used from cluster version 4 on (restoreReplicated): the leader
// refuses it there with errRestoreReplicated.

// errRestoreReplicated: the leader is at cluster version 4, where a restore
// is a replicated command (the caller restores that way).
var errRestoreReplicated = errors.New("node: the cluster restores through the log (cluster version 4)")

// restoreThroughRaft restores below cluster version 4: on the leader, or
// forwarded to it in one request.
func (n *Node) restoreThroughRaft(ctx context.Context, data []byte) (fsm.RestoreSummary, error) {
	var sum fsm.RestoreSummary
	err := n.retry(ctx, false, func(ctx context.Context) error {
		if n.raft.State() == raft.Leader {
			return n.proposeRestore(ctx, restoreCmd{data: data, sum: &sum}).err
		}
		var err error
		sum, err = n.forwardRestore(ctx, data)
		return err
	})
	return sum, err
}

// restoreCmd is a restore travelling through the leader's proposer in a
// proposal of its own (proposal.restore; it is never encoded:
// takeRestores runs it).
type restoreCmd struct {
	data []byte
	sum  *fsm.RestoreSummary // set by takeRestores before the proposal finishes
}

// proposeRestore submits a restore to this node's proposer (on the
// leader) and waits for it.
func (n *Node) proposeRestore(ctx context.Context, rc restoreCmd) outcome {
	if err := n.haltErr(); err != nil {
		return outcome{err: err}
	}
	p := &proposal{ctx: ctx, restore: &rc, done: make(chan struct{})}
	n.proposer.submit(p)
	return p.wait()
}

// takeRestores runs the restores of a batch, before its commands, and
// returns the other proposals. It runs on the proposer between two
// entries: the previous entry has been applied here and no other is in
// flight, so the running state that fsm.PrepareRestore reads is the one
// the restore replaces.
func (n *Node) takeRestores(batch []*proposal) []*proposal {
	rest := batch[:0:0]
	for _, p := range batch {
		rc := p.restore
		if rc == nil {
			rest = append(rest, p)
			continue
		}
		sum, index, err := n.installRestore(rc.data)
		*rc.sum = sum
		p.finish(outcome{index: index, err: err})
	}
	return rest
}

// restoreIndexGap is how far above the log's last index a restore is
// installed. raft accepts one configuration change at a time and refuses a
// restore while one is uncommitted, so at most a few can commit between
// reading the last index and the restore.
const restoreIndexGap = 8

// installRestore prepares the backup against the applied state and has
// raft install it; then it commits a Noop, so that every replica's applied
// index passes the restore's.
func (n *Node) installRestore(data []byte) (fsm.RestoreSummary, uint64, error) {
	if versionRefusal(restoreVersionProbe, n.fsm.ClusterVersion()) == nil {
		return fsm.RestoreSummary{}, 0, errRestoreReplicated
	}
	var snap bytes.Buffer
	// The restore claims the index raft installs it at (above every entry):
	// every replica's FSM then takes it (it refuses a snapshot below its
	// applied index, and raft panics if a user restore fails), and its
	// applied index covers the hole raft leaves. restoreIndexGap leaves
	// room for configuration changes committed (not through the proposer)
	// before raft takes the restore.
	at := max(n.fsm.AppliedIndex(), n.raft.LastIndex()) + restoreIndexGap
	sum, err := n.fsm.PrepareRestoreAt(bytes.NewReader(data), &snap, at)
	if err != nil {
		return sum, 0, fmt.Errorf("%w: restore: %w", ErrInvalidArgument, err)
	}
	// raft panics if the FSM refuses a user snapshot: make sure it cannot.
	if err := fsm.New(nil).Restore(io.NopCloser(bytes.NewReader(snap.Bytes()))); err != nil {
		return sum, 0, fmt.Errorf("node: restore: the prepared snapshot does not install: %w", err)
	}
	meta := &raft.SnapshotMeta{Version: raft.SnapshotVersionMax, Index: at - 1, Size: int64(snap.Len())} // raft installs it at at
	if err := n.raft.Restore(meta, &snap, n.cfg.AttemptTimeout); err != nil {
		return sum, 0, raftErr(err)
	}
	data, err = fsm.EncodeEntry(fsm.Entry{At: n.wallNow().UnixNano(), Commands: []fsm.Command{fsm.Noop{}}})
	if err != nil {
		return sum, 0, err
	}
	f := n.raft.Apply(data, n.cfg.AttemptTimeout)
	if err := f.Error(); err != nil {
		// Installed: do not retry the restore; the next entry moves the
		// applied index on.
		n.log.Warn("restore installed, but the entry after it failed", "err", err)
		return sum, n.raft.LastIndex(), nil
	}
	return sum, f.Index(), nil
}

// forwardRestore sends a backup to the leader (one attempt).
func (n *Node) forwardRestore(ctx context.Context, data []byte) (fsm.RestoreSummary, error) {
	if limit := transport.DefaultConfig().MaxMessageSize - 64; len(data) > limit {
		addr, id := n.raft.LeaderWithID()
		return fsm.RestoreSummary{}, fmt.Errorf("%w: a backup of %d bytes is larger than a forwarded request can carry (%d): restore it on the leader (%s at %s)",
			ErrRefused, len(data), limit, membership.NodeOf(id), addr)
	}
	r, err := n.callAdmin(ctx, adminRestore, data)
	if err != nil {
		return fsm.RestoreSummary{}, err
	}
	if r.Restored == nil {
		return fsm.RestoreSummary{}, fmt.Errorf("%w: the leader's restore reply has no summary", errForward)
	}
	return *r.Restored, nil
}
