package node_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/cluster"
	"github.com/raftlock/raftlock/internal/memnet"
	"github.com/raftlock/raftlock/node"
)

// gossipCluster starts n gossip nodes on a memnet network (inside the
// caller's synctest bubble) and waits for one leader.
func gossipCluster(t *testing.T, n int, configure func(i int, c *node.Config)) *cluster.Cluster {
	t.Helper()
	c := cluster.Start(t, cluster.Options{Nodes: n, Net: memnet.New(), Gossip: true, Configure: configure})
	c.WaitLeader(20 * time.Second)
	c.WaitReady(20 * time.Second)
	return c
}

// servers returns the Raft configuration as node i sees it: id → role.
func servers(n *node.Node) map[string]node.Role {
	out := map[string]node.Role{}
	for _, s := range n.Status().Servers {
		out[s.ID] = s.Role
	}
	return out
}

// waitServers waits until every running node's configuration is want.
func waitServers(t *testing.T, c *cluster.Cluster, timeout time.Duration, want map[string]node.Role) {
	t.Helper()
	c.Eventually(timeout, func() (bool, string) {
		for _, n := range c.Nodes {
			if n == nil {
				continue
			}
			got := servers(n)
			if !sameRoles(got, want) {
				return false, n.ID() + " has configuration " + fmtRoles(got) + ", want " + fmtRoles(want)
			}
		}
		return true, ""
	})
}

func sameRoles(a, b map[string]node.Role) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func fmtRoles(m map[string]node.Role) string {
	s := "{"
	for _, id := range sortedKeys(m) {
		s += id + ":" + string(m[id]) + " "
	}
	return s + "}"
}

func sortedKeys[V any](m map[string]V) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	for i := range ks {
		for j := i + 1; j < len(ks); j++ {
			if ks[j] < ks[i] {
				ks[i], ks[j] = ks[j], ks[i]
			}
		}
	}
	return ks
}

func voters(ids ...string) map[string]node.Role {
	m := map[string]node.Role{}
	for _, id := range ids {
		m[id] = node.RoleVoter
	}
	return m
}

func memberState(n *node.Node, id string) node.MemberState {
	for _, m := range n.Status().Members {
		if m.ID == id {
			return m.State
		}
	}
	return ""
}

// lockVia opens a session and takes a lock through n.
func lockVia(t *testing.T, ctx context.Context, n *node.Node, name string) fsm.Token {
	t.Helper()
	s := openSession(t, ctx, n, time.Minute)
	r, err := n.Apply(ctx, fsm.Acquire{Session: s, Lock: name, Owner: newOwner()})
	if err != nil || r.Status != fsm.StatusGranted {
		t.Fatalf("lock %s via %s: %v %+v", name, n.ID(), err, r)
	}
	if h, ok := n.Holder(name); !ok || h.Token != r.Token {
		t.Fatalf("%s does not show its grant of %s", n.ID(), name)
	}
	return r.Token
}

// Three nodes with BootstrapExpect 3 and one seed each form one cluster
// with one leader and the same three voters everywhere.
func TestGossipBootstrapExpect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := gossipCluster(t, 3, nil)
		waitServers(t, c, 10*time.Second, voters("n1", "n2", "n3"))
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for i, n := range c.Nodes {
			lockVia(t, ctx, n, "l"+cluster.ID(i))
		}
		c.Eventually(10*time.Second, func() (bool, string) {
			for _, n := range c.Nodes {
				st := n.Status()
				if len(st.Members) != 3 {
					return false, n.ID() + " sees members " + fmtMembers(st.Members)
				}
				for _, m := range st.Members {
					if m.State != node.MemberAlive || m.Role != node.RoleVoter || m.Leader != (m.ID == st.LeaderID) || m.GossipAddr == "" {
						return false, n.ID() + " sees members " + fmtMembers(st.Members)
					}
				}
			}
			return true, ""
		})
	})
}

func fmtMembers(ms []node.Member) string {
	s := "["
	for _, m := range ms {
		s += m.ID + ":" + string(m.State) + "/" + string(m.Role)
		if m.Leader {
			s += "*"
		}
		s += " "
	}
	return s + "]"
}
