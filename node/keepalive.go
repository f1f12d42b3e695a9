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
// the keepalive is forwarded, in one request with the others that arrive
// within a millisecond (keepalive_batch.go); without a leader it is retried until ctx ends
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
		return n.keepalives.forward(ctx, id) // with the keepalives that come with it (keepalive_batch.go)
	})
	n.metrics.countKeepAlive(err)
	return err
}

// keepAlive renews a session on the leader (keepAliveMany of one).
func (m *expiryManager) keepAlive(ctx context.Context, id fsm.SessionID) error {
	return m.keepAliveMany(ctx, []fsm.SessionID{id})[0]
}

// keepAliveMany renews sessions on the leader and returns each one's
// verdict: refused if the session's deadline had passed when the keepalive
// was received (even if its expiry is not yet committed); otherwise, once
// a (batched) VerifyLeader round that started after it was received
// confirmed the leadership, its deadline moves to received + TTL.
//
// The round may wait a little for other keepalives to share it
// (keepaliveWait, the least of the sessions'): every round makes Raft
// heartbeat each follower at once, and one per keepalive was most of an
// idle cluster's Raft traffic. The wait costs the client only the time to
// the acknowledgement, not lease: the deadline counts from when the
// keepalive was received.
func (m *expiryManager) keepAliveMany(ctx context.Context, ids []fsm.SessionID) []error {
	received := time.Now()
	verdicts := make([]error, len(ids))
	wait, some := m.checkMany(ids, received, verdicts)
	if !some {
		return verdicts
	}
	if err := m.h.confirm(ctx, wait); err != nil {
		err = leadershipErr(err)
		for i := range verdicts {
			if verdicts[i] == nil {
				verdicts[i] = err
			}
		}
		return verdicts
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, id := range ids {
		if verdicts[i] != nil {
			continue
		}
		if !m.leading {
			verdicts[i] = errNotLeader
			continue
		}
		l := m.sessions[id]
		if l == nil || l.expiring {
			verdicts[i] = ErrSessionExpired
			continue
		}
		if d := received.Add(l.ttl); d.After(l.deadline) {
			l.deadline, l.at = d, d
			m.due.fix(l.slot)
		}
	}
	return verdicts
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

// checkMany refuses each keepalive received past its session's deadline
// (or for a session not known, or expiring; every one when this node is
// not leading) in verdicts, and returns the round's wait for the others
// (the least keepaliveWait) and whether there are any.
func (m *expiryManager) checkMany(ids []fsm.SessionID, received time.Time, verdicts []error) (wait time.Duration, some bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leading || m.h.fsm.Halted() != nil {
		for i := range verdicts {
			verdicts[i] = errNotLeader
		}
		return 0, false
	}
	for i, id := range ids {
		l := m.sessions[id]
		if l == nil || l.expiring || !received.Before(l.deadline) {
			verdicts[i] = ErrSessionExpired
			continue
		}
		w := keepaliveWait(m.h.heartbeat, l.ttl, l.deadline.Sub(received))
		if !some || w < wait {
			wait = w
		}
		some = true
	}
	return wait, some
}
