package node

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/membership"
)

// Probes. The leader asks every server, and every member it might add, how
// it is (opStatus) over the Raft/RPC port — the port Raft itself uses, with
// the same TLS. The answers are the planner's health (a non-voter is
// promoted only after answering as caught up and in contact with the
// leader for a stabilization time; a server that cannot be reached is never
// promoted, and is reaped once down for the reap timeout) and its proof of
// identity (a member is added or moved only after its Raft address answered
// with its node id, Raft id and incarnation).

// statusMsg is the leader's probe (opStatus). It carries the cluster id: a
// node without one adopts it — a node without Raft state from the first
// leader that probes it (it is then that cluster's candidate, and any other
// cluster's leader sees the id in its answer and refuses it: a node belongs
// to one cluster only), a node with Raft state from its own Raft leader only.
// (The replicated state carries the id too.)
type statusMsg struct {
	LeaderRaftID string `json:"leader"`
	ClusterID    string `json:"cluster_id,omitempty"`
}

// statusReply answers opStatus: who the node is, and the highest cluster
// version its binary supports (a member below the cluster version is never
// added: it could not apply the log).
type statusReply struct {
	NodeID      string `json:"node_id"`
	RaftID      string `json:"raft_id"`
	Incarnation string `json:"inc"`
	ClusterID   string `json:"cluster_id,omitempty"`
	MaxVersion  uint64 `json:"max_version"`
	HasState    bool   `json:"has_state"`
}

func (n *Node) statusReply(m statusMsg) statusReply {
	if m.ClusterID != "" && membership.IsHexID(m.ClusterID) && n.ident().ClusterID == "" && n.started.Load() {
		_, lid := n.raft.LeaderWithID()
		if !n.hasRaftState() || (lid != "" && string(lid) == m.LeaderRaftID && lid != raft.ServerID(n.id.raftID)) {
			if err := n.id.setCluster(m.ClusterID); err == nil {
				n.log.Info("this node belongs to cluster "+m.ClusterID+" now", "by", m.LeaderRaftID)
			}
		}
	}
	id := n.ident()
	r := statusReply{NodeID: id.NodeID, RaftID: id.RaftID, Incarnation: id.Incarnation, ClusterID: id.ClusterID, MaxVersion: n.maxVersion()}
	if n.started.Load() {
		r.HasState = n.hasRaftState()
	}
	return r
}

// probeTarget is one address the leader asks.
type probeTarget struct {
	raftID, nodeID, addr string
	server               bool // a configured server (else a candidate to verify)
}

// probe asks every server and candidate at once and records the answers.
func (r *reconciler) probe(ctx context.Context, conf raft.Configuration, members map[string]membership.Member) {
	self := r.n.ident()
	var targets []probeTarget
	configured := map[string]bool{}
	for _, s := range conf.Servers {
		configured[string(s.ID)+"@"+string(s.Address)] = true
		if string(s.ID) != self.RaftID {
			targets = append(targets, probeTarget{raftID: string(s.ID), nodeID: membership.NodeOf(s.ID), addr: string(s.Address), server: true})
		}
	}
	for id, m := range members {
		live := m.State == membership.Alive || m.State == membership.Suspect
		if id != self.NodeID && live && !configured[m.RaftID+"@"+m.Addr] {
			targets = append(targets, probeTarget{raftID: m.RaftID, nodeID: id, addr: m.Addr})
		}
	}
	term, last := r.n.raft.CurrentTerm(), r.n.raft.LastIndex()
	contact := r.contactThreshold()
	ctx, cancel := context.WithTimeout(ctx, min(r.n.cfg.AttemptTimeout, r.interval()))
	defer cancel()
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if t.server {
				info, err := r.n.peerInfo(ctx, t.addr)
				r.recordHealth(t, info, err, term, last, contact)
				return
			}
			var rep statusReply
			err := r.n.callMembership(ctx, t.addr, opStatus, statusMsg{LeaderRaftID: self.RaftID, ClusterID: self.ClusterID}, &rep)
			proven := err == nil && r.proves(rep, t, self.ClusterID)
			if proven && r.n.cfg.TLS != nil {
				proven = r.provesCertificate(ctx, t)
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			key := t.raftID + "@" + t.addr
			if proven {
				r.verified[key] = verification{at: time.Now(), maxVersion: rep.MaxVersion}
			} else {
				delete(r.verified, key)
			}
		}()
	}
	wg.Wait()
}

