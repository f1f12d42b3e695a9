package node

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
)

// Restore as a replicated command (cluster version 4; see fsm's
// RestoreChunk and RestoreCommit). The caller's node gives the restore a
// random id and proposes, one after the other, the chunks of the backup —
// each a log entry of restoreChunkBytes — and then the commit that
// installs them; a follower forwards each step to the leader as its own
// admin request (adminRestoreStep), well within the transport's message
// limit. Every step is idempotent (a chunk by its offset, the commit by
// the restore's id), so each is retried like any proposal, also after a
// lost reply. A restore that gives up before its commit was proposed
// drops its staging (RestoreAbort, best effort; the state machine drops an
// abandoned one by itself later).
//
//	request: v, kindAdmin, adminRestoreStep, an encoded fsm.Entry of one
//	         restore command
//	reply:   v, kindAdmin, JSON adminReply (Step; Restored for a commit)

// restoreChunkBytes is the backup's size in one RestoreChunk entry. Raft
// sends a follower that catches up up to MaxAppendEntries (64) entries in
// one message: 64 MiB at most of chunks.
const restoreChunkBytes = 1 << 20

// adminRestoreStep forwards one restore command to the leader.
const adminRestoreStep byte = 5

// restoreVersionProbe is a restore command, for the cluster version that
// restore commands need.
var restoreVersionProbe fsm.Command = fsm.RestoreAbort{ID: [16]byte{1}}

// restoreStepReply is the leader's result of one restore step.
type restoreStepReply struct {
	Status fsmwire.Status `json:"status"`
	Reason string         `json:"reason,omitempty"`
}

// restoreReplicated restores data (a checked backup) through the log.
func (n *Node) restoreReplicated(ctx context.Context, data []byte) (fsm.RestoreSummary, error) {
	var id [16]byte
	_, _ = rand.Read(id[:]) // never fails (crypto/rand)
	for off := 0; off < len(data); off += restoreChunkBytes {
		c := fsm.RestoreChunk{ID: id, Offset: uint64(off), Total: uint64(len(data)), Data: data[off:min(off+restoreChunkBytes, len(data))]}
		res, _, err := n.restoreStep(ctx, c, n.cfg.AttemptTimeout)
		if err == nil && res.Status != fsmwire.StatusOK {
			err = fmt.Errorf("%w: %s", ErrRefused, res.Reason)
		}
		if err != nil {
			if off > 0 || !errors.Is(err, ErrNotProposed) {
				n.abortRestore(id)
			}
			if !errors.Is(err, ErrNotProposed) && !errors.Is(err, ErrRefused) {
				err = fmt.Errorf("%w: %w", ErrNotProposed, err) // the commit was not proposed
			}
			return fsm.RestoreSummary{}, fmt.Errorf("node: restore %x: not installed (staging failed at byte %d of %d): %w", id, off, len(data), err)
		}
	}
	// The leader builds the restored state before it answers: an attempt
	// has AttemptTimeout and one more per 4 MiB of backup.
	wait := n.cfg.AttemptTimeout * time.Duration(1+len(data)>>22)
	res, sum, err := n.restoreStep(ctx, fsm.RestoreCommit{ID: id, Size: uint64(len(data))}, wait)
	switch {
	case err != nil && errors.Is(err, ErrNotProposed):
		n.abortRestore(id)
		return fsm.RestoreSummary{}, fmt.Errorf("node: restore %x: not installed: %w", id, err)
	case err != nil:
		return fsm.RestoreSummary{}, fmt.Errorf("node: restore %x: outcome unknown: the install may have committed (at most once): %w", id, err)
	case res.Status != fsmwire.StatusOK:
		return fsm.RestoreSummary{}, fmt.Errorf("%w: restore %x not installed: %s", ErrRefused, id, res.Reason)
	}
	return sum, nil
}

// restoreStep proposes one restore command until it commits (or fails for
// good, or ctx ends), each attempt bounded by wait: on the leader through
// its proposer, on a follower forwarded. For a commit it also returns the
// summary of the install.
func (n *Node) restoreStep(ctx context.Context, cmd fsm.Command, wait time.Duration) (fsm.Result, fsm.RestoreSummary, error) {
	var (
		res fsm.Result
		sum fsm.RestoreSummary
	)
	err := n.retry(ctx, true, func(ctx context.Context) error {
		if n.raft.State() == raft.Leader {
			var err error
			res, sum, err = n.restoreStepLocal(ctx, cmd)
			return err
		}
		var err error
		res, sum, err = n.forwardRestoreStep(ctx, cmd, wait)
		return err
	})
	return res, sum, err
}

