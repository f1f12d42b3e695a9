package node_test

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/node"
)

// Issue 13 #2, "also": the refusal is visible on both sides — the metric
// and Status().Refusals say "cluster_id".
func TestForeignClusterRefusalVisible(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := twoClusters(t)
		c.Add(func(cfg *node.Config) {
			cfg.BootstrapExpect = 0
			cfg.Gossip.Join = []string{clustertest.GossipAddr(0), clustertest.GossipAddr(3)}
		})
		c.Eventually(30*time.Second, func() (bool, string) {
			for _, i := range []int{0, 3} {
				n := c.Nodes[i]
				if node.MembershipConflicts(n, "cluster_id") == 0 {
					return false, n.ID() + " counted no cluster_id conflict"
				}
				found := false
				for _, r := range n.Status().Refusals {
					found = found || (r.Reason == "cluster_id" && strings.Contains(r.Detail, "another cluster"))
				}
				if !found {
					return false, n.ID() + " Status().Refusals says nothing about the other cluster"
				}
			}
			return true, ""
		})
	})
}
