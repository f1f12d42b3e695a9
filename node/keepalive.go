package node

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
)

// Keepalives: a session is renewed on the leader (expiryManager); a follower
// forwards the keepalive. While the leader stays, keepalives are never in
// the log; after a leader change each live session's first keepalive is
// recorded once, by a Renewed entry (keepalive_renew.go).

// keepAlive renews a session's lease. The leader refuses it with
// replica.ErrSessionExpired if the session's deadline passed before the keepalive
// arrived; otherwise, once it has fresh evidence that it still leads (a
// leadership round, or the commit of a Renewed entry for a session that
// has not renewed in the log since the last leader change), it moves the
// deadline to (arrival + TTL). On a follower
// the keepalive is forwarded, in one request with the others that arrive
// within a millisecond (keepalive_batch.go); without a leader it is retried until ctx ends
// (then the error wraps ErrNoQuorum). A nil ctx → ErrInvalidArgument; a
// halted node → ErrHalted.
func (n *Node) keepAlive(ctx context.Context, id lockinfo.SessionID) error {
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
func (m *expiryManager) keepAlive(ctx context.Context, id lockinfo.SessionID) error {
	return m.keepAliveMany(ctx, []lockinfo.SessionID{id})[0]
}

// keepAliveMany renews sessions on the leader and returns each one's
// verdict: refused if the session's deadline had passed when the keepalive
// was received (even if its expiry is not yet committed); otherwise its
// deadline moves to received + TTL once there is evidence, after it was
// received, that no later leader was elected before: for a marked session
// (a takeover marker follows its last renewal in the log) the commit of a
// Renewed entry naming it, proposed after it was received (renewMarked);
// for the others a (batched) leadership round that started after it was
// received (ConfirmTerm from cluster version 4, VerifyLeader below).
//
// The round may wait a little for other keepalives to share it
// (keepaliveWait, the least of the sessions'): every round makes Raft
// heartbeat each follower at once, and one per keepalive was most of an
// idle cluster's Raft traffic. The wait costs the client only the time to
// the acknowledgement, not lease: the deadline counts from when the
// keepalive was received.
func (m *expiryManager) keepAliveMany(ctx context.Context, ids []lockinfo.SessionID) []error {
	received := time.Now()
	verdicts := make([]error, len(ids))
	wait, unmarked, marked := m.checkMany(ids, received, verdicts)
	if s := m.h.traceSink(); s != nil {
		traceReceived(s, ids, received, verdicts, marked)
		defer traceAnswered(s, m, ids, received, verdicts)
	}
	var renewed chan struct{}
	if len(marked) > 0 {
		renewed = make(chan struct{})
		go func() { // alongside the round: a batch may need both (each writes its own verdicts)
			defer close(renewed)
			m.renewMarked(ctx, ids, marked, received, verdicts)
		}()
	}
	if len(unmarked) > 0 {
		m.confirmed(ctx, ids, unmarked, wait, received, verdicts)
	}
	if renewed != nil {
		<-renewed
	}
	return verdicts
}

// confirmed runs a leadership round for the keepalives ids[pending] and
// renews those sessions.
func (m *expiryManager) confirmed(ctx context.Context, ids []lockinfo.SessionID, pending []int, wait time.Duration, received time.Time, verdicts []error) {
	if err := m.h.confirm(ctx, wait); err != nil {
		err = leadershipErr(err)
		for _, i := range pending {
			verdicts[i] = err
		}
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, i := range pending {
		verdicts[i] = m.extendLocked(ids[i], received, false)
	}
}

// extendLocked moves a session's deadline to received + TTL (unless it is
// later already) and returns nil, or the keepalive's refusal: this node
// stopped leading, or the session is gone or expiring. renewed: a Renewed
// entry for it committed (it is no longer marked).
func (m *expiryManager) extendLocked(id lockinfo.SessionID, received time.Time, renewed bool) error {
	if !m.leading {
		return errNotLeader
	}
	l := m.sessions[id]
	if l == nil || l.expiring {
		return replica.ErrSessionExpired
	}
	if renewed {
		l.marked = false
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

// checkMany refuses each keepalive received past its session's deadline
// (or for a session not known, or expiring; every one when this node is
// not leading) in verdicts, and returns the positions of the others,
// unmarked and marked, and the round's wait for the unmarked (the least
// keepaliveWait).
func (m *expiryManager) checkMany(ids []lockinfo.SessionID, received time.Time, verdicts []error) (wait time.Duration, unmarked, marked []int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leading || m.h.fsm.Halted() != nil {
		for i := range verdicts {
			verdicts[i] = errNotLeader
		}
		return 0, nil, nil
	}
	for i, id := range ids {
		l := m.sessions[id]
		if l == nil || l.expiring || !received.Before(l.deadline) {
			verdicts[i] = replica.ErrSessionExpired
			continue
		}
		if l.marked {
			marked = append(marked, i)
			continue
		}
		w := keepaliveWait(m.h.heartbeat, l.ttl, l.deadline.Sub(received))
		if len(unmarked) == 0 || w < wait {
			wait = w
		}
		unmarked = append(unmarked, i)
	}
	return wait, unmarked, marked
}
