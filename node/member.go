package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/raftlock/raftlock/internal/gossip"
)

// ErrDuplicateID: another live member of the gossip cluster already uses this
// node's ID. A node without Raft state that finds one refuses to take part:
// Start fails with it (or, when the duplicate is found later, gossip stops
// and Status.GossipErr says why).
var ErrDuplicateID = gossip.ErrDuplicateID

// MemberState is the state of a member as this node's gossip layer sees it.
type MemberState string

// Member states.
const (
	// MemberAlive: the member answers.
	MemberAlive MemberState = "alive"
	// MemberSuspect: gossip still counts the member alive, but this node has
	// had no direct probe answer from it for several probe cycles. (This is
	// this node's own view: memberlist does not expose its suspicion.)
	MemberSuspect MemberState = "suspect"
	// MemberDead: the member failed (it stopped answering without leaving).
	MemberDead MemberState = "dead"
	// MemberLeft: the member left, or announced that it is leaving,
	// gracefully (Close).
	MemberLeft MemberState = "left"
	// MemberUnknown: in the Raft configuration, never seen by gossip here.
	MemberUnknown MemberState = "unknown"
)

// Member is one member of the cluster: a gossip member, a server of the Raft
// configuration, or both.
type Member struct {
	ID         string
	Addr       string // Raft/RPC address
	GossipAddr string // empty for MemberUnknown
	State      MemberState
	Since      time.Time // when this node saw State begin; zero for MemberUnknown
	Role       Role      // empty when not in the Raft configuration
	Leader     bool
}

// startMembership starts the gossip layer (package gossip) with what it
// needs of this node. Raft is running.
func (n *Node) startMembership(ctx context.Context) error {
	cfg := &n.cfg
	id := n.ident()
	g, err := gossip.Start(ctx, gossip.Config{
		ID: cfg.ID, RaftAddr: n.trans.Addr(), BootstrapExpect: cfg.BootstrapExpect, Wire: int(wireVersion),
		Incarnation: id.Incarnation, RaftID: id.RaftID,
		Addr: cfg.Gossip.Addr, AdvertiseAddr: cfg.Gossip.AdvertiseAddr, Join: cfg.Gossip.Join, Key: cfg.Gossip.Key,
		Timing: gossip.Timing(cfg.gossipTiming()), Listener: cfg.hooks.GossipListener, Dialer: cfg.hooks.GossipDialer,
		ReapTimeout:  cfg.reapTimeout(),
		LeaveTimeout: 20*cfg.Timing.HeartbeatTimeout + 10*cfg.gossipTiming().GossipInterval,
		Stable:       n.store.Stable, Logger: n.log,
	}, gossip.Host{
		HasRaftState: n.hasRaftState,
		ClusterID:    func() string { return n.ident().ClusterID },
		LatestConfig: n.latestConfig,
		Refused:      n.refusals.add,
		Changed:      n.memberHosts.Wake,
		Joined: func(ok bool) {
			result := "ok"
			if !ok {
				result = "error"
			}
			n.metrics.gossipJoins.WithLabelValues(result).Inc()
		},
		Conflict: func(reason string) { n.metrics.memberConflicts.WithLabelValues(reason).Inc() },
	})
	if errors.As(err, new(*gossip.MetaSizeError)) {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if err != nil {
		return err
	}
	n.members = g
	return nil
}

// gossipStatus fills the membership part of a Status: every server of the
// Raft configuration (st.Servers) and every gossip member.
func (n *Node) gossipStatus(st *Status) {
	view := n.members.View(time.Now())
	byID := map[string]int{}
	for _, s := range st.Servers {
		mb := Member{ID: s.ID, Addr: s.Addr, State: MemberUnknown, Role: s.Role, Leader: s.Leader}
		if v, ok := view[s.ID]; ok {
			mb.GossipAddr, mb.State, mb.Since = v.Gossip, MemberState(v.State), v.Since
		}
		byID[s.ID] = len(st.Members)
		st.Members = append(st.Members, mb)
	}
	for id, v := range view {
		if _, ok := byID[id]; !ok {
			st.Members = append(st.Members, Member{ID: id, Addr: v.Addr, GossipAddr: v.Gossip, State: MemberState(v.State), Since: v.Since})
		}
	}
	slices.SortFunc(st.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	st.GossipAddr = n.members.Addr()
	st.GossipErr = n.members.Problem(view)
}

// memberAddrs lists the addresses of the members this node knows of, and
// which of them come from its own configuration or the Raft log (their
// host names may be looked up; names that gossip metadata claims are not).
func (n *Node) memberAddrs() ([]string, map[string]bool) {
	var addrs []string
	trusted := map[string]bool{}
	for _, p := range n.cfg.Peers {
		addrs = append(addrs, p.Addr)
		trusted[p.Addr] = true
	}
	if conf, ok := n.latestConfig(); ok {
		for _, s := range conf.Servers {
			addrs = append(addrs, string(s.Address))
			trusted[string(s.Address)] = true
		}
	}
	if n.members != nil {
		addrs = append(addrs, n.members.MemberAddrs()...)
	}
	return addrs, trusted
}

// resolvesNames reports whether member host names are looked up: only
// over TCP (other networks, such as the in-memory test network, name
// their hosts themselves).
func (n *Node) resolvesNames() bool {
	if n.cfg.Listener == nil {
		return true
	}
	_, ok := n.cfg.Listener.Addr().(*net.TCPAddr)
	return ok
}