// restoreStepLocal proposes a restore command on the leader.
func (n *Node) restoreStepLocal(ctx context.Context, cmd fsm.Command) (fsm.Result, fsm.RestoreSummary, error) {
	out := n.proposeAsLeader(ctx, cmd)
	if out.err != nil {
		return fsm.Result{}, fsm.RestoreSummary{}, out.err
	}
	res := out.result()
	var sum fsm.RestoreSummary
	if c, ok := cmd.(fsm.RestoreCommit); ok && res.Status == fsmwire.StatusOK {
		sum, _, _ = n.fsm.RestoreOutcome(c.ID) // applied here: the leader answers once applied
	}
	return res, sum, nil
}

// forwardRestoreStep sends one restore command to the leader (one
// attempt, bounded by wait).
func (n *Node) forwardRestoreStep(ctx context.Context, cmd fsm.Command, wait time.Duration) (fsm.Result, fsm.RestoreSummary, error) {
	body, err := encodeRestoreStep(cmd)
	if err != nil {
		return fsm.Result{}, fsm.RestoreSummary{}, fmt.Errorf("%w: %w", ErrInvalidArgument, err)
	}
	actx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	r, err := n.callAdmin(actx, adminRestoreStep, body)
	if err != nil {
		return fsm.Result{}, fsm.RestoreSummary{}, err
	}
	if r.Step == nil {
		return fsm.Result{}, fsm.RestoreSummary{}, fmt.Errorf("%w: the leader's restore reply has no result", errForward)
	}
	res := fsm.Result{Status: r.Step.Status, Reason: r.Step.Reason}
	var sum fsm.RestoreSummary
	if _, ok := cmd.(fsm.RestoreCommit); ok && res.Status == fsmwire.StatusOK {
		if r.Restored == nil {
			return fsm.Result{}, fsm.RestoreSummary{}, fmt.Errorf("%w: the leader's restore reply has no summary", errForward)
		}
		sum = *r.Restored
	}
	return res, sum, nil
}

// abortRestore drops the staging of restore id (best effort, one attempt
// bounded by AttemptTimeout, also when the caller's ctx has ended).
func (n *Node) abortRestore(id [16]byte) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.AttemptTimeout)
	defer cancel()
	var err error
	if n.raft.State() == raft.Leader {
		_, _, err = n.restoreStepLocal(ctx, fsm.RestoreAbort{ID: id})
	} else {
		_, _, err = n.forwardRestoreStep(ctx, fsm.RestoreAbort{ID: id}, n.cfg.AttemptTimeout)
	}
	if err != nil {
		n.log.Debug("dropping a failed restore's staging", "restore", fmt.Sprintf("%x", id), "err", err)
	}
}

// handleRestoreStep serves adminRestoreStep on the leader.
func (n *Node) handleRestoreStep(ctx context.Context, body []byte) (adminReply, error) {
	cmd, err := decodeRestoreStep(body)
	if err != nil {
		return adminReply{}, err
	}
	if versionRefusal(cmd, n.fsm.ClusterVersion()) != nil {
		// A leader whose state machine has not caught up with its
		// takeover yet: retried.
		return adminReplyOf(fmt.Errorf("%w: the leader has not applied cluster version %d yet", ErrNoQuorum, fsm.NeedsVersion(cmd))), nil
	}
	res, sum, err := n.restoreStepLocal(ctx, cmd)
	if err != nil {
		return adminReplyOf(wireSafe(err)), nil
	}
	reply := adminReply{Step: &restoreStepReply{Status: res.Status, Reason: res.Reason}}
	if _, ok := cmd.(fsm.RestoreCommit); ok && res.Status == fsmwire.StatusOK {
		reply.Restored = &sum
	}
	return reply, nil
}

// encodeRestoreStep is the body of an adminRestoreStep request.
func encodeRestoreStep(cmd fsm.Command) ([]byte, error) {
	return fsm.EncodeEntry(fsm.Entry{Commands: []fsm.Command{cmd}})
}

// decodeRestoreStep reads the body of an adminRestoreStep request: an
// entry of exactly one valid restore command.
func decodeRestoreStep(body []byte) (fsm.Command, error) {
	e, err := fsm.DecodeEntry(body)
	if err != nil {
		return nil, fmt.Errorf("%w: restore step: %w", errWire, err)
	}
	if len(e.Commands) != 1 {
		return nil, fmt.Errorf("%w: restore step of %d commands", errWire, len(e.Commands))
	}
	cmd := e.Commands[0]
	switch cmd.(type) {
	case fsm.RestoreChunk, fsm.RestoreCommit, fsm.RestoreAbort:
	default:
		return nil, fmt.Errorf("%w: restore step of a %s", errWire, fsm.OpOf(cmd))
	}
	if err := fsm.Validate(cmd); err != nil {
		return nil, fmt.Errorf("%w: restore step: %w", errWire, err)
	}
	return cmd, nil
}
