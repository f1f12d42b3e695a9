package gossip

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/raftlock/raftlock/internal/membership"
)

// View is a member as the planners and Status see it.
type View struct {
	ID, Addr string
	Gossip   string
	State    State // alive, suspect, dead or left
	Since    time.Time
	Meta     Meta
}

// suspectAfter: an alive member not heard from directly for this long is
// reported suspect. memberlist probes members round-robin, one per
// ProbeInterval, reshuffling after each round.
func (m *Layer) suspectAfter(alive int) time.Duration {
	return time.Duration(3*max(alive, 1)+2) * m.timing.ProbeInterval
}

// View returns every known member (this node's own entry uses its current
// metadata).
func (m *Layer) View(now time.Time) map[string]View {
	m.mu.Lock()
	defer m.mu.Unlock()
	alive := 0
	for _, mi := range m.members {
		if mi.state == Alive {
			alive++
		}
	}
	out := make(map[string]View, len(m.members)+1)
	for id, mi := range m.members {
		v := View{ID: id, Addr: mi.meta.Addr, Gossip: mi.gossip, State: mi.state, Since: mi.since, Meta: mi.meta}
		if id == m.cfg.ID {
			v.Meta, v.Addr, v.State = m.meta, m.meta.Addr, Alive
		} else if mi.state == Alive && now.Sub(mi.heard) > m.suspectAfter(alive) {
			v.State = Suspect
		}
		out[id] = v
	}
	if _, ok := out[m.cfg.ID]; !ok {
		out[m.cfg.ID] = View{ID: m.cfg.ID, Addr: m.meta.Addr, Gossip: m.addr, State: Alive, Since: now, Meta: m.meta}
	}
	return out
}

// MemberAddrs returns the gossip and Raft addresses of every member in the
// table (foreign members are never in it) and of the known peers.
func (m *Layer) MemberAddrs() []string {
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

// Addr is this node's advertised gossip address.
func (m *Layer) Addr() string { return m.addr }

// Problem is why this node is not in the gossip cluster, for Status, or ""
// given view (View): another live member uses its id, or no seed answered
// while it sees no other member. A join error counts only while it sees no
// other member: a node that got in through the members it remembers
// (reconnect) is fine, though its seeds may still not answer.
func (m *Layer) Problem(view map[string]View) string {
	alone := true
	for id, v := range view {
		if id != m.cfg.ID && (v.State == Alive || v.State == Suspect) {
			alone = false
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case m.fatal != nil:
		return m.fatal.Error()
	case m.joinErr != "" && alone:
		return m.joinErr
	}
	return ""
}

// CountMembers counts members by state (the members gauge).
func (m *Layer) CountMembers(state State) float64 {
	c := 0
	for _, v := range m.View(time.Now()) {
		if v.State == state {
			c++
		}
	}
	return float64(c)
}

// foreign reports a member of another cluster (both ids known and
// different).
func (m *Layer) foreign(md Meta) error {
	if cid := m.h.ClusterID(); md.Cluster != "" && cid != "" && md.Cluster != cid {
		return fmt.Errorf("%w: its cluster id is %s, this node's %s", membership.ErrForeignCluster, md.Cluster, cid)
	}
	return nil
}

// FormationCandidates lists the founding nodes gossip shows (formation):
// alive members without Raft state that were started with the same
// BootstrapExpect; or reports that a cluster exists (a member with state),
// or what prevents formation (another BootstrapExpect, too many founders).
func (m *Layer) FormationCandidates() ([]membership.Candidate, string, string) {
	expect := m.cfg.BootstrapExpect
	var cands []membership.Candidate
	for id, v := range m.View(time.Now()) {
		if v.State != Alive && v.State != Suspect {
			continue
		}
		switch {
		case id == m.cfg.ID:
		case v.Meta.State:
			return nil, v.Addr, ""
		case v.Meta.Expect == 0:
			continue // started to join, not to found
		case v.Meta.Expect != expect:
			m.conflict("bootstrap_expect", id, "member expects another cluster size; not founding until this is fixed",
				"member", id, "its_bootstrap_expect", v.Meta.Expect, "bootstrap_expect", expect)
			return nil, "", fmt.Sprintf("member %s has BootstrapExpect %d, this node %d", id, v.Meta.Expect, expect)
		}
		cands = append(cands, membership.Candidate{ID: id, Addr: v.Addr})
	}
	if len(cands) > 2*expect-1 {
		return nil, "", fmt.Sprintf("%d nodes with BootstrapExpect %d: at most %d may found a cluster (start the others without BootstrapExpect)", len(cands), expect, 2*expect-1)
	}
	slices.SortFunc(cands, func(a, b membership.Candidate) int { return strings.Compare(a.ID, b.ID) })
	return cands, "", ""
}
