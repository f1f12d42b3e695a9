package membership

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Quorum is the majority of n voters.
func Quorum(voters int) int { return voters/2 + 1 }

// TargetVoters is how many voters a configuration should have: the largest
// odd number not above min(maxVoters, n) (an even count tolerates no more
// failures than the odd count below it, and needs a larger quorum), and at
// least 1.
func TargetVoters(n, maxVoters int) int {
	t := min(n, maxVoters)
	if t%2 == 0 {
		t--
	}
	return max(t, 1)
}

// PlanMembership decides the next configuration change. One change at a
// time, in this order:
//
//  1. A member that decommissions (Leave) is removed — a voter only if the
//     voters that remain healthy still form a quorum of the smaller
//     configuration (otherwise it stays, and the refusal is reported).
//  2. A configured server whose node came back under another incarnation
//     (it lost its data dir) is removed, with the same guard: it is gone
//     for good, but removing it must not cost the quorum. Its new
//     incarnation is then added like any new member (step 5).
//  3. A server failed longer than ReapTimeout (gone from gossip, or not
//     answering the leader's probes, and not healthy by them) is removed,
//     never when that leaves fewer voters than a quorum of the
//     configuration, or fewer healthy voters than a quorum of what remains.
//     A member that merely restarts (Close) is not removed unless it stays
//     down that long.
//  4. A server restarted at a new address (same incarnation) is moved
//     there, once its identity at the new address is verified.
//  5. A live, verified member of this cluster (or of none yet) that is not
//     configured is added — always as a non-voter, at most one per
//     AddInterval and MaxNonvoters in all. Members whose address another
//     server or member uses, or that carry another cluster id, are refused.
//  6. A non-voter that has been healthy (reachable over Raft, caught up,
//     in contact with the leader) for Stabilization is promoted while the
//     voters are fewer than TargetVoters of (voters + stable non-voters).
//     A member that cannot be reached over Raft is never promoted.
//  7. Voters beyond that target are demoted (an unhealthy one first, never
//     the leader), with the same guard as a removal.
func PlanMembership(in Input) Plan {
	var p Plan
	servers := slices.Clone(in.Servers)
	slices.SortFunc(servers, func(a, b Server) int { return strings.Compare(a.RaftID, b.RaftID) })
	byRaft := map[string]Server{}
	byNode := map[string]Server{}
	addrOwner := map[string]string{} // address → Raft id
	voters := 0
	for _, s := range servers {
		byRaft[s.RaftID], byNode[s.NodeID], addrOwner[s.Addr] = s, s, s.RaftID
		if s.Voter {
			voters++
		}
	}
	due := func(t time.Time) {
		if !t.IsZero() && (p.Next.IsZero() || t.Before(p.Next)) {
			p.Next = t
		}
	}
	// current is the member record of a server's own incarnation, if any.
	current := func(s Server) (Member, bool) {
		m, ok := in.Members[s.NodeID]
		return m, ok && m.RaftID == s.RaftID
	}
	healthy := func(s Server) bool {
		if s.RaftID == in.Self {
			return true
		}
		if m, ok := current(s); ok && (m.Leaving || m.State == Dead || m.State == Left) {
			return false
		}
		return in.Health[s.RaftID].Healthy
	}
	// removable: the guard for removing server s (a voter: the healthy
	// voters that remain must still form a quorum of what remains).
	removable := func(s Server) (bool, int) {
		if !s.Voter {
			return true, 0
		}
		after, healthyAfter := voters-1, 0
		for _, t := range servers {
			if t.Voter && t.RaftID != s.RaftID && healthy(t) {
				healthyAfter++
			}
		}
		return after >= Quorum(voters) && healthyAfter >= Quorum(after), healthyAfter
	}

	// 1. Decommissions.
	for _, s := range servers {
		m, ok := current(s)
		if !ok || !m.Leaving || s.RaftID == in.Self {
			continue
		}
		if ok, h := removable(s); !ok {
			p.Notes = append(p.Notes, Note{Reason: "leave_refused", Key: s.RaftID,
				Msg:  "not removing a leaving voter yet: the voters that would remain healthy are fewer than a quorum",
				Args: []any{"member", s.NodeID, "voters", voters, "healthy_voters_after", h}})
			continue
		}
		p.Action = &Action{Kind: RemoveLeaving, RaftID: s.RaftID, NodeID: s.NodeID, Addr: s.Addr, Why: "decommissioned (Leave)"}
		return p
	}

	// 2. Older incarnations of members that came back without their data:
	// the server's address now answers as another incarnation of its node.
	for _, s := range servers {
		m, known := in.Members[s.NodeID]
		if !known || m.RaftID == s.RaftID || s.RaftID == in.Self {
			continue
		}
		if !in.Health[s.RaftID].Gone {
			if live := m.State == Alive || m.State == Suspect; live && m.Addr != s.Addr && in.Health[s.RaftID].Healthy {
				p.Notes = append(p.Notes, Note{Reason: "duplicate_id", Key: s.NodeID + "|" + m.RaftID, Member: m.NodeID, Notify: m.Addr,
					Msg:  "refusing member: another incarnation of it is configured and still answers at its own address",
					Args: []any{"member", s.NodeID, "raft_id", m.RaftID, "addr", m.Addr, "configured", s.RaftID, "configured_addr", s.Addr}})
			}
			continue
		}
		if ok, h := removable(s); !ok {
			p.Notes = append(p.Notes, Note{Reason: "replace_refused", Key: s.RaftID + "|" + m.RaftID,
				Msg:  "a member came back with a new incarnation (its data dir was lost); its old incarnation stays configured until removing it keeps a quorum",
				Args: []any{"member", s.NodeID, "old", s.RaftID, "new", m.RaftID, "voters", voters, "healthy_voters_after", h}})
			continue
		}
		p.Action = &Action{Kind: Replace, RaftID: s.RaftID, NodeID: s.NodeID, Addr: s.Addr,
			Why: fmt.Sprintf("came back as %s: its old incarnation is gone with its data", m.RaftID)}
		return p
	}

	// 3. Failed servers, after the reap timeout. A server that answers the
	// leader's probes is never reaped, whatever gossip says (its gossip may
	// be cut while Raft works).
	for _, s := range servers {
		if s.RaftID == in.Self || in.Health[s.RaftID].Healthy {
			continue
		}
		m, ok := current(s)
		var since time.Time
		switch {
		case ok && (m.State == Dead || m.State == Left):
			since = m.Since
		case !in.Health[s.RaftID].Down.IsZero():
			// Unreachable over Raft/RPC, whatever gossip says (a member with
			// the wrong TLS setup is alive in gossip and useless to Raft).
			since = in.Health[s.RaftID].Down
		case ok:
			continue
		case in.Gossip:
			if since = in.Missing[s.RaftID]; since.IsZero() {
				since = in.Now
			}
		default:
			continue
		}
		reapAt := since.Add(in.ReapTimeout)
		if in.Now.Before(reapAt) {
			due(reapAt)
			continue
		}
		if ok, h := removable(s); !ok {
			p.Notes = append(p.Notes, Note{Reason: "reap_refused", Key: s.RaftID + "|" + since.String(),
				Msg:  "not removing a failed voter: too few voters (or healthy voters) would remain for a quorum",
				Args: []any{"member", s.NodeID, "failed_since", since, "voters", voters, "healthy_voters_after", h}})
			continue
		}
		p.Action = &Action{Kind: Reap, RaftID: s.RaftID, NodeID: s.NodeID, Addr: s.Addr,
			Why: fmt.Sprintf("failed since %s (reap timeout %v)", since.Format(time.RFC3339Nano), in.ReapTimeout)}
		return p
	}

	// 4 and 5: members at a new address, and new members.
	ids := make([]string, 0, len(in.Members))
	byAddr := map[string][]string{}
	live := func(m Member) bool { return (m.State == Alive || m.State == Suspect) && !m.Leaving }
	for id, m := range in.Members {
		ids = append(ids, id)
		if live(m) {
			byAddr[m.Addr] = append(byAddr[m.Addr], id)
		}
	}
	slices.Sort(ids)
	nonvoters := len(servers) - voters
	selfNode := byRaft[in.Self].NodeID
	for _, id := range ids {
		m := in.Members[id]
		if id == selfNode || !live(m) {
			continue
		}
		s, configured := byRaft[m.RaftID]
		if configured && s.Addr == m.Addr {
			continue
		}
		if owner, ok := addrOwner[m.Addr]; ok && owner != m.RaftID {
			if old, ok := byNode[id]; ok && old.RaftID == owner {
				continue // its own older incarnation holds the address: step 2 removes it first
			}
			p.Notes = append(p.Notes, Note{Reason: "address", Key: id + "|" + m.Addr + "|" + owner, Member: m.NodeID, Notify: m.Addr,
				Msg:  "refusing member: its Raft address belongs to another server of the configuration",
				Args: []any{"member", id, "addr", m.Addr, "server", owner}})
			continue
		}
		if others := slices.DeleteFunc(slices.Clone(byAddr[m.Addr]), func(o string) bool { return o == id }); len(others) > 0 {
			p.Notes = append(p.Notes, Note{Reason: "address", Key: id + "|" + m.Addr + "|" + strings.Join(others, ","), Member: m.NodeID, Notify: m.Addr,
				Msg:  "refusing member: another live member advertises the same Raft address",
				Args: []any{"member", id, "addr", m.Addr, "others", others}})
			continue
		}
		if m.ClusterID != "" && in.ClusterID != "" && m.ClusterID != in.ClusterID {
			p.Notes = append(p.Notes, Note{Reason: "cluster_id", Key: id + "|" + m.ClusterID, Member: m.NodeID, Notify: m.Addr,
				Msg:  "refusing member: it belongs to another cluster",
				Args: []any{"member", id, "its_cluster_id", m.ClusterID, "cluster_id", in.ClusterID}})
			continue
		}
		if _, ok := byNode[id]; ok && !configured {
			continue // an older incarnation is still configured: step 2 first
		}
		if m.State != Alive {
			continue // suspect: wait
		}
		if !m.Verified {
			p.Notes = append(p.Notes, Note{Reason: "unverified", Key: id + "|" + m.Addr, Member: m.NodeID, Notify: m.Addr,
				Msg:  "not adding member yet: its identity at its Raft address is not proven (unreachable over Raft, or its certificate does not name it)",
				Args: []any{"member", id, "addr", m.Addr}})
			continue
		}
		if in.ClusterVersion > 0 && m.MaxVersion > 0 && m.MaxVersion < in.ClusterVersion {
			p.Notes = append(p.Notes, Note{Reason: "version", Key: id + "|" + m.RaftID, Member: m.NodeID, Notify: m.Addr,
				Msg:  "refusing member: its binary does not support the cluster version (it could not apply the log)",
				Args: []any{"member", id, "its_max_version", m.MaxVersion, "cluster_version", in.ClusterVersion}})
			continue
		}
		if configured {
			p.Action = &Action{Kind: UpdateAddr, RaftID: m.RaftID, NodeID: id, Addr: m.Addr, Voter: s.Voter,
				Why: "restarted at a new address (was " + s.Addr + ")"}
			return p
		}
		if nonvoters >= in.MaxNonvoters {
			p.Notes = append(p.Notes, Note{Reason: "full", Key: id, Member: m.NodeID, Notify: m.Addr,
				Msg:  "not adding member: the configuration already has the most non-voters allowed",
				Args: []any{"member", id, "nonvoters", nonvoters, "max_nonvoters", in.MaxNonvoters}})
			continue
		}
		if next := in.LastAdd.Add(in.AddInterval); !in.LastAdd.IsZero() && in.Now.Before(next) {
			due(next)
			continue
		}
		p.Action = &Action{Kind: AddNonvoter, RaftID: m.RaftID, NodeID: id, Addr: m.Addr,
			Why: fmt.Sprintf("new member (%d voters, %d non-voters)", voters, nonvoters)}
		return p
	}

	// 6. Promotions of stable non-voters.
	var stable []Server
	healthyNonvoters := 0
	for _, s := range servers {
		if s.Voter {
			continue
		}
		h := in.Health[s.RaftID]
		if !h.Healthy || !healthy(s) {
			continue
		}
		healthyNonvoters++
		if ready := h.Since.Add(in.Stabilization); in.Now.Before(ready) {
			due(ready)
			continue
		}
		stable = append(stable, s)
	}
	target := TargetVoters(voters+len(stable), in.MaxVoters)
	if voters < target && len(stable) > 0 {
		s := stable[0]
		p.Action = &Action{Kind: Promote, RaftID: s.RaftID, NodeID: s.NodeID, Addr: s.Addr,
			Why: fmt.Sprintf("healthy for %v; %d of %d voters", in.Stabilization, voters, target)}
		return p
	}

	// 7. Demotions down to the target — counting the non-voters that are
	// healthy but not yet stable, so that a voter is not demoted only to be
	// promoted again a stabilization time later.
	if voters > TargetVoters(voters+healthyNonvoters, in.MaxVoters) {
		var pick *Server
		for i := range servers {
			s := &servers[i]
			if !s.Voter || s.RaftID == in.Self {
				continue
			}
			// Prefer an unhealthy voter, then the highest id.
			if pick == nil || (!healthy(*s) && healthy(*pick)) || healthy(*s) == healthy(*pick) {
				pick = s
			}
		}
		if pick != nil {
			if ok, _ := removable(*pick); !ok {
				return p // a demotion takes a vote away: the same guard as a removal
			}
			p.Action = &Action{Kind: Demote, RaftID: pick.RaftID, NodeID: pick.NodeID, Addr: pick.Addr,
				Why: fmt.Sprintf("%d voters, target %d", voters, target)}
			return p
		}
	}
	return p
}
