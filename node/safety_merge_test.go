package node_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// twoClusters starts cluster A = {n1,n2,n3} and, cut off from it while it
// forms, cluster B = {n4,n5,n6} on the same network; then the cut heals
// (their gossip has not met: each knows only its own seeds).
func twoClusters(t *testing.T) (*clustertest.Cluster, *memnet.Network) {
	net := memnet.New()
	hosts := func(ids ...int) []string {
		var out []string
		for _, i := range ids {
			out = append(out, clustertest.ID(i), clustertest.GossipHost(i))
		}
		return out
	}
	net.Partition(hosts(0, 1, 2), hosts(3, 4, 5))
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: net, Gossip: true})
	c.WaitLeader(20 * time.Second)
	for i := 3; i < 6; i++ {
		c.Add(func(cfg *node.Config) {
			cfg.BootstrapExpect = 3
			cfg.Gossip.Join = []string{clustertest.GossipAddr(3 + (i-3+1)%3)}
		})
	}
	c.Eventually(30*time.Second, func() (bool, string) {
		for _, i := range []int{0, 3} {
			if st := c.Nodes[i].Status(); len(st.Servers) != 3 || st.LeaderID == "" {
				return false, c.Nodes[i].ID() + " has " + servers5(c.Nodes[i])
			}
		}
		return true, ""
	})
	net.Heal()
	return c, net
}

// mixed reports whether a node's configuration holds servers of both
// clusters.
func mixed(n *node.Node) bool {
	a, b := false, false
	for _, s := range n.Status().Servers {
		switch s.ID {
		case "n1", "n2", "n3":
			a = true
		case "n4", "n5", "n6":
			b = true
		}
	}
	return a && b
}

// Issue 13 #2. Two separate clusters whose gossip meets — here a new node
// joins through a seed of each, bridging the two gossip pools. Before the
// fix each leader added the other cluster's members to its own Raft
// configuration: one configuration with two divergent state machines.
// Required: the clusters stay apart (each keeps its configuration and keeps
// granting); the bridging node ends up in at most one of them.
func TestSafetyClustersDoNotMerge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := twoClusters(t)
		bridge := c.Add(func(cfg *node.Config) {
			cfg.BootstrapExpect = 0
			cfg.Gossip.Join = []string{clustertest.GossipAddr(0), clustertest.GossipAddr(3)}
		})
		deadline := time.Now().Add(40 * time.Second)
		for time.Now().Before(deadline) {
			for _, n := range c.Nodes {
				if mixed(n) {
					t.Fatalf("%s merged the clusters: %s", n.ID(), servers5(n))
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
		in := 0
		for _, i := range []int{0, 3} {
			for _, s := range c.Nodes[i].Status().Servers {
				if s.ID == clustertest.ID(bridge) {
					in++
				}
			}
			if tok := tryGrant(c.Nodes[i], "still-"+clustertest.ID(i), 10*time.Second); tok == 0 {
				t.Fatalf("cluster of %s stopped granting", c.Nodes[i].ID())
			}
		}
		if in > 1 {
			t.Fatalf("the bridging node is a server of both clusters")
		}
	})
}
