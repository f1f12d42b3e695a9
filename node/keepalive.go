package node

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"github.com/raftlock/raftlock/fsm"
)

// Keepalives: a session is renewed on the leader (expiryManager), never in
// the log; a follower forwards the keepalive.

// KeepAlive renews a session's lease. The leader refuses it with
// ErrSessionExpired if the session's deadline passed before the keepalive
// arrived; otherwise, after confirming its leadership, it moves the deadline
// to (arrival + TTL). Keepalives are not written to the log. On a follower
// the keepalive is forwarded; without a leader it is retried until ctx ends
// (then the error wraps ErrNoQuorum). A nil ctx → ErrInvalidArgument; a
// halted node → ErrHalted.
func (n *Node) KeepAlive(ctx context.Context, id fsm.SessionID) error {
	if err := checkCtx(ctx); err != nil {
		return err
	}
	if id == 0 {
		return fmt.Errorf("%w: zero session id", ErrInvalidArgument)
	}
	err := n.retry(ctx, false, func(ctx context.Context) error {
		if n.raft.State() == raft.Leader {
			return n.expiry.keepAlive(ctx, id)
		}
		reply, err := n.callLeader(ctx, encodeKeepAliveRequest(id))
		if err != nil {
			return err
		}
		verdict, err := decodeKeepAliveReply(reply)
		if err != nil {
			return fmt.Errorf("%w: %w", errForward, err)
		}
		return verdict
	})
	n.metrics.countKeepAlive(err)
	return err
}

// keepAlive renews a session on the leader: refused if the session's deadline
// had passed when the keepalive was received (even if its expiry is not yet
// committed), confirmed with a (batched) VerifyLeader before the deadline is
// moved to received + TTL.
func (m *expiryManager) keepAlive(ctx context.Context, id fsm.SessionID) error {
	received := time.Now()
	if err := m.check(id, received); err != nil {
		return err
	}
	if err := m.h.confirm(ctx); err != nil {
		return leadershipErr(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leading {
		return errNotLeader
	}
	l := m.sessions[id]
	if l == nil || l.expiring {
		return ErrSessionExpired
	}
	if d := received.Add(l.ttl); d.After(l.deadline) {
		l.deadline, l.at = d, d
		m.due.fix(l.slot)
	}
	return nil
}

func (m *expiryManager) check(id fsm.SessionID, received time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leading || m.h.fsm.Halted() != nil {
		return errNotLeader
	}
	l := m.sessions[id]
	if l == nil || l.expiring || !received.Before(l.deadline) {
		return ErrSessionExpired
	}
	return nil
}
