package lockapi

import (
	"context"
	"fmt"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// propose is the one path by which a session's commands (Acquire, Release,
// CloseSession) reach the cluster: it returns the command's result and log
// index once the leader has committed and applied it (the replica's
// Propose). Every session-scoped proposal goes through here, so that what
// every command of a session must carry is added in one place: the
// session's request number and acknowledgement (exactly-once execution,
// see seqAlloc), and for a Release its session. The request is finished
// (acknowledged by the next command) whatever propose returns; the
// replica's own retries of Propose resend the very same command, request
// number included.
func (s *Session) propose(ctx context.Context, cmd fsm.Command) (fsm.Result, uint64, error) {
	seq := s.seq.next()
	defer s.seq.done(seq)
	cmd = withRequest(cmd, s.id, seq, s.seq.ackBelow())
	s.traceCommand(cmd)
	return s.r.Propose(ctx, cmd)
}

// withRequest attaches the request number, the acknowledgement and (to a
// Release) the session to a session-scoped command.
func withRequest(cmd fsm.Command, id lockinfo.SessionID, seq, ackBelow uint64) fsm.Command {
	switch c := cmd.(type) {
	case fsm.Acquire:
		c.Seq, c.AckBelow = seq, ackBelow
		return c
	case fsm.Release:
		c.Session, c.Seq, c.AckBelow = id, seq, ackBelow
		return c
	case fsm.CloseSession:
		c.Seq, c.AckBelow = seq, ackBelow
		return c
	case fsm.SetValue:
		c.Session, c.Seq, c.AckBelow = id, seq, ackBelow
		return c
	}
	return cmd
}

// apply is propose followed by the wait until the local replica has applied
// the command too (as replica.Replica.Apply).
func (s *Session) apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	r, index, err := s.propose(ctx, cmd)
	if err != nil {
		return r, err
	}
	if err := s.r.WaitApplied(ctx, index); err != nil {
		return r, fmt.Errorf("lockapi: committed at index %d but not yet applied here: %w", index, err)
	}
	return r, nil
}
