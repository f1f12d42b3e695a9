package node

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// memberView is a member as the planners see it.
type memberView struct {
	ID, Addr string
	Gossip   string
	State    MemberState // alive, suspect, dead or left
	Since    time.Time
	Meta     memberMeta
}

// suspectAfter: an alive member not heard from directly for this long is
// reported suspect. memberlist probes members round-robin, one per
// ProbeInterval, reshuffling after each round.
func (m *gossip) suspectAfter(alive int) time.Duration {
	return time.Duration(3*max(alive, 1)+2) * m.timing.ProbeInterval
}

// view returns every known member (this node's own entry uses its current
// metadata).
func (m *gossip) view(now time.Time) map[string]memberView {
	m.mu.Lock()
	defer m.mu.Unlock()
	alive := 0
	for _, mi := range m.members {
		if mi.state == MemberAlive {
			alive++
		}
	}
	out := make(map[string]memberView, len(m.members)+1)
	for id, mi := range m.members {
		v := memberView{ID: id, Addr: mi.meta.Addr, Gossip: mi.gossip, State: mi.state, Since: mi.since, Meta: mi.meta}
		if id == m.n.cfg.ID {
			v.Meta, v.Addr, v.State = m.meta, m.meta.Addr, MemberAlive
		} else if mi.state == MemberAlive && now.Sub(mi.heard) > m.suspectAfter(alive) {
			v.State = MemberSuspect
		}
		out[id] = v
	}
	if _, ok := out[m.n.cfg.ID]; !ok {
		out[m.n.cfg.ID] = memberView{ID: m.n.cfg.ID, Addr: m.meta.Addr, Gossip: m.addr, State: MemberAlive, Since: now, Meta: m.meta}
	}
	return out
}

// memberAddrs returns the gossip and Raft addresses of every member in the
// table (foreign members are never in it) and of the known peers.
func (m *gossip) memberAddrs() []string {
	m.mu.Lock()
	out := make([]string, 0, 2*len(m.members))
	for _, mi := range m.members {
		out = append(out, mi.gossip)
		if mi.meta.Addr != "" {
			out = append(out, mi.meta.Addr)
		}
	}
	m.mu.Unlock()
	return append(out, m.known.all()...)
}

// status fills the membership part of a Status.
func (m *gossip) status(st *Status) {
	view := m.view(time.Now())
	byID := map[string]int{}
	for _, s := range st.Servers {
		mb := Member{ID: s.ID, Addr: s.Addr, State: MemberUnknown, Role: s.Role, Leader: s.Leader}
		if v, ok := view[s.ID]; ok {
			mb.GossipAddr, mb.State, mb.Since = v.Gossip, v.State, v.Since
		}
		byID[s.ID] = len(st.Members)
		st.Members = append(st.Members, mb)
	}
	for id, v := range view {
		if _, ok := byID[id]; !ok {
			st.Members = append(st.Members, Member{ID: id, Addr: v.Addr, GossipAddr: v.Gossip, State: v.State, Since: v.Since})
		}
	}
	slices.SortFunc(st.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	st.GossipAddr = m.addr
	// A join error is why the node is not in the gossip cluster only while
	// it sees no other member: a node that got in through the members it
	// remembers (reconnect) is fine, though its seeds may still not answer.
	alone := true
	for id, v := range view {
		if id != m.n.cfg.ID && (v.State == MemberAlive || v.State == MemberSuspect) {
			alone = false
		}
	}
	m.mu.Lock()
	switch {
	case m.fatal != nil:
		st.GossipErr = m.fatal.Error()
	case m.joinErr != "" && alone:
		st.GossipErr = m.joinErr
	}
	m.mu.Unlock()
}

// countMembers counts members by state (the members gauge).
func (m *gossip) countMembers(state MemberState) float64 {
	c := 0
	for _, v := range m.view(time.Now()) {
		if v.State == state {
			c++
		}
	}
	return float64(c)
}

// errForeignCluster: a member carries another cluster id.
var errForeignCluster = errors.New("node: member of another cluster")

// foreign reports a member of another cluster (both ids known and
// different).
func (m *gossip) foreign(md memberMeta) error {
	if cid := m.n.ident().ClusterID; md.Cluster != "" && cid != "" && md.Cluster != cid {
		return fmt.Errorf("%w: its cluster id is %s, this node's %s", errForeignCluster, md.Cluster, cid)
	}
	return nil
}

// formationCandidates lists the founding nodes gossip shows (formation):
// alive members without Raft state that were started with the same
// BootstrapExpect; or reports that a cluster exists (a member with state),
// or what prevents formation (another BootstrapExpect, too many founders).
func (m *gossip) formationCandidates() ([]formationCandidate, string, string) {
	expect := m.n.cfg.BootstrapExpect
	var cands []formationCandidate
	for id, v := range m.view(time.Now()) {
		if v.State != MemberAlive && v.State != MemberSuspect {
			continue
		}
		switch {
		case id == m.n.cfg.ID:
		case v.Meta.State:
			return nil, v.Addr, ""
		case v.Meta.Expect == 0:
			continue // started to join, not to found
		case v.Meta.Expect != expect:
			m.conflict("bootstrap_expect", id, "member expects another cluster size; not founding until this is fixed",
				"member", id, "its_bootstrap_expect", v.Meta.Expect, "bootstrap_expect", expect)
			return nil, "", fmt.Sprintf("member %s has BootstrapExpect %d, this node %d", id, v.Meta.Expect, expect)
		}
		cands = append(cands, formationCandidate{ID: id, Addr: v.Addr})
	}
	if len(cands) > 2*expect-1 {
		return nil, "", fmt.Sprintf("%d nodes with BootstrapExpect %d: at most %d may found a cluster (start the others without BootstrapExpect)", len(cands), expect, 2*expect-1)
	}
	slices.SortFunc(cands, func(a, b formationCandidate) int { return strings.Compare(a.ID, b.ID) })
	return cands, "", ""
}
