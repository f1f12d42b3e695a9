package node_test

import (
	"context"
	"crypto/rand"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/fsm"
	"github.com/raftlock/raftlock/internal/fsmwire"
	"github.com/raftlock/raftlock/internal/lockinfo"
	"github.com/raftlock/raftlock/internal/replica"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

func newOwner() lockinfo.OwnerID {
	var o lockinfo.OwnerID
	rand.Read(o[:])
	return o
}

// startMemCluster starts three nodes on a fresh memnet network (call it in
// a synctest bubble) and returns the cluster, once every node is ready, with
// its leader.
func startMemCluster(t *testing.T) (*clustertest.Cluster, int) {
	t.Helper()
	c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New()})
	leader := c.WaitLeader(10 * time.Second)
	c.WaitReady(10 * time.Second)
	return c, leader
}

func openSession(t *testing.T, ctx context.Context, n *node.Node, ttl time.Duration) lockinfo.SessionID {
	t.Helper()
	r, err := replica.Of(n).Apply(ctx, fsm.OpenSession{TTL: ttl, Description: n.ID()})
	if err != nil || r.Status != fsmwire.StatusOK {
		t.Fatalf("open session on %s: %v %+v", n.ID(), err, r)
	}
	return r.Session
}

func TestElectApplyFromLeaderAndFollowers(t *testing.T) {
	for _, size := range []int{3, 5} {
		t.Run(map[int]string{3: "3 nodes", 5: "5 nodes"}[size], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := clustertest.Start(t, clustertest.Options{Nodes: size, Net: memnet.New()})
				leader := c.WaitLeader(10 * time.Second)
				c.WaitReady(10 * time.Second)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()

				var last lockinfo.Token
				for i, n := range c.Nodes {
					s := openSession(t, ctx, n, time.Minute)
					o := newOwner()
					r, err := replica.Of(n).Apply(ctx, fsm.Acquire{Session: s, Lock: "l" + clustertest.ID(i), Owner: o})
					if err != nil || r.Status != fsmwire.StatusGranted {
						t.Fatalf("acquire via %s (leader %s): %v %+v", n.ID(), clustertest.ID(leader), err, r)
					}
					if r.Token <= last {
						t.Fatalf("token %d after %d", r.Token, last)
					}
					last = r.Token
					// Read-your-writes: the node that proposed already shows it.
					h, ok := n.Holder("l" + clustertest.ID(i))
					if !ok || h.Owner != o || h.Token != r.Token {
						t.Fatalf("%s does not show its own grant: %+v %v", n.ID(), h, ok)
					}
				}
				// Every replica converges on the same state.
				requireConverged(t, ctx, c.Nodes...)
			})
		})
	}
}

func TestApplyRefusesBadCommands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clustertest.Start(t, clustertest.Options{Nodes: 1, Net: memnet.New()})
		c.WaitLeader(5 * time.Second)
		ctx := context.Background()
		for _, cmd := range []fsm.Command{nil, fsm.Tick{}, fsm.ExpireSessions{Sessions: []lockinfo.SessionID{1}},
			fsm.Acquire{Session: 1, Lock: "", Owner: newOwner()}, fsm.OpenSession{TTL: -1}} {
			if _, err := replica.Of(c.Nodes[0]).Apply(ctx, cmd); !errors.Is(err, node.ErrInvalidArgument) {
				t.Fatalf("%#v: err = %v", cmd, err)
			}
		}
		if st := c.Nodes[0].Stats(); st.Sessions != 0 {
			t.Fatalf("refused commands changed the state: %+v", st)
		}
	})
}
