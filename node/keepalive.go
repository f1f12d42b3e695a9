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
// committed), confirmed with a (batched) VerifyLeader round that started
// after it was received, before the deadline is moved to received + TTL.
//
// The round may wait a little for other keepalives to share it
// (keepaliveWait): every round makes Raft heartbeat each follower at once,
// and one per keepalive was most of an idle cluster's Raft traffic. The wait
// costs the client only the time to the acknowledgement, not lease: the
// deadline counts from when the keepalive was received.
func (m *expiryManager) keepAlive(ctx context.Context, id fsm.SessionID) error {
	received := time.Now()
	was, err := m.check(id, received)
	if err != nil {
		return err
	}
	if err := m.h.confirm(ctx, keepaliveWait(m.h.heartbeat, was.ttl, was.deadline.Sub(received))); err != nil {
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

// keepaliveWait is how long a keepalive's leadership round may wait for
// others: half a heartbeat timeout (so the rounds add at most a fifth to
// Raft's own heartbeats, which go every tenth), at most a fiftieth of the
// session's TTL (a keepalive's attempt may take a sixth), and at most a
// quarter of what is left of its lease (a keepalive that comes late must
// not let the session expire while it waits).
func keepaliveWait(heartbeat, ttl, left time.Duration) time.Duration {
	return max(0, min(heartbeat/2, ttl/50, left/4))
}

// check refuses a keepalive received past the session's deadline (or for a
// session not known, or expiring) and returns the session's deadline as it
// was when the keepalive was received.
func (m *expiryManager) check(id fsm.SessionID, received time.Time) (deadline, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leading || m.h.fsm.Halted() != nil {
		return deadline{}, errNotLeader
	}
	l := m.sessions[id]
	if l == nil || l.expiring || !received.Before(l.deadline) {
		return deadline{}, ErrSessionExpired
	}
	return *l, nil
}
