package node_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// Each node tells its transport which source addresses are members': the
// hosts of the Raft configuration and of the gossip members, and a member
// that joins is recognised within seconds; other addresses are strangers'.
func TestSynctestMemberHostsFollowMembership(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := gossipCluster(t, 3, nil)
		members := func(n int) func() (bool, string) {
			return func() (bool, string) {
				for _, nd := range c.Nodes {
					for i := range n {
						for _, host := range []string{c.ID(i), gossipIP(i)} {
							if !node.IsMemberHost(nd, host) {
								return false, fmt.Sprintf("%s does not take %s for a member's address", nd.ID(), host)
							}
						}
					}
				}
				return true, ""
			}
		}
		c.Eventually(5*time.Second, members(3))
		for _, nd := range c.Nodes {
			for _, host := range []string{"stranger", "10.0.0.99", ""} {
				if node.IsMemberHost(nd, host) {
					t.Fatalf("%s takes %q for a member's address", nd.ID(), host)
				}
			}
		}
		c.Add(nil)
		c.Eventually(5*time.Second, members(4))
	})
}

// gossipIP is the IP of node i's gossip address in a memnet cluster.
func gossipIP(i int) string {
	a := clustertest.GossipAddr(i)
	return a[:len(a)-len(":7946")]
}
