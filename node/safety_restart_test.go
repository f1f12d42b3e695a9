package node_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
)

// Issue 13 #5. Three voters; one has crashed; a second is restarted
// gracefully (a rolling deploy). Before the fix the graceful stop removed
// the voter from the configuration at once, leaving {survivor, crashed}:
// after the restart two of three processes were up and there was no
// quorum. Required: the cluster grants again once the restarted replica is
// back.
func TestSafetyGracefulRestartDuringOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Gossip: true, Durable: true})
		l := c.WaitLeader(20 * time.Second)
		c.WaitReady(20 * time.Second)
		crashed, restarted := (l+1)%3, (l+2)%3
		c.Crash(crashed)
		c.Stop(restarted)
		c.Restart(restarted)
		for _, i := range []int{l, restarted} {
			if tok := tryGrant(c.Nodes[i], "x"+clustertest.ID(i), 20*time.Second); tok == 0 {
				t.Fatalf("no grant through %s with two of three replicas up: %s", clustertest.ID(i), servers5(c.Nodes[i]))
			}
		}
	})
}

// Issue 13 #6. Stop every replica gracefully, one after the other, then
// start two of them (a quorum), in another order. Before the fix each
// graceful stop removed the replica from the configuration and the
// restarted ones stayed not ready forever. Required: they resume with the
// state intact and tokens increasing; so does a restart of all three in
// any order.
func TestSafetyStopAllStartAll(t *testing.T) {
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
		last := g.Token
		for round, order := range [][]int{{0, 1}, {2, 1, 0}} {
			for i := range c.Nodes {
				c.Stop(i)
			}
			for _, i := range order {
				c.Restart(i)
			}
			for _, i := range order {
				rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				err := c.Nodes[i].WaitReady(rctx)
				cancel()
				if err != nil {
					t.Fatalf("round %d: %s not ready after the restart: %v (%s)", round, clustertest.ID(i), err, servers5(c.Nodes[i]))
				}
				if err := c.Nodes[i].Sync(ctx); err != nil {
					t.Fatal(err)
				}
				if h, ok := c.Nodes[i].Holder("kept"); !ok || h.Token != g.Token {
					t.Fatalf("round %d: %s lost the lock table: %+v %v", round, clustertest.ID(i), h, ok)
				}
				tok := tryGrant(c.Nodes[i], "new-"+clustertest.ID(i)+string(rune('a'+round)), 20*time.Second)
				if tok <= last {
					t.Fatalf("round %d: token %d after %d", round, tok, last)
				}
				last = tok
			}
		}
	})
}
