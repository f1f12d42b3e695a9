package node

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/membership"
)

// Reads for an operator's view (a status page): how every server of the
// configuration stands, and how long the leader lets sessions live.

// PeerStatus is what one server of the Raft configuration says of itself
// through the peer-info RPC (this node answers for itself locally).
type PeerStatus struct {
	ID, RaftID, Addr string
	Role             Role
	Leader           bool
	Reachable        bool   // it answered
	Err              string // why it did not
	State            string // its Raft state
	Term             uint64
	CommitIndex      uint64
	AppliedIndex     uint64
	LastContact      time.Duration // since it heard from the leader (followers)
	ClusterVersion   uint64
	MaxVersion       uint64
	Halted           string
	// Lag: entries its state machine is behind the highest commit index
	// any server reported (0 when it is up to date).
	Lag uint64
}

// Peers asks every server of the latest configuration about itself, at
// once, each ask bounded by ctx and AttemptTimeout. Servers that do not
// answer are listed with Reachable false. Safe for concurrent use.
func (n *Node) Peers(ctx context.Context) []PeerStatus {
	conf, ok := n.latestConfig()
	if !ok {
		return nil
	}
	_, lid := n.raft.LeaderWithID()
	out := make([]PeerStatus, len(conf.Servers))
	var wg sync.WaitGroup
	for i, s := range conf.Servers {
		ps := &out[i]
		ps.ID, ps.RaftID, ps.Addr, ps.Leader = membership.NodeOf(s.ID), string(s.ID), string(s.Address), s.ID == lid
		ps.Role = RoleVoter
		if s.Suffrage != raft.Voter {
			ps.Role = RoleNonvoter
		}
		if string(s.ID) == n.id.raftID {
			ps.fill(n.localPeerInfo())
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, n.cfg.AttemptTimeout)
			defer cancel()
			p, err := n.peerInfo(cctx, ps.Addr)
			if err != nil {
				ps.Err = err.Error()
				return
			}
			ps.fill(p)
		}()
	}
	wg.Wait()
	var commit uint64
	for _, p := range out {
		commit = max(commit, p.CommitIndex)
	}
	for i := range out {
		if out[i].Reachable && out[i].AppliedIndex < commit {
			out[i].Lag = commit - out[i].AppliedIndex
		}
	}
	return out
}

func (ps *PeerStatus) fill(p peerInfo) {
	ps.Reachable = !p.Legacy
	if p.Legacy {
		ps.Err = "a server of the previous release (no peer info)"
		return
	}
	ps.State, ps.Term, ps.CommitIndex, ps.AppliedIndex = p.State, p.Term, p.CommitIndex, p.AppliedIndex
	ps.LastContact, ps.ClusterVersion, ps.MaxVersion, ps.Halted = p.LastContact, p.ClusterVersion, p.MaxVersion, p.Halted
}

// maxLeaseQuery bounds the sessions of one leasesLeft call.
const maxLeaseQuery = 1024

// leasesLeft returns, for each of the sessions given (at most 1024) that
// the leader times, how long it still lets the session live without a
// keepalive: the leader expires it no earlier than that. From a follower
// the question goes to the leader. Sessions the leader does not time (not
// there, or being expired) are absent. Errors: ErrInvalidArgument (too
// many), ErrNoQuorum (no leader answered before ctx ended).
func (n *Node) leasesLeft(ctx context.Context, ids []lockinfo.SessionID) (map[lockinfo.SessionID]time.Duration, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, err
	}
	if len(ids) > maxLeaseQuery {
		return nil, fmt.Errorf("%w: %d sessions (at most %d)", ErrInvalidArgument, len(ids), maxLeaseQuery)
	}
	var out map[lockinfo.SessionID]time.Duration
	err := n.retry(ctx, false, func(ctx context.Context) error {
		if n.raft.State() == raft.Leader {
			var err error
			out, err = n.expiry.leasesLeft(ids)
			return err
		}
		body, _ := json.Marshal(leasesMsg{Sessions: ids})
		r, err := n.callAdmin(ctx, adminLeases, body)
		if err != nil {
			return err
		}
		out = make(map[lockinfo.SessionID]time.Duration, len(r.Left))
		for k, ms := range r.Left {
			id, err := strconv.ParseUint(k, 10, 63)
			if err != nil {
				return fmt.Errorf("%w: %w: session id %q", errForward, errWire, k)
			}
			out[lockinfo.SessionID(id)] = time.Duration(ms) * time.Millisecond
		}
		return nil
	})
	return out, err
}

type leasesMsg struct {
	Sessions []lockinfo.SessionID `json:"sessions"`
}

// leasesLeft reads the leader's deadlines.
func (m *expiryManager) leasesLeft(ids []lockinfo.SessionID) (map[lockinfo.SessionID]time.Duration, error) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.leading {
		return nil, errNotLeader
	}
	out := make(map[lockinfo.SessionID]time.Duration, len(ids))
	for _, id := range ids {
		if l := m.sessions[id]; l != nil && !l.expiring {
			out[id] = max(l.deadline.Sub(now), 0)
		}
	}
	return out, nil
}

// leasesReply answers adminLeases on the leader.
func (n *Node) leasesReply(body []byte) (adminReply, error) {
	var m leasesMsg
	if err := decodeJSON(body, &m); err != nil {
		return adminReply{}, err
	}
	if len(m.Sessions) > maxLeaseQuery {
		return adminReplyOf(fmt.Errorf("%w: %d sessions", ErrInvalidArgument, len(m.Sessions))), nil
	}
	left, err := n.expiry.leasesLeft(m.Sessions)
	r := adminReplyOf(err)
	if err == nil {
		r.Left = make(map[string]int64, len(left))
		for id, d := range left {
			r.Left[strconv.FormatUint(uint64(id), 10)] = d.Milliseconds()
		}
	}
	return r, nil
}
