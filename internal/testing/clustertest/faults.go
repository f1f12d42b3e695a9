package clustertest

import (
	"fmt"

	"github.com/raftlock/raftlock/internal/testing/memnet"
)

// Isolate cuts node i off from every other node (both directions), gossip
// included.
func (c *Cluster) Isolate(i int) {
	c.net().Isolate(c.RaftHost(i))
	if c.opts.Gossip {
		c.net().Isolate(c.GossipHost(i))
	}
}

// IsolateGossip cuts node i's gossip off from every other node; its Raft
// traffic still flows.
func (c *Cluster) IsolateGossip(i int) { c.net().Isolate(c.GossipHost(i)) }

// IsolateRaft cuts node i's Raft/RPC traffic off from every other node; its
// gossip still flows (a member that gossip sees alive but Raft cannot reach:
// a TLS mismatch, a firewalled port).
func (c *Cluster) IsolateRaft(i int) { c.net().Isolate(c.RaftHost(i)) }

// Hosts returns the memnet hosts of node i (Raft, and gossip if on).
func (c *Cluster) Hosts(i int) []string {
	if c.opts.Gossip {
		return []string{c.RaftHost(i), c.GossipHost(i)}
	}
	return []string{c.RaftHost(i)}
}

// Partition splits the nodes into groups of indexes that cannot reach each other.
func (c *Cluster) Partition(groups ...[]int) {
	var g [][]string
	for _, grp := range groups {
		var ids []string
		for _, i := range grp {
			ids = append(ids, c.Hosts(i)...)
		}
		g = append(g, ids)
	}
	c.net().Partition(g...)
}

// Heal removes every network fault (of the whole network: other clusters
// sharing it included).
func (c *Cluster) Heal() { c.net().Heal() }

func (c *Cluster) net() *memnet.Network {
	if c.opts.Net == nil {
		c.t.Fatal("fault injection needs Options.Net")
	}
	return c.opts.Net
}

// Describe summarises every node's state (for failure messages).
func (c *Cluster) Describe() string { return c.describe() }

func (c *Cluster) describe() string {
	s := ""
	for i, n := range c.Nodes {
		if n == nil {
			s += fmt.Sprintf("%s=down ", c.ID(i))
			continue
		}
		st := n.Status()
		s += fmt.Sprintf("%s=%s(leader %q, term %d, applied %d", c.ID(i), st.State, st.LeaderID, st.Term, st.AppliedIndex)
		if c.opts.Gossip {
			var ms []string
			for _, m := range st.Members {
				ms = append(ms, fmt.Sprintf("%s:%s/%s", m.ID, m.State, m.Role))
			}
			s += fmt.Sprintf(", members %v", ms)
			if st.GossipErr != "" {
				s += ", gossip error " + st.GossipErr
			}
		}
		s += ") "
	}
	return s
}
