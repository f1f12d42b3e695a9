package node

import (
	"github.com/raftlock/raftlock/fsm"

	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/membership"
)

// Where a grant is announced. A waiter waits on the replica its session lives
// on, and that replica is the one that sent the leader the waiting Acquire
// (a session's commands are all proposed by its own process). So the leader
// remembers, per session, where its last waiting Acquire came from — its
// home — and announces a hand-off grant only there:
//
//   - home is this leader: no announcement (the leader applied the grant
//     before announcing, so its own subscriptions have it already);
//   - home is a peer in the configuration: that peer only;
//   - home unknown (a session whose waiting Acquire this leader did not
//     commit — it was elected since — or a home no longer in the
//     configuration, or one of more than maxHomes sessions): every peer,
//     as before.
//
// A wrong or missing home costs latency only, never safety: announcements
// are best effort and every replica applies the grant from the log anyway.
// With three replicas and waiters spread evenly, a hand-off sends about two
// thirds of a notice instead of two.

// announcePeer is one other replica of the configuration.
type announcePeer struct {
	id   string // Raft server id
	addr string // Raft (and RPC) address
}

// maxHomes bounds the sessions whose home the leader keeps; past it, new
// sessions' grants go to every peer.
const maxHomes = 1 << 17

// originUnknown is the origin of a forwarded command whose sender did not
// say who it is (a version-1 peer): its session's home is not recorded.
const originUnknown = "\x00unknown"

// originOf is the home a forwarded command's sender names: its Raft id as its
// hello stated it ("" would be this node; see proposal.origin).
func originOf(nodeID, incarnation string) string {
	switch {
	case nodeID == "":
		return originUnknown
	case incarnation == "":
		return nodeID
	}
	return membership.RaftIDFor(nodeID, incarnation)
}

// noteHomes records the home of every session that sends a waiting Acquire
// in batch (commit goroutine, on the leader, before the entry is applied).
func (a *announcer) noteHomes(batch []*proposal) {
	var locked bool
	for _, p := range batch {
		c, ok := p.cmd.(fsm.Acquire)
		if !ok || !c.Wait {
			continue
		}
		if !locked {
			a.mu.Lock()
			defer a.mu.Unlock()
			locked = true
		}
		if p.origin == originUnknown {
			delete(a.homes, c.Session)
			continue
		}
		if h, known := a.homes[c.Session]; (known && h != p.origin) || (!known && len(a.homes) < maxHomes) {
			a.homes[c.Session] = p.origin
		}
	}
}

// forgetHomes drops the homes of the sessions that events end (FSM
// goroutine, every replica; only a leader has any).
func (a *announcer) forgetHomes(events []fsm.Event) {
	var locked bool
	for _, e := range events {
		if e.Kind != fsmwire.EventSessionClosed && e.Kind != fsmwire.EventSessionExpired {
			continue
		}
		if !locked {
			a.mu.Lock()
			defer a.mu.Unlock()
			locked = true
		}
		delete(a.homes, e.Session)
	}
}

// planAnnouncements says which grants go to which peer address (the rules
// above). It is pure: homes and peers are read, not changed.
func planAnnouncements(grants []fsm.Event, homes map[lockinfo.SessionID]string, peers []announcePeer) map[string][]fsm.Event {
	plan := make(map[string][]fsm.Event, len(peers))
	for _, g := range grants {
		if home, ok := homes[g.Session]; ok {
			if home == "" {
				continue // this leader
			}
			if p, ok := peerFor(peers, home); ok {
				plan[p.addr] = append(plan[p.addr], g)
				continue
			}
		}
		for _, p := range peers {
			plan[p.addr] = append(plan[p.addr], g)
		}
	}
	return plan
}

// peerFor finds the peer a home names: the same node id, and the same
// incarnation unless the peer's Raft id has none (a data dir from before
// incarnations) — the rule join and probe apply to a Raft id too.
func peerFor(peers []announcePeer, home string) (announcePeer, bool) {
	node, inc := membership.SplitRaftID(home)
	for _, p := range peers {
		if pnode, pinc := membership.SplitRaftID(p.id); pnode == node && (pinc == "" || pinc == inc) {
			return p, true
		}
	}
	return announcePeer{}, false
}