// verification is a proven identity (a candidate's address answered as the
// member it claims to be).
type verification struct {
	at         time.Time
	maxVersion uint64
}

// recordHealth turns a server's peer-info answer into its health.
func (r *reconciler) recordHealth(t probeTarget, info peerInfo, err error, term, last uint64, contact time.Duration) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	h := r.health[t.raftID]
	switch {
	case err == nil && info.Legacy:
		// A server of the previous release cannot tell; it answers, and
		// Raft keeps it in the configuration: count it healthy.
		if !h.Healthy {
			h.Since = now
		}
		h.Reachable, h.Healthy, h.Down, h.Gone = true, true, time.Time{}, false
	case err != nil || info.NodeID != t.nodeID:
		h.Reachable, h.Healthy, h.Since, h.Gone = false, false, time.Time{}, false
		if h.Down.IsZero() {
			h.Down = now
		}
	case info.RaftID != t.raftID:
		// Another incarnation of the node answers at the server's address:
		// this one lost its data dir and is gone.
		h.Reachable, h.Healthy, h.Since, h.Gone = true, false, time.Time{}, true
	default:
		healthy := info.Halted == "" && info.Term == term && info.LastIndex+maxCatchUpLag >= last &&
			info.State == "follower" && info.LastContact > 0 && info.LastContact <= contact
		if healthy && !h.Healthy {
			h.Since = now
		}
		if !healthy {
			h.Since = time.Time{}
		}
		h.Reachable, h.Healthy, h.Down, h.Gone = true, healthy, time.Time{}, false
	}
	r.health[t.raftID] = h
}

// proves reports whether a candidate's answer proves the identity its
// gossip metadata or join request claimed.
func (r *reconciler) proves(rep statusReply, t probeTarget, clusterID string) bool {
	if rep.NodeID != t.nodeID || rep.RaftID != t.raftID {
		return false
	}
	if _, inc := membership.SplitRaftID(rep.RaftID); inc != "" && inc != rep.Incarnation {
		return false
	}
	return rep.ClusterID == "" || clusterID == "" || rep.ClusterID == clusterID
}

// provesCertificate: with TLS, a candidate is proven only if a fresh
// connection to its address presents a certificate (verified against the
// CA) that names its node id — a member of the CA's fleet cannot claim
// another member's id, or a crashed voter's name.
func (r *reconciler) provesCertificate(ctx context.Context, t probeTarget) bool {
	p, err := r.n.trans.Probe(ctx, t.addr)
	if err != nil || len(p.Certificates) == 0 {
		r.n.log.Debug("identity probe failed", "member", t.nodeID, "addr", t.addr, "err", err)
		return false
	}
	if _, inc := membership.SplitRaftID(t.raftID); p.Identity.NodeID != t.nodeID || (inc != "" && p.Identity.Incarnation != inc) {
		return false
	}
	if !certNames(p.Certificates[0], t.nodeID) {
		r.n.refusals.add("identity", fmt.Sprintf("member %s at %s presents a certificate for %q", t.nodeID, t.addr, p.Certificates[0].Subject.CommonName), t.nodeID)
		return false
	}
	return true
}

// contactThreshold: a follower that has not heard from the leader for longer
// is not healthy.
func (r *reconciler) contactThreshold() time.Duration {
	return 4 * r.n.cfg.Timing.HeartbeatTimeout
}
