package node

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/membership"
)

// Joining a static cluster. Without gossip, a node that has no Raft state
// and is not founding — Bootstrap is off, or formation found that the
// cluster already exists — asks its Peers to be added (opJoin) until it is in
// the configuration. A follower answers with the leader's address; the
// leader records the request, and its reconciler adds the node as a
// non-voter (after checking its identity) and promotes it once it has
// caught up, as with gossip.

// joinMsg asks the leader to add the sender.
type joinMsg struct {
	NodeID      string `json:"node_id"`
	RaftID      string `json:"raft_id"`
	Addr        string `json:"addr"`
	Incarnation string `json:"inc"`
	ClusterID   string `json:"cluster_id,omitempty"`
}

// joinReply answers a joinMsg.
type joinReply struct {
	OK     bool   `json:"ok"`               // the leader recorded the request
	Leader string `json:"leader,omitempty"` // not the leader: ask this address
	Reason string `json:"reason,omitempty"` // refused: why
	// Removed (opLeave only): the leader's committed configuration no
	// longer lists the asker — its removal is done, even if the entry that
	// made it never reached the asker. Leaders of earlier releases never
	// set it.
	Removed bool `json:"removed,omitempty"`
}

// joinRequest is a recorded join, as the reconciler sees it.
type joinRequest struct {
	msg  joinMsg
	seen time.Time // last request
}

// joinTable holds the join requests the leader has received. Safe for
// concurrent use.
type joinTable struct {
	mu   sync.Mutex
	reqs map[string]joinRequest // by node id
}

// maxJoinRequests bounds the table (the oldest is dropped).
const maxJoinRequests = 64

func (t *joinTable) add(m joinMsg, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.reqs == nil {
		t.reqs = map[string]joinRequest{}
	}
	if _, ok := t.reqs[m.NodeID]; !ok && len(t.reqs) >= maxJoinRequests {
		var oldest string
		for id, r := range t.reqs {
			if oldest == "" || r.seen.Before(t.reqs[oldest].seen) {
				oldest = id
			}
		}
		delete(t.reqs, oldest)
	}
	t.reqs[m.NodeID] = joinRequest{msg: m, seen: now}
}

// recent returns the requests seen within maxAge.
func (t *joinTable) recent(now time.Time, maxAge time.Duration) []joinRequest {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []joinRequest
	for id, r := range t.reqs {
		if now.Sub(r.seen) > maxAge {
			delete(t.reqs, id)
			continue
		}
		out = append(out, r)
	}
	return out
}

// handleJoin serves opJoin.
func (n *Node) handleJoin(m joinMsg) joinReply {
	if err := membership.ValidID(m.NodeID); err != nil {
		return joinReply{Reason: err.Error()}
	}
	if id, inc := membership.SplitRaftID(m.RaftID); id != m.NodeID || (inc != "" && inc != m.Incarnation) {
		return joinReply{Reason: "raft id does not match node id and incarnation"}
	}
	if cid := n.ident().ClusterID; m.ClusterID != "" && cid != "" && m.ClusterID != cid {
		return joinReply{Reason: "cluster id " + m.ClusterID + " is not this cluster's (" + cid + ")"}
	}
	if n.raft.State() != raft.Leader {
		addr, _ := n.raft.LeaderWithID()
		return joinReply{Leader: string(addr), Reason: "not the leader"}
	}
	n.joins.add(m, time.Now())
	n.wakeReconciler()
	return joinReply{OK: true}
}

// joinLoop asks the peers to add this node whenever it is not in its
// configuration (a new node, or one the leader removed while it was away),
// until the node closes.
func (n *Node) joinLoop(ctx context.Context) {
	interval := 4 * n.cfg.Timing.HeartbeatTimeout
	logged, member := false, false
	for {
		if n.inConfiguration() {
			if !member {
				n.log.Info("member of the cluster")
				member, logged = true, false
				n.joinErr.Store(nil)
			}
			if sleepCtx(ctx, 4*interval) != nil {
				return
			}
			continue
		}
		member = false
		id := n.ident()
		m := joinMsg{NodeID: id.NodeID, RaftID: id.RaftID, Addr: n.trans.Addr(), Incarnation: id.Incarnation, ClusterID: id.ClusterID}
		asked := false
		var failed []string // peers whose join call failed, and why
		for _, p := range n.cfg.Peers {
			if p.ID == n.cfg.ID {
				continue
			}
			addr := p.Addr
			for hop := 0; hop < 2 && addr != ""; hop++ {
				var r joinReply
				cctx, cancel := context.WithTimeout(ctx, n.cfg.AttemptTimeout)
				err := n.callMembership(cctx, addr, opJoin, m, &r)
				cancel()
				switch {
				case err != nil:
					failed = append(failed, fmt.Sprintf("%s at %s: %v", p.ID, addr, err))
					addr = ""
				case r.OK:
					asked = true
					addr = ""
				case r.Leader != "" && r.Leader != addr:
					addr = r.Leader
				default:
					if r.Reason != "not the leader" {
						n.refusals.add("join", r.Reason, p.ID)
					}
					addr = ""
				}
			}
			if asked {
				break
			}
		}
		n.noteJoin(asked, failed)
		if !logged {
			n.log.Info("asking the cluster to add this node", "peers", len(n.cfg.Peers), "raft_id", id.RaftID, "asked_leader", asked)
			logged = true
		}
		if sleepCtx(ctx, jitterDur(interval)) != nil {
			return
		}
	}
}

// noteJoin records why a round of join requests failed for Status.JoinErr:
// "no peer answered the join: tried …" (each peer, its address and the
// error) when every peer's call failed; nothing when a peer took the
// request or answered (a refusal is in Status.Refusals).
func (n *Node) noteJoin(asked bool, failed []string) {
	others := 0
	for _, p := range n.cfg.Peers {
		if p.ID != n.cfg.ID {
			others++
		}
	}
	if asked || len(failed) == 0 || len(failed) < others {
		n.joinErr.Store(nil)
		return
	}
	why := "no peer answered the join: tried " + strings.Join(failed, "; ")
	if old := n.joinErr.Load(); old == nil || *old != why {
		n.log.Warn("no peer answered the join request", "tried", strings.Join(failed, "; "))
	}
	n.joinErr.Store(&why)
}
