package node_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
)

// The leader stops replicating to a server it removes after one
// best-effort AppendEntries; if that one is lost, the removed node never
// sees its removal in its own log, soon knows no leader (it stops hearing
// heartbeats) and used to wait in Leave until its ctx ended
// (ErrNotRemoved), though it had been removed — TestGossipLoopback failed
// so under load. Required: Leave learns of the removal from the leader (it
// asks every server of its configuration while it knows no leader, and the
// leader answers that the removal is committed) and returns nil; the
// others run on without it.
func TestLeaveWhenTheRemovalNeverArrives(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		net := memnet.New()
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: net})
		l := c.WaitLeader(20 * time.Second)
		c.WaitReady(20 * time.Second)
		f := c.Follower(l)

		// From now on nothing the leader writes on its Raft connections to
		// f arrives: AppendEntries and heartbeats, the removal among them
		// (0xA1: the transport's Raft stream). f's own requests to the
		// leader, and their replies, still do.
		net.CutFlows(memnet.FlowFilter{From: c.RaftHost(l), To: c.RaftHost(f), Preface: []byte{0xA1}}, memnet.Forward)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		n := c.Nodes[f]
		c.Nodes[f] = nil
		if err := n.Leave(ctx); err != nil {
			t.Fatalf("Leave of %s while the leader's messages to it are lost: %v", c.ID(f), err)
		}
		c.Eventually(20*time.Second, func() (bool, string) {
			for i, m := range c.Nodes {
				if m == nil {
					continue
				}
				st := m.Status()
				if len(st.Servers) != 2 || st.LeaderID == "" {
					return false, c.ID(i) + " has " + servers5(m)
				}
				for _, s := range st.Servers {
					if s.ID == c.ID(f) {
						return false, c.ID(i) + " still lists " + c.ID(f)
					}
				}
			}
			return true, ""
		})
	})
}
