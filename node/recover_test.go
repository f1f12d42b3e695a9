package node_test

import (
	"context"
	"os"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// Issue 13 #7. Three voters; two are destroyed (crashed, data dirs gone).
// The survivor, restarted with Recover, becomes the only voter of its
// cluster with the lock table and the token counter intact; the two
// replaced replicas (new disks, same ids and addresses) join it as new
// members and are promoted. A later restart with Recover still set does
// not recover again.
func TestRecoverFromMajorityLoss(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Gossip: true, Durable: true})
		c.WaitLeader(20 * time.Second)
		c.WaitReady(20 * time.Second)
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		s := openSession(t, ctx, c.Nodes[0], time.Hour)
		g, err := replica.Of(c.Nodes[0]).Apply(ctx, fsm.Acquire{Session: s, Lock: "kept", Owner: newOwner()})
		if err != nil || g.Status != fsmwire.StatusGranted {
			t.Fatalf("acquire: %v %+v", err, g)
		}
		for _, i := range []int{0, 1, 2} {
			c.Crash(i)
		}
		for _, i := range []int{1, 2} {
			if err := os.RemoveAll(c.Config(i).DataDir); err != nil {
				t.Fatal(err)
			}
		}
		// Without Recover the survivor alone cannot serve.
		c.Restart(0)
		if tok := tryGrant(c.Nodes[0], "x", 3*time.Second); tok != 0 {
			t.Fatal("a lone survivor granted without quorum")
		}
		c.Crash(0)
		c.Reconfigure(0, func(cfg *node.Config) { cfg.Recover = true })
		c.Restart(0)
		if err := c.Nodes[0].WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		if h, ok := c.Nodes[0].Holder("kept"); !ok || h.Token != g.Token {
			t.Fatalf("recovered lock table lost the lock: %+v %v", h, ok)
		}
		if tok := tryGrant(c.Nodes[0], "after", 10*time.Second); tok <= g.Token {
			t.Fatalf("token %d after recovery, %d before", tok, g.Token)
		}
		cid := c.Nodes[0].Status().ClusterID
		for _, i := range []int{1, 2} {
			c.Restart(i)
		}
		c.Eventually(60*time.Second, func() (bool, string) {
			return voterCount(c.Nodes[0]) == 3, "grown back: " + servers5(c.Nodes[0])
		})
		for _, i := range []int{1, 2} {
			if err := c.Nodes[i].Sync(ctx); err != nil {
				t.Fatal(err)
			}
			if h, ok := c.Nodes[i].Holder("kept"); !ok || h.Token != g.Token || c.Nodes[i].Status().ClusterID != cid {
				t.Fatalf("%s after joining the recovered cluster: %+v %v, cluster %q (want %q)", clustertest.ID(i), h, ok, c.Nodes[i].Status().ClusterID, cid)
			}
		}
		// Recover is still set: a restart does not shrink the cluster again.
		c.Stop(0)
		c.Restart(0)
		time.Sleep(5 * time.Second)
		if v := voterCount(c.Nodes[1]); v != 3 {
			t.Fatalf("a second Recover shrank the cluster: %s", servers5(c.Nodes[1]))
		}
	})
}
