package node_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/raftlock/raftlock/internal/nodeopts"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// BenchmarkLeadershipRound: one leadership round on the leader of 3 nodes
// (memnet, real time, LAN timings): VerifyLeader (cluster version 3) and
// ConfirmTerm (version 4). Each sends one message to each of the 2 other
// voters; the CPU per round is what a keepalive round costs the cluster.
func BenchmarkLeadershipRound(b *testing.B) {
	for _, v := range []uint64{3, 4} {
		name := map[uint64]string{3: "VerifyLeader", 4: "ConfirmTerm"}[v]
		b.Run(fmt.Sprintf("version=%d/%s", v, name), func(b *testing.B) {
			c := clustertest.Start(b, clustertest.Options{Nodes: 3, Net: memnet.New(), Timing: node.LANTiming(), Configure: func(i int, cfg *node.Config) {
				nodeopts.Hooks(cfg).MaxClusterVersion = func() uint64 { return v }
			}})
			c.WaitLeader(30 * time.Second)
			c.WaitReady(30 * time.Second)
			c.WaitClusterVersion(v, 30*time.Second)
			l := c.Nodes[c.WaitLeader(time.Second)]
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := node.ConfirmLeadership(l); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
