package node_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/raftlock/raftlock/internal/devcerts"
	"github.com/raftlock/raftlock/internal/testing/clustertest"
	"github.com/raftlock/raftlock/internal/testing/memnet"
	"github.com/raftlock/raftlock/node"
)

// A node that left (Leave) and is started again on its data dir used to
// start and sit idle: outside its own last configuration it never stands
// for election and nobody adds it back, while the operator sees a running
// process. Required: Start refuses the data dir with ErrDecommissioned
// (like a removed etcd member) and starts nothing; started with an empty
// data dir the node joins again, as a new member.
func TestLeftDataDirRefused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Durable: true})
		c.WaitLeader(20 * time.Second)
		c.WaitReady(20 * time.Second)
		c.Leave(2)
		err := c.TryLaunch(2)
		if !errors.Is(err, node.ErrDecommissioned) {
			t.Fatalf("start on the data dir of a node that left: %v, want ErrDecommissioned", err)
		}
		if c.Nodes[2] != nil {
			t.Fatal("the refused node runs")
		}

		c.Wipe(2)
		c.Launch(2)
		c.Eventually(60*time.Second, func() (bool, string) {
			for _, i := range []int{0, 1, 2} {
				st := c.Nodes[i].Status()
				voters := 0
				for _, sv := range st.Servers {
					if sv.Role == "voter" {
						voters++
					}
				}
				if voters != 3 || st.LeaderID == "" {
					return false, c.Nodes[i].ID() + " has " + servers5(c.Nodes[i])
				}
			}
			return true, ""
		})
		if tok := tryGrant(c.Nodes[2], "after-rejoin", 10*time.Second); tok == 0 {
			t.Fatal("no grant through the rejoined node")
		}
	})
}

// A member may decommission only itself: a leave request that names
// another node's Raft id — from a member with a valid certificate of the
// cluster's CA, but for its own id — is refused and removes nothing; the
// node's own Leave still works.
func TestLeaveOnlyForItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ca, err := devcerts.NewCA("raftlock-test")
		if err != nil {
			t.Fatal(err)
		}
		c := clustertest.Start(t, clustertest.Options{Nodes: 3, Net: memnet.New(), Configure: func(i int, cfg *node.Config) {
			if cfg.TLS, err = ca.MutualTLS(cfg.ID); err != nil {
				t.Fatal(err)
			}
			cfg.TLS.ServerName = "raftlock" // the shared name (memnet hosts are not in the certificates)
		}})
		l := c.WaitLeader(20 * time.Second)
		c.WaitReady(20 * time.Second)
		a, b := (l+1)%3, (l+2)%3
		victim := c.Nodes[b].Status().RaftID
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ok, reason, err := node.AskLeave(ctx, c.Nodes[a], c.Config(l).AdvertiseAddr, victim)
		if err != nil {
			t.Fatal(err)
		}
		if ok || !strings.Contains(reason, "may not speak for") {
			t.Fatalf("%s asked to decommission %s: ok=%v reason %q, want a refusal", c.ID(a), victim, ok, reason)
		}
		time.Sleep(10 * time.Second) // many reconcile rounds
		if v := voterCount(c.Nodes[l]); v != 3 {
			t.Fatalf("after a member asked to remove another: %s", servers5(c.Nodes[l]))
		}

		c.Leave(b)
		c.Eventually(30*time.Second, func() (bool, string) {
			return len(c.Nodes[l].Status().Servers) == 2, "after its own Leave: " + servers5(c.Nodes[l])
		})
	})
}
