package node

import (
	"context"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/leasetrace"
	"github.com/raftlock/raftlock/internal/lockinfo"
)

// Renewals in the log (cluster version 4). A new leader cannot know when
// its predecessors last acknowledged a session's keepalive — those are not
// logged — so without a record it must give every session a fresh lease,
// and leaders that change more often than TTL + ElectionTimeout keep a
// silent session alive for ever. Two executions with the same log cannot be
// told apart: in one the session stopped renewing, in the other each
// leader acknowledged it once just before it was deposed; so no rule that
// reads only the log can end the first without cutting the second short —
// unless each leader's acknowledgements leave a record.
//
// The record is small and made once per live session per leader term. A new
// leader's barrier (fsm.Takeover) is a takeover marker; a session is marked
// while a marker follows the entry that last renewed it (its OpenSession,
// or a Renewed). A keepalive of a marked session is acknowledged only once
// a Renewed entry naming it — proposed after the keepalive was received,
// gathered with the other marked sessions of its batch, and committed by
// this leader (its own proposal's result, not the state machine showing
// the session renewed, which another leader's entry could do) — so the
// session's origin, for every later leader, is a marker after that
// acknowledgement; from then on the session is unmarked and its keepalives
// need only a leadership round. A new leader times a marked session from
// its own apply of that origin marker (expiryManager.takeOver), so a
// session silent since T is expired by
//
//	T + 2·(TTL + ElectionTimeout) + 2·E + 3·δ + λ
//
// whatever the number of leader changes (E: the longest time without a
// leader that has taken over; δ: the longest commit latency; λ: the lag of
// a marker's apply on a replica that later leads). The lease model
// (internal/testing/model/lease, "Item 9") checks the rule and the bound.
//
// Cost: after each leader change every live session writes one Renewed at
// its next keepalive (a batch of keepalives, one command; the proposer
// gathers commands into entries); while the leader stays, nothing.

// versionRenewed is the cluster version from which the leader's barrier is
// a takeover marker and marked sessions renew in the log.
const versionRenewed uint64 = 4

// renewMarked proposes Renewed for the marked sessions ids[marked] and,
// once it committed, renews them (verdicts[i] nil) — or sets their
// verdicts to why not.
func (m *expiryManager) renewMarked(ctx context.Context, ids []lockinfo.SessionID, marked []int, received time.Time, verdicts []error) {
	sessions := make([]lockinfo.SessionID, len(marked))
	for j, i := range marked {
		sessions[j] = ids[i]
	}
	for len(sessions) > 0 {
		chunk := sessions[:min(len(sessions), fsmwire.MaxExpireSessions)]
		sessions = sessions[len(chunk):]
		traceSessions(m.h.traceSink(), leasetrace.ProposeRenewed, chunk, nil)
		out := m.h.propose(ctx, fsm.Renewed{Sessions: chunk})
		for _, i := range marked[:len(chunk)] {
			verdicts[i] = out.err
		}
		if out.err == nil {
			m.mu.Lock()
			for _, i := range marked[:len(chunk)] {
				verdicts[i] = m.extendLocked(ids[i], received, true)
			}
			m.mu.Unlock()
		}
		marked = marked[len(chunk):]
	}
}
