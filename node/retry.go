package node

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/transport"
)

// Retrying proposals, keepalives and reads while the cluster cannot commit,
// and what the caller is told when it gives up.

// errForward: an RPC to the leader failed; retried (commands are idempotent
// or exactly-once).
var errForward = errors.New("node: forwarding to the leader failed")

// errLeaderClosed: the leader that was asked is shutting down; a command it
// took may still commit (retried, but never "not proposed").
var errLeaderClosed = errors.New("node: the leader is shutting down")

func raftErr(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrLeadershipTransferInProgress):
		return errNotLeader
	case errors.Is(err, raft.ErrRaftShutdown):
		return ErrClosed
	default: // ErrLeadershipLost, ErrEnqueueTimeout, ErrAbortedByRestore: ambiguous, retried
		return fmt.Errorf("%w: %w", ErrNoQuorum, err)
	}
}

// leadershipErr maps a failed VerifyLeader (or its context).
func leadershipErr(err error) error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return errUnknown{err}
	default:
		return raftErr(err)
	}
}

func retryable(err error) bool {
	return errors.Is(err, errNotLeader) || errors.Is(err, errNoLeader) ||
		errors.Is(err, ErrNoQuorum) || errors.Is(err, errForward) || errors.Is(err, ErrNotProposed)
}

// definitelyNotProposed reports whether a failed attempt cannot have
// appended its command to any leader's log: no leader was known, the node
// asked was not the leader (raft refuses before appending), or the command
// never left a batcher.
func definitelyNotProposed(err error) bool {
	switch {
	case errors.Is(err, errLeaderClosed):
		return false // a leader shutting down may have appended it
	case errors.Is(err, ErrNotProposed), errors.Is(err, errNoLeader), errors.Is(err, errNotLeader):
		return true
	}
	return false
}

// retry runs op until it succeeds, fails for good, or ctx ends. Failures
// that mean "no leader / cannot commit now" are retried with jittered,
// exponential backoff (a tenth of a heartbeat up to an election timeout).
// When ctx ends the error wraps ErrNoQuorum and ctx.Err(); for a proposal
// (propose) also ErrNotProposed if no attempt can have reached a log.
func (n *Node) retry(ctx context.Context, propose bool, op func(context.Context) error) error {
	start := time.Now()
	var last error
	maybeProposed := false
	for attempt := 0; ; attempt++ {
		if n.isClosed() {
			return ErrClosed
		}
		if err := n.haltErr(); err != nil {
			return err
		}
		err := op(ctx)
		if err == nil {
			return nil
		}
		maybeProposed = maybeProposed || !definitelyNotProposed(err)
		var unknown errUnknown
		if errors.As(err, &unknown) || (errors.Is(err, ErrNotProposed) && ctx.Err() != nil) {
			return n.giveUp(ctx, last, err, start, propose && !maybeProposed)
		}
		if !retryable(err) {
			return err
		}
		last = err
		if sleepCtx(ctx, n.backoff(attempt)) != nil {
			return n.giveUp(ctx, last, nil, start, propose && !maybeProposed)
		}
	}
}

// giveUp explains why ctx ended: the cluster was not able to commit or
// confirm in the time the caller gave (ErrNoQuorum), with what the last
// attempt met; and, for a command that never left this node, ErrNotProposed.
func (n *Node) giveUp(ctx context.Context, last, final error, start time.Time, notProposed bool) error {
	why := final
	if last != nil {
		why = last
	}
	took := time.Since(start).Round(time.Millisecond)
	var err error
	if why != nil {
		err = fmt.Errorf("%w: %w: not committed within %v (last attempt: %v)", ErrNoQuorum, ctx.Err(), took, why)
	} else {
		err = fmt.Errorf("%w: %w: not committed within %v", ErrNoQuorum, ctx.Err(), took)
	}
	if notProposed {
		return fmt.Errorf("%w: %w", ErrNotProposed, err)
	}
	return err
}

func (n *Node) backoff(attempt int) time.Duration {
	base := n.cfg.Timing.HeartbeatTimeout / 10
	d := base << min(attempt, 6)
	d = min(d, n.cfg.Timing.ElectionTimeout)
	return d/2 + rand.N(d/2+1)
}

func outcomeLabel(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, transport.ErrClosed):
		return "closed"
	}
	return "error"
}

// wireSafe turns "the handler's context ended" into a retryable verdict: the
// follower's retry is safe (exactly-once or idempotent commands). A command
// that never left the leader's batcher stays "not proposed".
func wireSafe(err error) error {
	if err == nil {
		return nil // the common case, without errors.As's allocation
	}
	var unknown errUnknown
	switch {
	case errors.Is(err, ErrNotProposed):
		return err
	case errors.As(err, &unknown), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w: %v", ErrNoQuorum, err)
	}
	return err
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
