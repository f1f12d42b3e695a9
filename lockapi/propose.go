package lockapi

import (
	"context"
	"fmt"

	"github.com/raftlock/raftlock/fsm"
)

// propose is the one path by which a session's commands (Acquire, Release,
// CloseSession) reach the cluster: it returns the command's result and log
// index once the leader has committed and applied it (node.Propose). Every
// session-scoped proposal goes through here, so that what every command of a
// session must carry is added in one place.
func (s *Session) propose(ctx context.Context, cmd fsm.Command) (fsm.Result, uint64, error) {
	return s.n.Propose(ctx, cmd)
}

// apply is propose followed by the wait until the local replica has applied
// the command too (node.Apply).
func (s *Session) apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	r, index, err := s.propose(ctx, cmd)
	if err != nil {
		return r, err
	}
	if err := s.n.WaitApplied(ctx, index); err != nil {
		return r, fmt.Errorf("lockapi: committed at index %d but not yet applied here: %w", index, err)
	}
	return r, nil
}
