package node

import (
	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/membership"
)

// initLabels creates every labelled series of the node's counters at zero,
// so that they exist from registration on (a series that appears only at
// its first event breaks rate() and alerts on absence).
func (m *metrics) initLabels() {
	for _, o := range []string{"ok", "error"} {
		m.commits.WithLabelValues(o)
		m.gossipJoins.WithLabelValues(o)
	}
	for _, o := range []string{"ok", "timeout", "closed", "error"} { // outcomeLabel
		m.forwards.WithLabelValues(o)
		m.announcements.WithLabelValues(o)
	}
	for _, r := range []string{"ok", "expired", "no_quorum", "error"} {
		m.keepalives.WithLabelValues(r)
	}
	for _, r := range []fsmwire.Reason{fsmwire.ReasonOwner, fsmwire.ReasonSessionClosed, fsmwire.ReasonSessionExpired, fsmwire.ReasonRevoked} {
		m.releases.WithLabelValues(r.String())
	}
	for _, r := range []string{"duplicate_id", "address", "protocol", "metadata", "bootstrap_expect", "cluster_id"} {
		m.memberConflicts.WithLabelValues(r)
	}
	for _, a := range []membership.ActionKind{membership.AddNonvoter, membership.Promote, membership.Demote, membership.RemoveLeaving,
		membership.Replace, membership.Reap, membership.UpdateAddr} {
		for _, r := range []string{"ok", "error", "refused"} {
			m.memberChanges.WithLabelValues(string(a), r)
		}
	}
}

// observeLeaders counts every new leader this node learns of
// (leadership_changes_total), as a follower too: raft's leader
// observations, whichever server they name.
func (n *Node) observeLeaders() {
	defer n.wg.Done()
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	var last raft.ServerID
	for {
		select {
		case <-n.ctx.Done():
			return
		case o := <-ch:
			lo := o.Data.(raft.LeaderObservation)
			if lo.LeaderID != "" && lo.LeaderID != last {
				last = lo.LeaderID
				n.metrics.leaderChanges.Inc()
			}
		}
	}
}
